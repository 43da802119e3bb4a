package danger

import (
	"slices"
	"strings"
)

// Options tells the matcher about the host. It reads nothing from the environment itself, so
// one process can check commands for several profiles.
type Options struct {
	// Home is the user's home directory; absolute paths under it are folded to ~/ before
	// matching. Empty disables folding.
	Home string
	// HermesHome is the profile home; paths under it are folded to ~/.hermes/.
	HermesHome string
	// SudoPasswordConfigured disables the sudo stdin guard: when a password is configured the
	// terminal tool supplies -S itself, so an explicit -S is no longer a guessing attempt.
	SudoPasswordConfigured bool
}

// Match is one dangerous pattern that matched.
type Match struct {
	// Key is the pattern's description: what clients display and what an approval "for this
	// session" or "always" is remembered under.
	Key string
}

// Result is the verdict on one command.
type Result struct {
	// Hardline means the command must never run; no approval mode overrides it. Set by a
	// hardline rule, by the sudo stdin guard (Reason == ReasonSudoStdin) and for commands
	// too long to inspect (Reason == ReasonTooLong).
	Hardline bool
	// Reason describes why a Hardline command is blocked.
	Reason string
	// Matches are the dangerous patterns that need approval, deduplicated, in rule order.
	// Empty when Hardline is set: a blocked command needs no approval.
	Matches []Match
}

// MaxCommandBytes bounds the work per command. Longer input is blocked rather than partly
// inspected: a suffix nobody looked at must not run.
const MaxCommandBytes = 128 << 10

// Payload recursion bounds: `bash -c "bash -c '...'"` nests, and each level is checked as a
// command of its own.
const (
	maxPayloadDepth = 3
	maxVariants     = 24
)

// variant is one normalised spelling of the command. plain variants feed every rule except
// the quote-masked hardline rules, which see only masked ones.
type variant struct {
	text, lower   string
	words         wordSet
	plain, masked bool
}

// Check classifies a command. It is safe for concurrent use.
func Check(command string, o Options) Result {
	if len(command) > MaxCommandBytes {
		return Result{Hardline: true, Reason: ReasonTooLong}
	}
	t := tables()
	vs := variants(command, &o)
	hl := t.hardline
	for i := range hl {
		if r := &hl[i]; r.matches(vs) {
			return Result{Hardline: true, Reason: r.key}
		}
	}
	if !o.SudoPasswordConfigured {
		for _, v := range vs {
			if v.plain && strings.Contains(v.lower, "sudo") && t.sudoStdin.match(v.text, v.lower) {
				return Result{Hardline: true, Reason: ReasonSudoStdin}
			}
		}
	}
	var res Result
	dg := t.dangerous
	for i := range dg {
		r := &dg[i]
		if res.has(r.key) || !r.matches(vs) {
			continue
		}
		res.Matches = append(res.Matches, Match{Key: r.key})
	}
	return res
}

func (res *Result) has(key string) bool {
	for _, m := range res.Matches {
		if m.Key == key {
			return true
		}
	}
	return false
}

func (r *rule) matches(vs []variant) bool {
	for i := range vs {
		v := &vs[i]
		if (r.masked && !v.masked) || (!r.masked && !v.plain) {
			continue
		}
		if r.candidate(v) && r.m.match(v.text, v.lower) {
			return true
		}
	}
	return false
}

// Variants returns the normalised spellings of command that the rules are matched against,
// in order: the flat normalisation, the command-start-marked one, the quote-masked one, then
// the same for each -c/eval payload. Identical spellings appear once.
func Variants(command string, o Options) []string {
	if len(command) > MaxCommandBytes {
		return nil
	}
	vs := variants(command, &o)
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.text
	}
	return out
}

func variants(command string, o *Options) []variant {
	tables() // the word sets of a variant index wordIndex, which building the tables fills
	var vs []variant
	addVariants(&vs, command, o, 0)
	return vs
}

func addVariants(vs *[]variant, command string, o *Options, depth int) {
	sc := lex(prepare(command, o))
	// A carrier (eval, sh -c, source) hands quoted text to a shell, so quoted text is code, not
	// prose: the positionless rules then scan the unmasked flat variant instead.
	add(vs, unescape(sc.render(false, false)), true, sc.carrier)
	add(vs, unescape(sc.render(true, false)), true, false)
	if !sc.carrier {
		add(vs, unescape(sc.render(false, true)), false, true)
	}
	if depth+1 >= maxPayloadDepth {
		return
	}
	for _, p := range sc.payloads {
		if len(*vs) >= maxVariants {
			return
		}
		addVariants(vs, p, o, depth+1)
	}
}

// add appends a variant, merging its roles into an identical existing one.
func add(vs *[]variant, text string, plain, masked bool) {
	for i := range *vs {
		if v := &(*vs)[i]; v.text == text {
			v.plain = v.plain || plain
			v.masked = v.masked || masked
			return
		}
	}
	lower := asciiLower(text)
	*vs = append(*vs, variant{text: text, lower: lower, words: wordsOf(lower), plain: plain, masked: masked})
}

// HardlineRules returns the hardline rule descriptions in evaluation order.
func HardlineRules() []string { return keys(hardline()) }

// DangerousKeys returns the distinct dangerous pattern keys in rule order.
func DangerousKeys() []string { return keys(dangerous()) }

func keys(rs []rule) []string {
	var out []string
	for _, r := range rs {
		if !slices.Contains(out, r.key) {
			out = append(out, r.key)
		}
	}
	return out
}
