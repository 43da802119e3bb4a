package runsapi

import (
	"bufio"
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is what a stream wrote, read while it writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until the stream wrote want.
func waitFor(t *testing.T, out *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the stream did not write %q; it wrote:\n%s", want, out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A run's stream replays the events after the reader's id, writes new ones as they come and
// keeps a quiet stream alive; when the server stops, it still delivers the terminal event the
// run's worker settles it with, then closes.
func TestStreamRunUntilSettledAfterStop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rs := &Runs{ctx: ctx, keepAlive: 20 * time.Millisecond}
	r := newRun(runRecord{RunID: "run_s", SessionID: "s"}, runRunning)
	r.emit("run.started", runRunning, nil)
	r.emit("message.delta", "", map[string]any{"delta": "a"})
	out := &syncBuffer{}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		w := bufio.NewWriter(out)
		rs.streamRun(w, r, 1)
	}()
	waitFor(t, out, "id: 2\n")
	if strings.Contains(out.String(), "id: 1\n") {
		t.Fatalf("the stream replayed the event the reader had:\n%s", out.String())
	}
	waitFor(t, out, ": keepalive\n\n")
	r.emit("message.delta", "", map[string]any{"delta": "b"})
	waitFor(t, out, "id: 3\n")

	cancel() // the server stops; its worker then settles the run
	r.finish(runRecord{}, false, runInterrupted, map[string]any{"interrupted": true})
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the stream did not end after the run settled")
	}
	got := out.String()
	if !strings.Contains(got, "id: 4\ndata: ") || !strings.Contains(got, `"event":"run.interrupted"`) || !strings.HasSuffix(got, ": stream closed\n\n") {
		t.Fatalf("the stream did not end with the terminal event and its close:\n%s", got)
	}
}
