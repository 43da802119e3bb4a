// Package redact keeps secrets out of what Hermes prints: `hermes config show`, log lines,
// health and MCP status reports, and error messages. String is the one redaction every
// surface uses for free text; Secret and Values mask fields known to hold secrets; Handler
// applies String to every log record.
//
// String masks, wherever they appear in the text:
//   - the user info of a URL ("https://user:pass@host" becomes "https://***@host");
//   - the value of a query parameter, `name=value` pair or JSON member whose name says it
//     holds a secret (key, token, secret, password, signature, auth, credential, cookie …);
//   - the token after "Bearer";
//   - values shaped like well-known API keys (sk-…, hk-…, ghp_…, AKIA…, …);
//   - every value registered with Register (the configured API keys, provider headers and
//     MCP credentials), also in its URL-escaped form.
//
// Redaction errs on the side of masking: a harmless value that looks like a secret is masked
// too.
package redact

import (
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"unicode"
)

// Mask replaces every secret.
const Mask = "***"

// minRegistered is the shortest value Register accepts: shorter ones would mask ordinary
// words all over the text, and no real key is that short.
const minRegistered = 8

// maxRegistered bounds the registry; past it, further values are ignored (the pattern rules
// still apply).
const maxRegistered = 4096

// Redactor is a set of registered secrets and the String that masks them. The package-level
// functions use one process-wide Redactor; tests may make their own.
type Redactor struct {
	mu      sync.RWMutex
	secrets map[string]bool
	ordered []string // secrets, longest first, so a secret containing another is masked whole
}

var std = &Redactor{}

// Register adds values that must never be printed (API keys, header values, passwords) to the
// process-wide set String masks. Values shorter than 8 bytes are ignored. Registration lasts
// for the life of the process.
func Register(values ...string) { std.Register(values...) }

// String returns s with the secrets it contains masked (see the package doc), using the
// process-wide registered secrets. It never fails; a string with nothing to mask is returned
// unchanged.
func String(s string) string { return std.String(s) }

// Registered returns s with only the registered secrets masked (the configured API keys,
// provider headers and MCP credentials), none of the pattern rules: for text whose look-alike
// values are the user's own business, such as a tool's output, where only the server's own
// credentials must not show.
func Registered(s string) string { return std.registered(s) }

// Register adds values that must never be printed; see the package-level Register.
func (r *Redactor) Register(values ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	changed := false
	for _, v := range values {
		for _, form := range []string{v, url.QueryEscape(v), url.PathEscape(v)} {
			if len(form) < minRegistered || r.secrets[form] || len(r.secrets) >= maxRegistered {
				continue
			}
			if r.secrets == nil {
				r.secrets = map[string]bool{}
			}
			r.secrets[form] = true
			changed = true
		}
	}
	if !changed {
		return
	}
	r.ordered = r.ordered[:0]
	for s := range r.secrets {
		r.ordered = append(r.ordered, s)
	}
	sort.Slice(r.ordered, func(i, j int) bool {
		if len(r.ordered[i]) != len(r.ordered[j]) {
			return len(r.ordered[i]) > len(r.ordered[j])
		}
		return r.ordered[i] < r.ordered[j]
	})
}

// Secret masks a value known to be secret: empty stays empty (so "not set" stays visible),
// anything else becomes Mask.
func Secret(s string) string {
	if s == "" {
		return ""
	}
	return Mask
}

// Values returns m with every value masked by Secret (provider headers, MCP env and headers:
// all of them may carry credentials, whatever their names).
func Values(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = Secret(v)
	}
	return out
}

// secretWords are the name parts that mark a secret; a part that ends in one of suffixWords
// (apikey, accesstoken, clientsecret) counts too.
var (
	secretWords = map[string]bool{
		"key": true, "apikey": true, "token": true, "secret": true, "password": true, "passwd": true,
		"pass": true, "pwd": true, "signature": true, "sig": true, "auth": true, "authorization": true,
		"credential": true, "credentials": true, "cookie": true, "bearer": true, "jwt": true,
		"private": true,
	}
	suffixWords = []string{"key", "token", "secret", "password", "passwd", "signature"}
)

