package acp_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/transports/acp"
)

// panicOnce is a store whose first ListSessions panics.
type panicOnce struct {
	store.Store
	done atomic.Bool
}

func (s *panicOnce) ListSessions(ctx context.Context, o store.ListOptions) ([]store.Session, error) {
	if s.done.CompareAndSwap(false, true) {
		panic("secret detail from the store")
	}
	return s.Store.ListSessions(ctx, o)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestHandlerPanicAnswered: the SDK does not recover a handler's panic (it would end the
// process); the adapter answers it with -32603 and nothing of the panic, logs it with its
// stack, and the connection serves the next request.
func TestHandlerPanicAnswered(t *testing.T) {
	_, p := fakeProvider(t)
	eng, cwd := newEngineWith(t, p, "queue", func(c *engine.Config) { c.Store = &panicOnce{Store: c.Store} })
	logs := &syncBuffer{}
	c := connect(t, eng, cwd, acp.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	ctx := testCtx(t)
	if _, err := c.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	_, err := c.ListSessions(ctx, sdk.ListSessionsRequest{})
	re, ok := err.(*sdk.RequestError)
	if !ok || re.Code != -32603 {
		t.Fatalf("panicking session/list answered %v", err)
	}
	if strings.Contains(re.Error(), "secret") || re.Data != nil {
		t.Fatalf("the panic reached the client: %+v", re)
	}
	got := logs.String()
	for _, want := range []string{"panicked", "secret detail from the store", "session/list", "runtime/debug.Stack"} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
	if _, err := c.ListSessions(ctx, sdk.ListSessionsRequest{}); err != nil {
		t.Fatalf("after the panic: %v", err)
	}
	c.newSession(t, ctx)
}
