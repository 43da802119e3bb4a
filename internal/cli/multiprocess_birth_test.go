package cli

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/transports/gateway/gwclient"
)

// Sessions are durable at birth: an id a client is given names a stored session before any
// prompt, so another process resumes it at once. A session opened and left without a word is
// stored too, and the listings meant for people leave it out until it has a message or a title.

// birthHome prepares a home served by a store process and a model answering "echo <prompt>".
func birthHome(t *testing.T) (home, cwd string, env []string) {
	t.Helper()
	home, cwd = t.TempDir(), t.TempDir()
	t.Setenv(envStoreProcess, "on")
	t.Setenv(envStoreIdle, "300ms")
	t.Cleanup(func() { waitStoreProcessGone(t, home) })
	model := echoModel(t)
	env = []string{"HERMES_HOME=" + home, "HERMES_MODEL=openai:fake-agent", "OPENAI_BASE_URL=" + model.URL(), "OPENAI_API_KEY=k"}
	return home, cwd, env
}

// gwCall calls method on c and decodes the result, failing the test on an error.
func gwCall(ctx context.Context, t *testing.T, c *gwclient.Client, method string, params any) map[string]any {
	t.Helper()
	var out map[string]any
	if err := c.CallInto(ctx, method, params, &out); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return out
}

// listedIDs returns the ids of a gateway session.list result.
func listedIDs(res map[string]any) []string {
	var ids []string
	for _, s := range res["sessions"].([]any) {
		ids = append(ids, s.(map[string]any)["id"].(string))
	}
	return ids
}

// sessionsListing runs `hermes sessions` with args and returns its stdout.
func sessionsListing(t *testing.T, cwd string, env []string, args ...string) string {
	t.Helper()
	r := hermes(t, cwd, env, append([]string{"sessions"}, args...)...)
	if r.code != 0 {
		t.Fatalf("hermes sessions %v: exit %d\n%s%s", args, r.code, r.stdout, r.err)
	}
	return r.stdout
}

