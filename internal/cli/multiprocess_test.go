package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/gateway/gwclient"
)

// One home, many processes: every surface at once on one HERMES_HOME, through its store
// process, with the real binary (this test binary acting as hermes) in real subprocesses.

// echoModel answers every prompt with "echo " and the prompt, so turns of processes that share
// one fake model at once get their own answers whatever the order of their requests.
func echoModel(t *testing.T) *openaitest.Server {
	return openaitest.New(t, openaitest.WithResponder(func(r openaitest.Request) openaitest.Response {
		var body struct {
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if json.Unmarshal(r.Body, &body) != nil || len(body.Messages) == 0 {
			return openaitest.Text("unreadable request")
		}
		last := body.Messages[len(body.Messages)-1]
		var text string
		if json.Unmarshal(last.Content, &text) != nil {
			var parts []struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal(last.Content, &parts)
			for _, p := range parts {
				text += p.Text
			}
		}
		return openaitest.Text("echo ", text)
	}))
}

// acpProc is a running `hermes acp` with an ACP client connected to its stdio.
type acpProc struct {
	conn    *sdk.ClientSideConnection
	client  *acpClient
	stdin   io.Closer
	stderr  *syncBuffer
	exited  chan struct{} // closed once the process is gone; waitErr is then set
	waitErr error
}

// startACP starts `hermes acp` with env in cwd and connects a client to it; the process ends
// (stdin closed, then killed if it lingers) when the test does.
func startACP(t *testing.T, cwd string, env []string) *acpProc {
	t.Helper()
	cmd := hermesCmd(t, cwd, env, "acp")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &acpProc{client: &acpClient{}, stdin: stdin, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-p.exited
		}
	})
	p.conn = sdk.NewClientSideConnection(p.client, stdin, stdout)
	p.conn.SetLogger(slog.New(slog.DiscardHandler))
	return p
}

// close ends stdin and waits for a clean exit.
func (p *acpProc) close() error {
	p.stdin.Close()
	select {
	case <-p.exited:
		if p.waitErr != nil {
			return fmt.Errorf("hermes acp exited with %v:\n%s", p.waitErr, p.stderr.String())
		}
		return nil
	case <-time.After(60 * time.Second):
		return fmt.Errorf("hermes acp still running 60s after its stdin closed:\n%s", p.stderr.String())
	}
}

// said returns the agent's message text streamed so far and forgets it.
func (p *acpProc) said() string {
	p.client.mu.Lock()
	defer p.client.mu.Unlock()
	s := p.client.text.String()
	p.client.text.Reset()
	return s
}

// newSessionTurn opens the client, creates a session and runs one prompt in it.
func (p *acpProc) newSessionTurn(ctx context.Context, cwd, prompt string) (string, error) {
	if _, err := p.conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		return "", fmt.Errorf("initialize: %w\n%s", err, p.stderr.String())
	}
	s, err := p.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{}})
	if err != nil {
		return "", fmt.Errorf("session/new: %w\n%s", err, p.stderr.String())
	}
	return string(s.SessionId), p.prompt(ctx, string(s.SessionId), prompt)
}

func (p *acpProc) prompt(ctx context.Context, sid, text string) error {
	r, err := p.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sdk.SessionId(sid), Prompt: []sdk.ContentBlock{sdk.TextBlock(text)}})
	if err != nil || r.StopReason != sdk.StopReasonEndTurn {
		return fmt.Errorf("session/prompt %q: %+v %v\n%s", text, r, err, p.stderr.String())
	}
	if got := p.said(); got != "echo "+text {
		return fmt.Errorf("session/prompt %q streamed %q", text, got)
	}
	return nil
}

// listACP returns the sessions `session/list` shows, by id, with their titles.
func (p *acpProc) list(ctx context.Context) (map[string]string, error) {
	l, err := p.conn.ListSessions(ctx, sdk.ListSessionsRequest{})
	if err != nil {
		return nil, fmt.Errorf("session/list: %w", err)
	}
	m := map[string]string{}
	for _, s := range l.Sessions {
		m[string(s.SessionId)] = ""
		if s.Title != nil {
			m[string(s.SessionId)] = *s.Title
		}
	}
	return m, nil
}

