package acp_test

import (
	"context"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/transports/acp"
)

// TestDeletedSessionsAreUnknown: a session deleted through the engine (as the HTTP API's
// DELETE does) is not listed, and loading, resuming or forking it fails as for an unknown id.
func TestDeletedSessionsAreUnknown(t *testing.T) {
	_, p := fakeProvider(t)
	eng, cwd := newEngine(t, p, "")
	bg := context.Background()
	for _, id := range []string{"gone", "kept"} {
		if _, err := eng.Create(bg, engine.CreateOptions{ID: id, Cwd: cwd, Source: "api", History: []engine.Row{{Role: "user", Content: "hello"}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Delete(bg, "gone"); err != nil {
		t.Fatal(err)
	}
	c := connect(t, eng, cwd, acp.Options{})
	ctx := testCtx(t)
	l, err := c.ListSessions(ctx, sdk.ListSessionsRequest{Cwd: &cwd})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Sessions) != 1 || l.Sessions[0].SessionId != "kept" {
		t.Fatalf("list %+v, want only the session not deleted", l.Sessions)
	}
	_, unknown := c.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: "no-such-session", Cwd: cwd, McpServers: []sdk.McpServer{}})
	re, ok := unknown.(*sdk.RequestError)
	if !ok {
		t.Fatalf("load unknown: %v", unknown)
	}
	_, err = c.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: "gone", Cwd: cwd, McpServers: []sdk.McpServer{}})
	if got, ok := err.(*sdk.RequestError); !ok || got.Code != re.Code {
		t.Fatalf("load of a deleted session: %v (unknown: %v)", err, unknown)
	}
	if _, err := c.ResumeSession(ctx, sdk.ResumeSessionRequest{SessionId: "gone", Cwd: cwd}); err == nil {
		t.Fatal("resumed a deleted session")
	}
	if _, err := c.UnstableForkSession(ctx, sdk.UnstableForkSessionRequest{SessionId: "gone", Cwd: cwd}); err == nil {
		t.Fatal("forked a deleted session")
	}
	if _, err := c.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: "kept", Cwd: cwd, McpServers: []sdk.McpServer{}}); err != nil {
		t.Fatalf("load of the kept session: %v", err)
	}
}
