package stdlib

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// maxRead caps what fs.read and an http response body may bring into a VM.
const maxRead = 16 << 20

// FS is the fs module, built only when the fs capability is granted. Every path must resolve,
// symlinks followed, inside one of roots; a relative path is taken against roots[0].
// read(p) → string; write(p, text); append(p, text); exists(p) → boolean; list(dir) → names;
// mkdir(p) (with parents); remove(p) (a file or an empty directory).
func FS(roots []string) (*Module, error) {
	if len(roots) == 0 {
		return nil, errors.New("fs: no root directories granted")
	}
	clean := make([]string, len(roots))
	for i, r := range roots {
		abs, err := filepath.Abs(r)
		if err != nil {
			return nil, fmt.Errorf("fs root %q: %w", r, err)
		}
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		clean[i] = abs
	}
	j := &jail{roots: clean}
	path := func(a Args, i int) (string, error) {
		p, err := a.String(i)
		if err != nil {
			return "", err
		}
		return j.resolve(p)
	}
	return &Module{Name: "fs", Members: Object{
		"read": Func(func(_ context.Context, a Args) (any, error) {
			p, err := path(a, 0)
			if err != nil {
				return nil, err
			}
			f, err := os.Open(p)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			b, err := io.ReadAll(io.LimitReader(f, maxRead+1))
			if err != nil {
				return nil, err
			}
			if len(b) > maxRead {
				return nil, fmt.Errorf("fs.read %s: larger than %d bytes", p, maxRead)
			}
			return string(b), nil
		}),
		"write": Func(func(_ context.Context, a Args) (any, error) {
			p, err := path(a, 0)
			if err != nil {
				return nil, err
			}
			s, err := a.String(1)
			if err != nil {
				return nil, err
			}
			return nil, os.WriteFile(p, []byte(s), 0o644)
		}),
		"append": Func(func(_ context.Context, a Args) (any, error) {
			p, err := path(a, 0)
			if err != nil {
				return nil, err
			}
			s, err := a.String(1)
			if err != nil {
				return nil, err
			}
			f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return nil, err
			}
			_, err = f.WriteString(s)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			return nil, err
		}),
		"exists": Func(func(_ context.Context, a Args) (any, error) {
			p, err := path(a, 0)
			if err != nil {
				return nil, err
			}
			_, err = os.Stat(p)
			return err == nil, nil
		}),
		"list": Func(func(_ context.Context, a Args) (any, error) {
			p, err := path(a, 0)
			if err != nil {
				return nil, err
			}
			ents, err := os.ReadDir(p)
			if err != nil {
				return nil, err
			}
			out := make([]any, len(ents))
			for i, e := range ents {
				out[i] = e.Name()
			}
			return out, nil
		}),
		"mkdir": Func(func(_ context.Context, a Args) (any, error) {
			p, err := path(a, 0)
			if err != nil {
				return nil, err
			}
			return nil, os.MkdirAll(p, 0o755)
		}),
		"remove": Func(func(_ context.Context, a Args) (any, error) {
			p, err := path(a, 0)
			if err != nil {
				return nil, err
			}
			return nil, os.Remove(p)
		}),
	}}, nil
}

type jail struct{ roots []string }

// resolve maps p to an absolute path inside a root, following symlinks of the part that
// exists so a link cannot lead out.
func (j *jail) resolve(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("%w: empty path", ErrArgument)
	}
	abs := p
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(j.roots[0], abs)
	}
	abs = filepath.Clean(abs)
	real := realPath(abs)
	for _, r := range j.roots {
		if real == r || strings.HasPrefix(real, r+string(filepath.Separator)) {
			return abs, nil
		}
	}
	return "", fmt.Errorf("%w: %s is outside the granted directories (%s)", ErrDenied, p, strings.Join(j.roots, ", "))
}

// realPath resolves symlinks in the longest existing prefix of abs.
func realPath(abs string) string {
	rest := ""
	cur := abs
	for {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return abs
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// HTTP is the http module, built only when the http capability is granted for some hosts.
// request({method, url, headers, body, timeout_ms}) and get(url, {headers}) return {status,
// headers, body}. Only http(s) URLs whose host (or host:port) is listed may be fetched,
// redirects included; bodies are capped at 16 MiB.
func HTTP(client *http.Client, hosts []string) (*Module, error) {
	if len(hosts) == 0 {
		return nil, errors.New("http: no hosts granted")
	}
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	allowed := func(u *url.URL) error {
		if u.Scheme != "http" && u.Scheme != "https" {
			return fmt.Errorf("%w: scheme %q (want http or https)", ErrDenied, u.Scheme)
		}
		host := strings.ToLower(u.Hostname())
		hostPort := host
		if u.Port() != "" {
			hostPort = net.JoinHostPort(host, u.Port())
		}
		if slices.Contains(hosts, host) || slices.Contains(hosts, hostPort) {
			return nil
		}
		return fmt.Errorf("%w: host %s is not in the granted list (%s)", ErrDenied, hostPort, strings.Join(hosts, ", "))
	}
	c := *client
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return allowed(req.URL)
	}
	do := func(ctx context.Context, opts map[string]any) (any, error) {
		method, _ := opts["method"].(string)
		if method == "" {
			method = http.MethodGet
		}
		raw, _ := opts["url"].(string)
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: url %q: %v", ErrArgument, raw, err)
		}
		if err := allowed(u); err != nil {
			return nil, err
		}
		if ms, ok := ToFloat(opts["timeout_ms"]); ok && ms > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(ms*float64(time.Millisecond)))
			defer cancel()
		}
		var body io.Reader
		if b, ok := opts["body"].(string); ok {
			body = strings.NewReader(b)
		}
		req, err := http.NewRequestWithContext(ctx, strings.ToUpper(method), u.String(), body)
		if err != nil {
			return nil, err
		}
		if h, ok := opts["headers"].(map[string]any); ok {
			for k, v := range h {
				req.Header.Set(k, fmt.Sprint(v))
			}
		}
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxRead+1))
		if err != nil {
			return nil, err
		}
		if len(b) > maxRead {
			return nil, fmt.Errorf("http: response body larger than %d bytes", maxRead)
		}
		hdr := map[string]any{}
		for k := range resp.Header {
			hdr[strings.ToLower(k)] = resp.Header.Get(k)
		}
		return map[string]any{"status": int64(resp.StatusCode), "headers": hdr, "body": string(b)}, nil
	}
	return &Module{Name: "http", Members: Object{
		"request": Func(func(ctx context.Context, a Args) (any, error) {
			m, err := a.Map(0)
			if err != nil {
				return nil, err
			}
			return do(ctx, m)
		}),
		"get": Func(func(ctx context.Context, a Args) (any, error) {
			u, err := a.String(0)
			if err != nil {
				return nil, err
			}
			m, err := a.Map(1)
			if err != nil {
				return nil, err
			}
			opts := map[string]any{"url": u, "method": "GET", "headers": m["headers"], "timeout_ms": m["timeout_ms"]}
			return do(ctx, opts)
		}),
	}}, nil
}
