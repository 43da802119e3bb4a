package acp_test

import (
	"context"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/transports/acp"
)

// TestOtherPrincipalsSessionsAreUnknown: ACP acts for the local owner; a session an API key of
// the HTTP server made is not listed, and loading, resuming or forking it fails as for an
// unknown id.
func TestOtherPrincipalsSessionsAreUnknown(t *testing.T) {
	_, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "")
	bg := context.Background()
	for _, o := range []struct{ id, owner string }{{"theirs", "key_0123456789abcdef"}, {"mine", ""}} {
		if _, err := eng.Create(bg, engine.CreateOptions{ID: o.id, Cwd: cwd, Source: "api", Principal: o.owner, History: []engine.Row{{Role: "user", Content: "hello"}}}); err != nil {
			t.Fatal(err)
		}
	}
	c := connect(t, eng, cwd, acp.Options{})
	ctx := testCtx(t)
	l, err := c.ListSessions(ctx, sdk.ListSessionsRequest{Cwd: &cwd})
	if err != nil {
		t.Fatal(err)
	}
	var ids []sdk.SessionId
	for _, s := range l.Sessions {
		ids = append(ids, s.SessionId)
	}
	if len(ids) != 1 || ids[0] != "mine" {
		t.Fatalf("list %v", ids)
	}
	_, unknown := c.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: "no-such-session", Cwd: cwd, McpServers: []sdk.McpServer{}})
	re, ok := unknown.(*sdk.RequestError)
	if !ok {
		t.Fatalf("load unknown: %v", unknown)
	}
	_, err = c.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: "theirs", Cwd: cwd, McpServers: []sdk.McpServer{}})
	if got, ok := err.(*sdk.RequestError); !ok || got.Code != re.Code {
		t.Fatalf("load theirs: %v (unknown: %v)", err, unknown)
	}
	if _, err := c.ResumeSession(ctx, sdk.ResumeSessionRequest{SessionId: "theirs", Cwd: cwd}); err == nil {
		t.Fatal("resumed another principal's session")
	}
	if _, err := c.UnstableForkSession(ctx, sdk.UnstableForkSessionRequest{SessionId: "theirs", Cwd: cwd}); err == nil {
		t.Fatal("forked another principal's session")
	}
	if _, err := c.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: "mine", Cwd: cwd, McpServers: []sdk.McpServer{}}); err != nil {
		t.Fatalf("load mine: %v", err)
	}
}
