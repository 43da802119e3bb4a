package conformance

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

//go:embed testdata/*.txtar
var fixtureFS embed.FS

// Fixtures returns the fixtures shipped in the binary, sorted by name.
func Fixtures() ([]*Fixture, error) {
	entries, err := fixtureFS.ReadDir("testdata")
	if err != nil {
		return nil, err
	}
	var out []*Fixture
	for _, e := range entries {
		p := path.Join("testdata", e.Name())
		data, err := fixtureFS.ReadFile(p)
		if err != nil {
			return nil, err
		}
		f, err := Parse(p, data)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Target is what Report replays against: a hermes build, started afresh for every fixture
// with the fixture's model, policy and configuration, or a server someone else runs.
type Target struct {
	Binary string // the hermes executable
	URL    string // instead of Binary: http(s)://host:port (the http transport) or ws(s)://…/api/ws (gateway-ws)
	Key    string // the API key of the server at URL
}

// ErrTargetScheme means a target URL is neither HTTP nor WebSocket.
var ErrTargetScheme = errors.New("a target URL must start with http://, https://, ws:// or wss://")

// remote returns the transport and server for a URL target.
func (t Target) remote() (string, Server, error) {
	switch {
	case strings.HasPrefix(t.URL, "http://"), strings.HasPrefix(t.URL, "https://"):
		return "http", HTTPTarget(t.URL, t.Key), nil
	case strings.HasPrefix(t.URL, "ws://"), strings.HasPrefix(t.URL, "wss://"):
		u, err := url.Parse(t.URL)
		if err != nil {
			return "", nil, fmt.Errorf("target %s: %w", t.URL, err)
		}
		if q := u.Query(); q.Get("token") == "" && t.Key != "" {
			q.Set("token", t.Key)
			u.RawQuery = q.Encode()
		}
		return "gateway-ws", TargetServer(u.String()), nil
	}
	return "", nil, fmt.Errorf("%w: %q", ErrTargetScheme, t.URL)
}

// Report replays every fixture on every transport it names against target and prints a
// pass/fail table; only, when set, picks the transports. A URL target runs the remote
// fixtures of its one transport and lists the others as skipped. It returns the number of
// failures.
func Report(ctx context.Context, w io.Writer, target Target, only func(transport string) bool) (int, error) {
	fixtures, err := Fixtures()
	if err != nil {
		return 0, err
	}
	remoteTr, remoteSrv := "", Server(nil)
	if target.URL != "" {
		if remoteTr, remoteSrv, err = target.remote(); err != nil {
			return 0, err
		}
	}
	failed := 0
	row := func(fixture, tr, res string, took time.Duration) {
		t := ""
		if took > 0 {
			t = took.Round(time.Millisecond).String()
		}
		fmt.Fprintf(w, "%-34s %-14s %-6s %s\n", fixture, tr, res, t)
	}
	fmt.Fprintf(w, "%-34s %-14s %-6s %s\n", "FIXTURE", "TRANSPORT", "RESULT", "TIME")
	for _, f := range fixtures {
		for _, tr := range f.Meta.Transports {
			d, ok := Drivers[tr]
			if !ok || (only != nil && !only(tr)) {
				continue
			}
			if target.URL != "" && tr != remoteTr {
				continue
			}
			if target.URL != "" && !f.Meta.Remote {
				row(f.Name, tr, "skip", 0) // it needs its own model, policy or configuration
				continue
			}
			start := time.Now()
			if target.URL != "" {
				err = CheckServer(ctx, f, d, remoteSrv)
			} else {
				dir, derr := os.MkdirTemp("", "hermes-conformance-")
				if derr != nil {
					return failed, derr
				}
				err = Check(ctx, f, d, target.Binary, dir, false)
				os.RemoveAll(dir)
			}
			res := "pass"
			if err != nil {
				res = "FAIL"
				failed++
			}
			row(f.Name, tr, res, time.Since(start))
			if err != nil {
				fmt.Fprintf(w, "    %s\n", strings.ReplaceAll(err.Error(), "\n", "\n    "))
			}
		}
	}
	return failed, nil
}
