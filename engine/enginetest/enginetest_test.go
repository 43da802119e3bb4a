package enginetest

import (
	"strconv"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

// A goroutine started by a checked test is found by its label until it exits; the test's own
// goroutine is not counted.
func TestLabelledFindsLeftGoroutines(t *testing.T) {
	CheckGoroutines(t)
	id := strconv.FormatInt(checks.Load(), 10)
	stop, started := make(chan struct{}), make(chan struct{})
	go func() { close(started); <-stop }()
	<-started
	if got := labelled(id); len(got) != 1 || !strings.Contains(got[0], "TestLabelledFindsLeftGoroutines") {
		t.Fatalf("labelled goroutines: %q", got)
	}
	close(stop)
}

// A turn runs on the in-memory store and leaves nothing running once the test ends.
func TestHarnessOnMemoryStore(t *testing.T) {
	h := New(t, Options{Memory: true})
	h.Server.Enqueue(openaitest.Text("hello"))
	if out := h.Run(h.Create(), "hi"); out.Status != engine.StatusCompleted || out.Text != "hello" {
		t.Fatalf("outcome %+v", out)
	}
}

// Two harnesses in one test: the first check covers the second engine, which its own cleanup
// closes before the check runs.
func TestTwoHarnessesInOneTest(t *testing.T) {
	a, b := New(t, Options{Memory: true}), New(t, Options{Memory: true})
	a.Server.Enqueue(openaitest.Text("one"))
	b.Server.Enqueue(openaitest.Text("two"))
	if out := a.Run(a.Create(), "hi"); out.Text != "one" {
		t.Fatalf("first: %+v", out)
	}
	if out := b.Run(b.Create(), "hi"); out.Text != "two" {
		t.Fatalf("second: %+v", out)
	}
}