// TestSessionCreateResumedByAnotherGateway: the id `session.create` returns over one `hermes
// gateway` is resumed by a second one before any prompt, and the second runs its first turn.
// Until it has a title or a message, `hermes sessions` and session.list leave it out (-empty
// and include_hidden show it).
func TestSessionCreateResumedByAnotherGateway(t *testing.T) {
	_, cwd, env := birthHome(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, b := gatewayProcess(t, cwd, env), gatewayProcess(t, cwd, env)

	created := gwCall(ctx, t, a, "session.create", map[string]any{})
	stored := created["stored_session_id"].(string)
	if info := created["info"].(map[string]any); info["lazy"] != true {
		t.Fatalf("session.create info: %v, want lazy:true until the first turn", info)
	}
	resumed := gwCall(ctx, t, b, "session.resume", map[string]any{"session_id": stored})
	if resumed["resumed"] != stored || resumed["message_count"] != float64(0) {
		t.Fatalf("session.resume in the second gateway: %v", resumed)
	}

	// Opened and not used: stored, but no clutter in the listings.
	if ls := sessionsListing(t, cwd, env); strings.Contains(ls, stored) {
		t.Fatalf("hermes sessions lists the untouched session %s:\n%s", stored, ls)
	}
	if ls := sessionsListing(t, cwd, env, "-empty"); !strings.Contains(ls, stored) {
		t.Fatalf("hermes sessions -empty lacks %s:\n%s", stored, ls)
	}
	if ids := listedIDs(gwCall(ctx, t, b, "session.list", map[string]any{})); len(ids) != 0 {
		t.Fatalf("session.list shows %v, want the untouched session left out", ids)
	}
	if ids := listedIDs(gwCall(ctx, t, b, "session.list", map[string]any{"include_hidden": true})); len(ids) != 1 || ids[0] != stored {
		t.Fatalf("session.list include_hidden shows %v, want [%s]", ids, stored)
	}

	// The second process runs the first turn; every listing shows the session then.
	bsid := resumed["session_id"].(string)
	from := len(b.Events())
	if r := gwCall(ctx, t, b, "prompt.submit", map[string]any{"session_id": bsid, "text": "born here, used there"}); r["status"] != "streaming" {
		t.Fatalf("prompt.submit in the second gateway: %v", r)
	}
	e, _, err := b.WaitType(ctx, from, bsid, "message.complete")
	if err != nil {
		t.Fatal(err)
	}
	var done struct{ Text, Status string }
	if err := e.Decode(&done); err != nil || done.Text != "echo born here, used there" {
		t.Fatalf("turn in the second gateway: %s (%v)", e.Payload, err)
	}
	if ls := sessionsListing(t, cwd, env); !strings.Contains(ls, stored) {
		t.Fatalf("hermes sessions lacks %s after its first turn:\n%s", stored, ls)
	}
	if ids := listedIDs(gwCall(ctx, t, a, "session.list", map[string]any{})); len(ids) != 1 || ids[0] != stored {
		t.Fatalf("session.list in the creating gateway shows %v, want [%s]", ids, stored)
	}
}

// TestUntitledEmptySessionLeavesNoClutter: a gateway opened, given a session and closed
// without a word leaves it out of `hermes sessions`; a title alone brings it in.
func TestUntitledEmptySessionLeavesNoClutter(t *testing.T) {
	_, cwd, env := birthHome(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := gatewayProcess(t, cwd, env)
	left := gwCall(ctx, t, a, "session.create", map[string]any{})["stored_session_id"].(string)
	titled := gwCall(ctx, t, a, "session.create", map[string]any{})
	if r := gwCall(ctx, t, a, "session.title", map[string]any{"session_id": titled["session_id"], "title": "named, never prompted"}); r["pending"] != false {
		t.Fatalf("session.title before the first prompt: %v, want it applied (pending false)", r)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	ls := sessionsListing(t, cwd, env)
	if strings.Contains(ls, left) || !strings.Contains(ls, "named, never prompted") {
		t.Fatalf("hermes sessions after the gateway closed:\n%s\nwant the titled session only, not %s", ls, left)
	}
	if ls := sessionsListing(t, cwd, env, "-empty"); !strings.Contains(ls, left) {
		t.Fatalf("hermes sessions -empty lacks %s:\n%s", left, ls)
	}
	// Still resumable by id from a new process.
	b := gatewayProcess(t, cwd, env)
	if r := gwCall(ctx, t, b, "session.resume", map[string]any{"session_id": left}); r["resumed"] != left {
		t.Fatalf("session.resume of the untouched session: %v", r)
	}
}

// TestHTTPSessionResumedByGateway: a session POST /api/sessions makes on `hermes serve`, and
// one session.create makes over serve's /api/ws, are resumed by a `hermes gateway` before any
// prompt.
func TestHTTPSessionResumedByGateway(t *testing.T) {
	home, cwd, env := birthHome(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	model := echoModel(t)
	srv := serveHome(t, home, cwd, model.URL())

	code, made := srv.call(t, "POST", "/api/sessions", `{}`)
	if code != 201 {
		t.Fatalf("POST /api/sessions: %d %v", code, made)
	}
	sess, _ := made["session"].(map[string]any)
	httpID, _ := sess["id"].(string)
	if httpID == "" {
		t.Fatalf("POST /api/sessions answered no id: %v", made)
	}
	ws, err := gwclient.DialWS(ctx, "ws"+strings.TrimPrefix(srv.base, "http")+"/api/ws", http.Header{"Authorization": {"Bearer " + testAPIKey}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	wsID := gwCall(ctx, t, ws, "session.create", map[string]any{})["stored_session_id"].(string)

	gw := gatewayProcess(t, cwd, env)
	for _, id := range []string{httpID, wsID} {
		if r := gwCall(ctx, t, gw, "session.resume", map[string]any{"session_id": id}); r["resumed"] != id {
			t.Fatalf("session.resume of %s made by hermes serve: %v", id, r)
		}
	}
	if ls := sessionsListing(t, cwd, env, "-empty", "-all"); !strings.Contains(ls, httpID) || !strings.Contains(ls, wsID) {
		t.Fatalf("hermes sessions -empty -all lacks %s or %s:\n%s", httpID, wsID, ls)
	}
}