// gatewayWork creates a session on a `hermes gateway` (stdio), titles it, runs a turn in it
// and saves its spawn tree (a setting); it returns the stored session's id and the setting's key.
func gatewayWork(ctx context.Context, c *gwclient.Client) (sid, tree string, err error) {
	if _, _, err := c.WaitType(ctx, 0, "", "gateway.ready"); err != nil {
		return "", "", fmt.Errorf("gateway.ready: %w", err)
	}
	var created struct {
		SessionID string `json:"session_id"` // this client's handle
		Info      struct {
			Stored string `json:"stored_session_id"`
		} `json:"info"`
	}
	if err := c.CallInto(ctx, "session.create", map[string]any{}, &created); err != nil {
		return "", "", fmt.Errorf("session.create: %w", err)
	}
	if created.Info.Stored == "" {
		return "", "", fmt.Errorf("session.create without a stored session id: %+v", created)
	}
	h := created.SessionID
	if err := c.CallInto(ctx, "session.title", map[string]any{"session_id": h, "title": "titled by the gateway"}, nil); err != nil {
		return "", "", fmt.Errorf("session.title: %w", err)
	}
	from := len(c.Events())
	if err := c.CallInto(ctx, "prompt.submit", map[string]any{"session_id": h, "text": "gateway: hello"}, nil); err != nil {
		return "", "", fmt.Errorf("prompt.submit: %w", err)
	}
	e, _, err := c.WaitType(ctx, from, h, "message.complete")
	if err != nil {
		return "", "", fmt.Errorf("message.complete: %w", err)
	}
	var done struct{ Text, Status string }
	if err := e.Decode(&done); err != nil || done.Text != "echo gateway: hello" || done.Status != "complete" {
		return "", "", fmt.Errorf("gateway turn ended with %s (%v)", e.Payload, err)
	}
	var saved struct{ Path string }
	if err := c.CallInto(ctx, "spawn_tree.save", map[string]any{"session_id": h, "name": "shared"}, &saved); err != nil {
		return "", "", fmt.Errorf("spawn_tree.save: %w", err)
	}
	return created.Info.Stored, saved.Path, nil
}

// hermesRunScript writes a script into dir and runs it with `hermes run`; it returns stdout.
func hermesRunScript(t *testing.T, dir string, env []string, name, src string, args ...string) (string, error) {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		return "", err
	}
	r := hermes(t, dir, env, append([]string{"run", path}, args...)...)
	if r.code != 0 {
		return "", fmt.Errorf("hermes run %s: exit %d\nstdout %s\nstderr %s", name, r.code, r.stdout, r.err)
	}
	return r.stdout, nil
}

// A script as CI runs one: a session of its own, one turn on a scripted model.
const ciTurnScript = `const hermes = require("hermes");
const assert = require("assert");
const s = hermes.create({ model: hermes.fake_model([{ text: "run: done" }]), title: "made by hermes run" });
const out = s.run("run: hello");
assert.equal(out.status, "completed", "turn status");
print("made-by-run " + s.id);
`

// A script as CI reviews sessions: it reads another process's session and lists them all.
const ciReviewScript = `const hermes = require("hermes");
const assert = require("assert");
const h = hermes.open(hermes.args[0]).history();
assert.ok(h.some((r) => r.role === "user" && r.content === "gateway: hello"), "the gateway's prompt");
assert.ok(h.some((r) => r.role === "assistant" && r.content === "echo gateway: hello"), "the gateway's answer");
for (const s of hermes.sessions({ limit: 100 })) print("listed " + s.id);
`