// SecretName reports whether a name (header, query parameter, variable, log attribute) says
// its value is a secret: one of its words (split at punctuation and camelCase) is key, token,
// secret, password, signature, auth, credential, cookie and the like. "tokens" (a count) is
// not.
func SecretName(name string) bool {
	for _, w := range words(name) {
		if secretWords[w] {
			return true
		}
		for _, s := range suffixWords {
			if strings.HasSuffix(w, s) {
				return true
			}
		}
	}
	return false
}

// words splits a name at non-alphanumerics and lower-to-upper case changes, lowercased.
func words(name string) []string {
	var out []string
	var cur []rune
	prevLower := false
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	for _, r := range name {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
			prevLower = false
			continue
		case unicode.IsUpper(r) && prevLower:
			flush()
		}
		cur = append(cur, r)
		prevLower = unicode.IsLower(r) || unicode.IsDigit(r)
	}
	flush()
	return out
}

// patterns are compiled on first use, not at package init: every hermes command links this
// package, and most of them (an editor's `hermes acp` among them) start and answer without
// logging a line.
var patterns = sync.OnceValue(func() *redactPatterns {
	return &redactPatterns{
		// scheme://userinfo@ — the user info may hold a password or be a token by itself.
		userinfo: regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://)([^/?#@\s"'<>]+)@`),
		// ?name=value, &name=value, ;name=value, and bare name=value in free text.
		pair: regexp.MustCompile(`([A-Za-z0-9_.\-]+)=("[^"]*"|[^\s&#;,"'<>)\]}]*)`),
		// "name": "value" in JSON text.
		json: regexp.MustCompile(`"([^"\\]{1,100})"\s*:\s*"((?:[^"\\]|\\.)*)"`),
		// Authorization header values.
		bearer: regexp.MustCompile(`(?i)\b(bearer)\s+([A-Za-z0-9._~+/=\-]+)`),
		// Shapes of well-known keys: OpenAI/Anthropic/OpenRouter (sk-), Hermes (hk-), GitHub,
		// GitLab, Slack, AWS access key ids, Google API keys.
		shape: regexp.MustCompile(`\b(?:sk-[A-Za-z0-9_\-]{16,}|hk-[0-9a-fA-F]{32,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_\-]{20,}|xox[abeprs]-[A-Za-z0-9\-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_\-]{35})`),
	}
})

type redactPatterns struct{ userinfo, pair, json, bearer, shape *regexp.Regexp }

// String returns s with the secrets it contains masked; see the package-level String.
func (r *Redactor) String(s string) string {
	if s == "" {
		return s
	}
	s = r.registered(s)
	p := patterns()
	s = p.userinfo.ReplaceAllString(s, "${1}"+Mask+"@")
	s = p.pair.ReplaceAllStringFunc(s, func(m string) string {
		name, value, _ := strings.Cut(m, "=")
		if !SecretName(name) || !maskable(value) {
			return m
		}
		return name + "=" + Mask
	})
	s = p.json.ReplaceAllStringFunc(s, func(m string) string {
		sub := p.json.FindStringSubmatch(m)
		if sub == nil || !SecretName(sub[1]) || !maskable(sub[2]) {
			return m
		}
		return `"` + sub[1] + `":"` + Mask + `"`
	})
	s = p.bearer.ReplaceAllString(s, "${1} "+Mask)
	s = p.shape.ReplaceAllString(s, Mask)
	// A mask inserted next to other text could in principle spell a registered secret again;
	// masking shortens the text, so this ends.
	for {
		t := r.registered(s)
		if t == s {
			return s
		}
		s = t
	}
}

// maskable reports whether a value found next to a secret name is worth masking: empty
// values, the mask itself and plain numbers (counts, ports) are left alone.
func maskable(v string) bool {
	v = strings.Trim(v, `"`)
	if v == "" || v == Mask {
		return false
	}
	for _, r := range v {
		if r < '0' || r > '9' {
			return true
		}
	}
	return false
}

// registered masks every registered secret in s.
func (r *Redactor) registered(s string) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, v := range r.ordered {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, Mask)
		}
	}
	return s
}
