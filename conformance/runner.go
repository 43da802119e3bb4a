package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Fixture is one parsed fixture file.
type Fixture struct {
	Name  string
	Path  string
	Meta  Meta
	arch  archive
	steps map[string][]Step // by transport; "" is client.jsonl, the default
}

// Meta is meta.json.
type Meta struct {
	Transports []string `json:"transports"`
	Ignore     []string `json:"ignore,omitempty"` // event types dropped before comparing
	Config     string   `json:"config,omitempty"` // config.yaml contents
	// Remote marks a fixture that needs nothing of its own from the server (no model, policy
	// or configuration), so it also runs against a server someone else started.
	Remote bool `json:"remote,omitempty"`
}

// Step is one line of client.jsonl.
type Step struct {
	Send      json.RawMessage `json:"send,omitempty"`
	Raw       string          `json:"raw,omitempty"` // sent as is (malformed input)
	Until     string          `json:"until,omitempty"`
	Answer    string          `json:"answer,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Await     json.RawMessage `json:"await,omitempty"` // read until the response to this request id
	Close     bool            `json:"close,omitempty"`
	Reconnect bool            `json:"reconnect,omitempty"`
	// Controller registers and connects a browser controller (see Controllers).
	Controller *struct {
		Capabilities []string `json:"capabilities"`
	} `json:"controller,omitempty"`
}

// Load reads a fixture.
func Load(path string) (*Fixture, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse reads a fixture from its bytes; path names it (and is where Record writes).
func Parse(path string, data []byte) (*Fixture, error) {
	a := parseArchive(data)
	f := &Fixture{Name: strings.TrimSuffix(filepath.Base(path), ".txtar"), Path: path, arch: a}
	meta, ok := a.get("meta.json")
	if !ok {
		return nil, fmt.Errorf("%s: no meta.json", path)
	}
	if err := json.Unmarshal(meta, &f.Meta); err != nil {
		return nil, fmt.Errorf("%s: meta.json: %w", path, err)
	}
	f.steps = map[string][]Step{}
	for _, file := range a.Files {
		tr, isClient := "", file.Name == "client.jsonl"
		if name, ok := strings.CutPrefix(file.Name, "client/"); ok {
			tr, isClient = strings.TrimSuffix(name, ".jsonl"), true
		}
		if !isClient {
			continue
		}
		for i, line := range strings.Split(string(file.Data), "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			var s Step
			if err := json.Unmarshal([]byte(line), &s); err != nil {
				return nil, fmt.Errorf("%s: %s line %d: %w", path, file.Name, i+1, err)
			}
			f.steps[tr] = append(f.steps[tr], s)
		}
	}
	for _, tr := range f.Meta.Transports {
		if _, ok := f.steps[tr]; !ok {
			if _, ok := f.steps[""]; !ok {
				return nil, fmt.Errorf("%s: no client.jsonl (or client/%s.jsonl)", path, tr)
			}
		}
	}
	if _, ok := a.get("cassette.json"); !ok {
		return nil, fmt.Errorf("%s: no cassette.json", path)
	}
	return f, nil
}

// Prepare lays the fixture out in dir and returns the environment for the build under test.
func (f *Fixture) Prepare(binary, dir string) (Env, error) {
	home, work := filepath.Join(dir, "home"), filepath.Join(dir, "work")
	for _, d := range []string{home, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return Env{}, err
		}
	}
	cas, _ := f.arch.get("cassette.json")
	casPath := filepath.Join(dir, "cassette.json")
	if err := os.WriteFile(casPath, cas, 0o600); err != nil {
		return Env{}, err
	}
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(f.Meta.Config), 0o600); err != nil {
		return Env{}, err
	}
	for _, file := range f.arch.Files { // files/NAME are the working directory's contents
		name, ok := strings.CutPrefix(file.Name, "files/")
		if !ok {
			continue
		}
		p := filepath.Join(work, filepath.FromSlash(name))
		if !strings.HasPrefix(p, work+string(filepath.Separator)) {
			return Env{}, fmt.Errorf("%s: %s is outside the working directory", f.Path, file.Name)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return Env{}, err
		}
		if err := os.WriteFile(p, file.Data, 0o644); err != nil {
			return Env{}, err
		}
	}
	vars := []string{"HERMES_HOME=" + home, "HERMES_MODEL=replay:" + casPath, "HERMES_POLICY="}
	for _, name := range []string{"policy.js", "policy.lua"} {
		if src, ok := f.arch.get(name); ok {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, src, 0o600); err != nil {
				return Env{}, err
			}
			vars = append(vars, "HERMES_POLICY="+p)
		}
	}
	return Env{Binary: binary, Dir: work, Vars: vars}, nil
}

// Run replays the fixture on srv, reading its frames in dialect d, and returns the normalised
// frames received, one line each, prefixed with the step that received them. workdir, when
// known, is what client frames may name as $workdir.
func (f *Fixture) Run(ctx context.Context, srv Server, transport string, d Dialect, workdir string, greets bool) ([]string, error) {
	steps, ok := f.steps[transport]
	if !ok {
		steps = f.steps[""]
	}
	r := &playback{f: f, ctx: ctx, srv: srv, d: d, greets: greets, ph: newPlaceholders()}
	if workdir != "" {
		r.ph.byName["$workdir"] = workdir
		r.ph.root = filepath.Dir(workdir)
		r.ph.byName["$dir"] = r.ph.root // the fixture's cassette is $dir/cassette.json
	}
	var err error
	if r.conn, err = srv.Connect(); err != nil {
		return nil, err
	}
	r.conns = append(r.conns, r.conn)
	defer func() {
		for _, c := range r.conns { // Close may come twice: a close step, then here
			c.Close()
		}
	}()
	if greets { // the connection's first frame
		if err := r.receive(0, anyFrame); err != nil {
			return r.out, err
		}
	}
	for i, s := range steps {
		if err := r.step(i+1, s); err != nil {
			return r.out, err
		}
	}
	return r.out, nil
}

// playback is one run of a fixture's steps on one server.
type playback struct {
	f      *Fixture
	ctx    context.Context
	srv    Server
	d      Dialect
	greets bool
	ph     *placeholders
	conn   Conn   // the current connection
	conns  []Conn // every connection opened, closed at the end
	out    []string
}

func anyFrame(map[string]any) bool { return true }

// receive reads frames, recording each, until stop accepts one.
func (r *playback) receive(step int, stop func(map[string]any) bool) error {
	for {
		raw, err := r.conn.Recv(r.ctx)
		if err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("step %d: server sent invalid JSON %q", step, raw)
		}
		done := stop(m)
		if !r.f.ignored(r.d.Event(m)) {
			if id, ok := r.d.ServerRequest(m); ok {
				m["id"] = r.ph.name("request", id) // captured whatever its form
			}
			r.out = append(r.out, fmt.Sprintf("%d %s", step, canonical(r.ph.normalize(m))))
		}
		if done {
			return nil
		}
	}
}

// step performs one step: at most one of close, reconnect, send, raw and answer, then the
// await and until reads.
func (r *playback) step(n int, s Step) error {
	var frame []byte
	switch {
	case s.Controller != nil:
		cs, ok := r.srv.(Controllers)
		if !ok {
			return fmt.Errorf("step %d: this transport cannot connect a browser controller", n)
		}
		reg, err := cs.Controller(r.ctx, s.Controller.Capabilities)
		if err != nil {
			return fmt.Errorf("step %d: %w", n, err)
		}
		r.out = append(r.out, fmt.Sprintf("%d %s", n, canonical(r.ph.normalize(map[string]any{"controller": reg}))))
		return nil
	case s.Close:
		return r.conn.Close()
	case s.Reconnect:
		c, err := r.srv.Connect()
		if err != nil {
			return fmt.Errorf("step %d: %w", n, err)
		}
		r.conn = c
		r.conns = append(r.conns, c)
		if r.greets {
			return r.receive(n, anyFrame)
		}
		return nil
	case s.Raw != "":
		frame = []byte(s.Raw)
	case s.Answer != "":
		actual, ok := r.ph.byName[s.Answer]
		if !ok {
			return fmt.Errorf("step %d: no request captured as %s", n, s.Answer)
		}
		res, err := r.ph.substitute(string(s.Result))
		if err != nil {
			return fmt.Errorf("step %d: %w", n, err)
		}
		answer, err := r.d.Answer(actual, json.RawMessage(res))
		if err != nil {
			return fmt.Errorf("step %d: %w", n, err)
		}
		if err := r.conn.Send(answer); err != nil { // an answer gets no reply of its own
			return fmt.Errorf("step %d: %w", n, err)
		}
	case len(s.Send) > 0:
		sub, err := r.ph.substitute(string(s.Send))
		if err != nil {
			return fmt.Errorf("step %d: %w", n, err)
		}
		frame = []byte(sub)
	}
	if frame != nil {
		if err := r.conn.Send(frame); err != nil {
			return fmt.Errorf("step %d: %w", n, err)
		}
		if reply := r.d.Reply(frame); reply != nil {
			if s.Until != "" && len(s.Await) == 0 {
				// read to the until frame; the reply comes on the way, unless it failed
				var failed bool
				if err := r.receive(n, func(m map[string]any) bool {
					if ok, bad := reply(m); ok && bad {
						failed = true
						return true
					}
					return r.d.Until(m, s.Until)
				}); err != nil {
					return err
				}
				if failed {
					return fmt.Errorf("step %d: the request failed, so %s will not come", n, s.Until)
				}
				return nil
			}
			if err := r.receive(n, func(m map[string]any) bool { ok, _ := reply(m); return ok }); err != nil {
				return err
			}
		}
	}
	if len(s.Await) > 0 {
		match := r.d.ReplyTo(s.Await)
		if match == nil {
			return fmt.Errorf("step %d: this transport has no request ids to await", n)
		}
		if err := r.receive(n, match); err != nil {
			return err
		}
	}
	if s.Until != "" {
		return r.receive(n, func(m map[string]any) bool { return r.d.Until(m, s.Until) })
	}
	return nil
}

// alwaysIgnored events carry timing, not contract: tool.progress is rate-limited output.
var alwaysIgnored = []string{"tool.progress"}

func (f *Fixture) ignored(event string) bool {
	return event != "" && (slices.Contains(f.Meta.Ignore, event) || slices.Contains(alwaysIgnored, event))
}

// Want returns the recorded frames for a transport.
func (f *Fixture) Want(transport string) ([]string, bool) {
	data, ok := f.arch.get("want/" + transport + ".jsonl")
	if !ok {
		return nil, false
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out, true
}

// Record stores frames as the expectation for a transport and rewrites the file.
func (f *Fixture) Record(transport string, frames []string) error {
	f.arch.set("want/"+transport+".jsonl", []byte(strings.Join(frames, "\n")+"\n"))
	return os.WriteFile(f.Path, f.arch.format(), 0o644)
}

// Diff describes the first difference between want and got, or "" when they are equal.
func Diff(want, got []string) string {
	for i := 0; i < max(len(want), len(got)); i++ {
		var w, g string
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		if w != g {
			return fmt.Sprintf("frame %d differs:\n  want: %s\n  got:  %s", i+1, orNone(w), orNone(g))
		}
	}
	return ""
}

func orNone(s string) string {
	if s == "" {
		return "(no frame)"
	}
	return s
}

// ErrNoExpectation means a fixture has never been recorded for a transport.
var ErrNoExpectation = errors.New("no recorded expectation (run with -update)")

// Check replays f on a fresh server of driver d and compares with the recording. With
// update it records instead.
func Check(ctx context.Context, f *Fixture, d Driver, binary, dir string, update bool) error {
	env, err := f.Prepare(binary, dir)
	if err != nil {
		return err
	}
	srv, err := d.Start(env)
	if err != nil {
		return err
	}
	defer srv.Close()
	return f.verify(ctx, srv, d, env.Dir, update)
}

// CheckServer replays f on srv, a server someone else runs, with the frame rules of driver
// d, and compares with the recording. Only fixtures marked remote make sense there: the
// server has its own model, policy and configuration.
func CheckServer(ctx context.Context, f *Fixture, d Driver, srv Server) error {
	return f.verify(ctx, srv, d, "", false)
}

func (f *Fixture) verify(ctx context.Context, srv Server, d Driver, workdir string, update bool) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	g, _ := d.(Greeter)
	got, err := f.Run(ctx, srv, d.Name(), dialectOf(d), workdir, g != nil && g.Greets())
	want, ok := f.Want(d.Name())
	if err != nil {
		if ok && !update { // the first drift explains a run that went off the rails
			if diff := Diff(want[:min(len(want), len(got))], got); diff != "" {
				return fmt.Errorf("%s\n(then: %v)", diff, err)
			}
		}
		return fmt.Errorf("%w\nframes so far:\n  %s", err, strings.Join(got, "\n  "))
	}
	if update {
		return f.Record(d.Name(), got)
	}
	if !ok {
		return ErrNoExpectation
	}
	if diff := Diff(want, got); diff != "" {
		return errors.New(diff)
	}
	return nil
}