// TestOneHomeEverySurface runs every surface at once on one home: two `hermes serve`, two
// `hermes acp`, a `hermes gateway`, `hermes run` scripts and `hermes sessions`, each doing real
// work (turns over a fake model or a script's scripted model) at the same time. None fails for
// another holding the home, and each sees what the others stored: sessions, settings (a title,
// a saved spawn tree) and a stored response.
func TestOneHomeEverySurface(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	t.Setenv(envStoreProcess, "on")
	t.Setenv(envStoreIdle, "300ms")
	t.Cleanup(func() { waitStoreProcessGone(t, home) })
	model := echoModel(t)
	env := []string{"HERMES_HOME=" + home, "HERMES_MODEL=openai:fake-agent", "OPENAI_BASE_URL=" + model.URL(), "OPENAI_API_KEY=k"}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	serveA := serveHome(t, home, cwd, model.URL())
	serveB := serveHome(t, home, cwd, model.URL())
	acp1, acp2 := startACP(t, cwd, env), startACP(t, cwd, env)
	gw, err := gwclient.Stdio(hermesCmd(t, cwd, env, "gateway"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })

	// Everything at once. The serve calls run here (they may fail the test at once); the rest
	// report to errs.
	var (
		wg                   sync.WaitGroup
		errs                 = make(chan error, 16)
		acp1ID, acp2ID, gwID string
		treeKey, runOut      string
	)
	goWork := func(what string, fn func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(); err != nil {
				errs <- fmt.Errorf("%s: %w", what, err)
			}
		}()
	}
	goWork("acp 1", func() (err error) { acp1ID, err = acp1.newSessionTurn(ctx, cwd, "acp one: hello"); return })
	goWork("acp 2", func() (err error) { acp2ID, err = acp2.newSessionTurn(ctx, cwd, "acp two: hello"); return })
	goWork("gateway", func() (err error) { gwID, treeKey, err = gatewayWork(ctx, gw); return })
	goWork("hermes run", func() (err error) {
		runOut, err = hermesRunScript(t, t.TempDir(), env, "turn.js", ciTurnScript)
		return
	})
	goWork("hermes sessions", func() error {
		for range 3 {
			if r := hermes(t, cwd, env, "sessions"); r.code != 0 {
				return fmt.Errorf("exit %d: %s", r.code, r.err)
			}
		}
		return nil
	})
	code, adm := serveA.call(t, "POST", "/v1/runs", `{"input":"serve: hello","session_id":"made-by-serve"}`)
	if code != 202 {
		t.Fatalf("admission %d %v", code, adm)
	}
	if ev := serveA.terminalEvent(t, adm["run_id"].(string)); ev["event"] != "run.completed" {
		t.Fatalf("run ended with %v:\n%s", ev, serveA.logs.String())
	}
	code, resp := serveA.call(t, "POST", "/v1/responses", `{"model":"openai:fake-agent","input":"respond: hello","store":true}`)
	if code != 200 || resp["status"] != "completed" {
		t.Fatalf("response %d %v", code, resp)
	}
	respID := resp["id"].(string)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	m := regexp.MustCompile(`made-by-run (\S+)`).FindStringSubmatch(runOut)
	if m == nil {
		t.Fatalf("hermes run printed %q", runOut)
	}
	runID := m[1]

	// Each process sees what the others stored.
	all := []string{"made-by-serve", acp1ID, acp2ID, gwID, runID}
	ls := hermes(t, cwd, env, "sessions")
	for _, id := range all {
		if ls.code != 0 || !strings.Contains(ls.stdout, id) {
			t.Fatalf("hermes sessions lacks %s: exit %d\n%s%s\nhermes run printed %s", id, ls.code, ls.stdout, ls.err, runOut)
		}
	}
	for _, p := range []*acpProc{acp1, acp2} {
		got, err := p.list(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range all {
			if _, ok := got[id]; !ok {
				t.Fatalf("acp session/list lacks %s: %v", id, got)
			}
		}
		if got[gwID] != "titled by the gateway" {
			t.Fatalf("acp sees the gateway's session titled %q", got[gwID])
		}
	}
	var listed struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	if err := gw.CallInto(ctx, "session.list", map[string]any{"limit": 100}, &listed); err != nil {
		t.Fatal(err)
	}
	var gwSees []string
	for _, s := range listed.Sessions {
		gwSees = append(gwSees, s.ID)
	}
	for _, id := range all {
		if !slices.Contains(gwSees, id) {
			t.Fatalf("gateway session.list lacks %s: %v", id, gwSees)
		}
	}
	for _, p := range []*restartProc{serveA, serveB} {
		for _, id := range all {
			if code, s := p.call(t, "GET", "/api/sessions/"+id, ""); code != 200 {
				t.Fatalf("GET /api/sessions/%s through serve: %d %v", id, code, s)
			}
		}
		if _, s := p.call(t, "GET", "/api/sessions/"+gwID, ""); !strings.Contains(fmt.Sprint(s), "titled by the gateway") {
			t.Fatalf("serve sees the gateway's session as %v", s)
		}
	}
	// The stored response, read and continued through the other serve process.
	if code, got := serveB.call(t, "GET", "/v1/responses/"+respID, ""); code != 200 || got["id"] != respID {
		t.Fatalf("stored response through the other serve: %d %v", code, got)
	}
	code, next := serveB.call(t, "POST", "/v1/responses", `{"model":"openai:fake-agent","input":"respond: again","store":true,"previous_response_id":"`+respID+`"}`)
	if code != 200 || next["status"] != "completed" {
		t.Fatalf("continued response %d %v", code, next)
	}
	if reqs := model.Requests(); !strings.Contains(string(reqs[len(reqs)-1].Body), "echo respond: hello") {
		t.Fatalf("the continued response's model call lacks the stored one's answer: %s", reqs[len(reqs)-1].Body)
	}
	// The gateway's saved spawn tree (a setting), listed over the /api/ws of a serve process.
	ws, err := gwclient.DialWS(ctx, "ws"+strings.TrimPrefix(serveB.base, "http")+"/api/ws?token="+testAPIKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if _, _, err := ws.WaitType(ctx, 0, "", "gateway.ready"); err != nil {
		t.Fatal(err)
	}
	var trees struct {
		Entries []struct{ Path string } `json:"entries"`
	}
	if err := ws.CallInto(ctx, "spawn_tree.list", map[string]any{"session_id": gwID}, &trees); err != nil {
		t.Fatal(err)
	}
	if len(trees.Entries) != 1 || trees.Entries[0].Path != treeKey {
		t.Fatalf("spawn_tree.list over serve's /api/ws: %+v, want %s", trees, treeKey)
	}
	// A CI script reads the gateway's session and lists everyone's.
	out, err := hermesRunScript(t, t.TempDir(), env, "review.js", ciReviewScript, gwID)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range all {
		if !strings.Contains(out, "listed "+id) {
			t.Fatalf("hermes.sessions() in hermes run lacks %s:\n%s", id, out)
		}
	}

	// Everyone leaves; the store process follows after its idle time (the cleanup checks).
	for _, p := range []*acpProc{acp1, acp2} {
		if err := p.close(); err != nil {
			t.Error(err)
		}
	}
	gw.Close()
	serveA.term(t)
	serveB.term(t)
}

// TestACPHeadlessOneHome: a headless ACP client that starts a new `hermes acp` per command,
// while an editor's `hermes acp` stays open on the same home: the first process creates a
// session and names it (its first prompt titles it), the next resumes it and prompts again,
// a third finds it by its title; the editor's process sees it too.
func TestACPHeadlessOneHome(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	t.Setenv(envStoreProcess, "on")
	t.Setenv(envStoreIdle, "300ms")
	t.Cleanup(func() { waitStoreProcessGone(t, home) })
	model := echoModel(t)
	env := []string{"HERMES_HOME=" + home, "HERMES_MODEL=openai:fake-agent", "OPENAI_BASE_URL=" + model.URL(), "OPENAI_API_KEY=k"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	editor := startACP(t, cwd, env)
	if _, err := editor.conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	if _, err := editor.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{}}); err != nil {
		t.Fatal(err)
	}

	first := startACP(t, cwd, env)
	sid, err := first.newSessionTurn(ctx, cwd, "review the build log")
	if err != nil {
		t.Fatal(err)
	}
	if err := first.close(); err != nil {
		t.Fatal(err)
	}

	second := startACP(t, cwd, env)
	if _, err := second.conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	if _, err := second.conn.ResumeSession(ctx, sdk.ResumeSessionRequest{SessionId: sdk.SessionId(sid), Cwd: cwd}); err != nil {
		t.Fatalf("session/resume in the next process: %v\n%s", err, second.stderr.String())
	}
	if err := second.prompt(ctx, sid, "and the test log"); err != nil {
		t.Fatal(err)
	}
	if err := second.close(); err != nil {
		t.Fatal(err)
	}
	// The resumed turn's model call carried the first process's turn.
	reqs := model.Requests()
	if last := string(reqs[len(reqs)-1].Body); !strings.Contains(last, "echo review the build log") || !strings.Contains(last, "and the test log") {
		t.Fatalf("the second process's model call lacks the first's turn: %s", last)
	}

	third := startACP(t, cwd, env)
	if _, err := third.conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*acpProc{third, editor} {
		got, err := p.list(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got[sid] != "review the build log" {
			t.Fatalf("session/list shows %s titled %q: %v", sid, got[sid], got)
		}
	}
	for _, p := range []*acpProc{third, editor} {
		if err := p.close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBusyInputAcrossProcesses: a turn runs in `hermes serve` (held at the model) when a
// `hermes run` script, another process, prompts the same session. The busy-input policy of the
// home (policy.js) answers it as it would in one process: queue, steer, interrupt or reject.
func TestBusyInputAcrossProcesses(t *testing.T) {
	for _, mode := range []string{"queue", "steer", "interrupt", "reject"} {
		t.Run(mode, func(t *testing.T) {
			home, cwd := t.TempDir(), t.TempDir()
			t.Setenv(envStoreProcess, "on")
			t.Setenv(envStoreIdle, "300ms")
			t.Cleanup(func() { waitStoreProcessGone(t, home) })
			if err := os.WriteFile(filepath.Join(home, "policy.js"), []byte(`export const busy_input = () => "`+mode+`";`+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			model := echoModel(t)
			gate := openaitest.NewGate()
			t.Cleanup(gate.Release)
			model.Enqueue(openaitest.Response{Text: []string{"first ", "answer"}, FaultAt: 1, Gate: gate}) // held before any text
			serve := serveHome(t, home, cwd, model.URL())
			code, adm := serve.call(t, "POST", "/v1/runs", `{"input":"first","session_id":"busy"}`)
			if code != 202 {
				t.Fatalf("admission %d %v", code, adm)
			}
			select {
			case <-gate.Reached():
			case <-time.After(60 * time.Second):
				t.Fatal("the first turn never reached the model")
			}
			env := []string{"HERMES_HOME=" + home, "HERMES_MODEL=openai:fake-agent", "OPENAI_BASE_URL=" + model.URL(), "OPENAI_API_KEY=k", "HERMES_POLICY="}
			out, err := hermesRunScript(t, t.TempDir(), env, "second.js", `const hermes = require("hermes");
const t = hermes.open("busy").prompt("second");
print("status " + t.status);
`)
			if err != nil {
				t.Fatal(err)
			}
			// As in one process: an interrupt stops the running turn and queues the prompt as the
			// next one.
			want := map[string]string{"queue": "queued", "steer": "steered", "interrupt": "queued", "reject": "rejected"}[mode]
			if !strings.Contains(out, "status "+want) {
				t.Fatalf("a prompt from another process under %s: %s, want status %s", mode, out, want)
			}
			gate.Release()
			ev := serve.terminalEvent(t, adm["run_id"].(string))
			if wantEv := map[bool]string{true: "run.cancelled", false: "run.completed"}[mode == "interrupt"]; ev["event"] != wantEv {
				t.Fatalf("the first run ended with %v, want %s", ev, wantEv)
			}
			wantRows := map[string]string{
				"queue":     "user:first|assistant:first answer|user:second|assistant:echo second",
				"steer":     "user:first|assistant:first answer",
				"interrupt": "user:first|user:second|assistant:echo second",
				"reject":    "user:first|assistant:first answer",
			}[mode]
			var rows string
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				_, m := serve.call(t, "GET", "/api/sessions/busy/messages", "")
				var got []string
				for _, r := range m["data"].([]any) {
					r := r.(map[string]any)
					got = append(got, fmt.Sprint(r["role"], ":", r["content"]))
				}
				if rows = strings.Join(got, "|"); rows == wantRows || time.Now().After(deadline) {
					break
				}
			}
			if rows != wantRows {
				t.Fatalf("transcript %q, want %q", rows, wantRows)
			}
		})
	}
}

// TestACPBusyInterruptAcrossProcesses: a prompt runs in one `hermes acp` (held at the model)
// when another `hermes acp` on the same home resumes the session and prompts it under the
// default busy-input mode, interrupt. As in one process, the running prompt ends cancelled and
// the new prompt's turn runs (in the process holding the session) and answers the prompt that
// sent it. TestBusyInputAcrossProcesses reads only the admission of the second prompt; an ACP
// prompt follows its turn to the answer, and that is what this checks.
// acpResult is a prompt's response or error.
type acpResult struct {
	r   sdk.PromptResponse
	err error
}

// heldACPTurn starts a hermes acp on a new home (store process on) whose session's first turn
// ("first") is held at the model before any text until gate is released; first receives that
// prompt's response.
func heldACPTurn(t *testing.T, ctx context.Context) (cwd string, env []string, a *acpProc, sid sdk.SessionId, gate *openaitest.Gate, first <-chan acpResult) {
	t.Helper()
	home, cwd := t.TempDir(), t.TempDir()
	t.Setenv(envStoreProcess, "on")
	t.Setenv(envStoreIdle, "300ms")
	t.Cleanup(func() { waitStoreProcessGone(t, home) })
	model := echoModel(t)
	gate = openaitest.NewGate()
	t.Cleanup(gate.Release)
	model.Enqueue(openaitest.Response{Text: []string{"first ", "answer"}, FaultAt: 1, Gate: gate}) // held before any text
	env = []string{"HERMES_HOME=" + home, "HERMES_MODEL=openai:fake-agent", "OPENAI_BASE_URL=" + model.URL(), "OPENAI_API_KEY=k"}
	a = startACP(t, cwd, env)
	if _, err := a.conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	s, err := a.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan acpResult, 1)
	go func() {
		r, err := a.conn.Prompt(ctx, sdk.PromptRequest{SessionId: s.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("first")}})
		out <- acpResult{r, err}
	}()
	select {
	case <-gate.Reached():
	case <-time.After(60 * time.Second):
		t.Fatal("the first turn never reached the model")
	}
	return cwd, env, a, s.SessionId, gate, out
}

func TestACPBusyInterruptAcrossProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cwd, env, a, sid, _, first := heldACPTurn(t, ctx)

	b := startACP(t, cwd, env)
	if _, err := b.conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.conn.ResumeSession(ctx, sdk.ResumeSessionRequest{SessionId: sid, Cwd: cwd}); err != nil {
		t.Fatalf("session/resume in the other process: %v\n%s", err, b.stderr.String())
	}
	r, err := b.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sid, Prompt: []sdk.ContentBlock{sdk.TextBlock("second")}})
	if err != nil || r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("the interrupting prompt through the other process: %+v %v\n%s", r, err, b.stderr.String())
	}
	if got := b.said(); got != "echo second" {
		t.Fatalf("the interrupting prompt streamed %q, want %q", got, "echo second")
	}
	res := <-first
	if res.err != nil || res.r.StopReason != sdk.StopReasonCancelled {
		t.Fatalf("the interrupted prompt: %+v %v\n%s", res.r, res.err, a.stderr.String())
	}
	for _, p := range []*acpProc{a, b} {
		if err := p.close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestACPDisconnectLeavesOtherProcessTurn: an editor window that resumed a session another
// process is running a turn in, and closed without prompting, leaves that turn alone: only the
// turns of a client's own prompts are interrupted when it goes away, as with one process.
func TestACPDisconnectLeavesOtherProcessTurn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cwd, env, a, sid, gate, first := heldACPTurn(t, ctx)

	b := startACP(t, cwd, env)
	if _, err := b.conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.conn.ResumeSession(ctx, sdk.ResumeSessionRequest{SessionId: sid, Cwd: cwd}); err != nil {
		t.Fatalf("session/resume in the other process: %v\n%s", err, b.stderr.String())
	}
	if err := b.close(); err != nil {
		t.Fatal(err)
	}
	gate.Release()
	res := <-first
	if res.err != nil || res.r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("the turn of the process that stayed: %+v %v, want end_turn\n%s", res.r, res.err, a.stderr.String())
	}
	if got := a.said(); got != "first answer" {
		t.Fatalf("the turn streamed %q, want %q", got, "first answer")
	}
	if err := a.close(); err != nil {
		t.Fatal(err)
	}
}
