package engine_test

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
)

// TestOnEventTap: Config.OnEvent sees every journaled event of every session, in journal
// order, and the outcome carries the turn's duration and context use, which stay off the
// wire.
func TestOnEventTap(t *testing.T) {
	var mu sync.Mutex
	var got []engine.Event
	h := newHarness(t, func(c *engine.Config) {
		c.OnEvent = func(e engine.Event) {
			mu.Lock()
			got = append(got, e)
			mu.Unlock()
		}
	})
	h.srv.Enqueue(openaitest.Text("hello", " there"))
	s := h.create()
	sub := s.Subscribe(0)
	defer sub.Close()
	out := h.run(s, "hi")
	if out.Status != engine.StatusCompleted || out.Duration <= 0 {
		t.Fatalf("outcome %+v", out)
	}
	if out.Context.Max <= 0 || out.Context.Used <= 0 {
		t.Fatalf("outcome context %+v", out.Context)
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var wire map[string]any
	if err := json.Unmarshal(b, &wire); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"Duration", "Context", "duration", "context"} {
		if _, ok := wire[k]; ok {
			t.Fatalf("outcome puts %s on the wire: %s", k, b)
		}
	}
	// Everything a subscriber read up to the outcome, the tap saw, with the same seqs.
	var journal []engine.Event
	for {
		ev, err := sub.Next(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		journal = append(journal, ev)
		if ev.Type == engine.EvMessageComplete {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var mine []engine.Event
	for _, e := range got {
		if e.SessionID == s.ID() {
			mine = append(mine, e)
		}
	}
	if len(mine) < len(journal) {
		t.Fatalf("tap saw %d events, the journal %d", len(mine), len(journal))
	}
	deltas := 0
	for i, ev := range journal {
		if mine[i].Seq != ev.Seq || mine[i].Type != ev.Type {
			t.Fatalf("event %d: tap %d %s, journal %d %s", i, mine[i].Seq, mine[i].Type, ev.Seq, ev.Type)
		}
		if ev.Type == engine.EvMessageDelta {
			deltas++
		}
	}
	if deltas != 2 {
		t.Fatalf("%d deltas", deltas)
	}
}
