package metrics_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/enginetest"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/internal/metrics"
	"github.com/hermes-go/hermes/internal/metrics/metricstest"
)

// TestCompactionMetrics: a session that outgrows a small window compacts; every compaction
// its turns announce (status compacted) is counted once, and each turn's context use is
// observed, never above the window.
func TestCompactionMetrics(t *testing.T) {
	const window = 12000
	m := metrics.New()
	h := enginetest.New(t, enginetest.Options{
		Server: []openaitest.Option{openaitest.WithContextWindow(window), openaitest.WithResponder(func(r openaitest.Request) openaitest.Response {
			var body struct {
				Messages []struct {
					Content any `json:"content"`
				} `json:"messages"`
			}
			_ = json.Unmarshal(r.Body, &body)
			if n := len(body.Messages); n > 0 {
				if text, _ := body.Messages[n-1].Content.(string); strings.HasPrefix(text, "Summarise the conversation so far") {
					return openaitest.Text("The user sent numbered prompts; all were acknowledged.")
				}
			}
			return openaitest.Text("ack")
		})},
		Configure: func(c *engine.Config) {
			c.ContextWindows = map[string]int{"openai:fake-agent": window}
			c.OnEvent = m.OnEvent
		},
	})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	s := h.Create()
	sub := s.Subscribe(0)
	defer sub.Close()
	const turns = 8
	for i := range turns {
		if out := h.Run(s, fmt.Sprintf("prompt %d: %s", i, strings.Repeat("a line of a long prompt. ", 220))); !out.Completed {
			t.Fatalf("turn %d: %s %s", i, out.ExitReason, out.Error)
		}
	}
	compacted, outcomes := 0, 0
	for outcomes < turns {
		ev, err := sub.Next(enginetest.Context(t))
		if err != nil {
			t.Fatal(err)
		}
		switch d := ev.Data.(type) {
		case engine.StatusInfo:
			if d.Kind == "compacted" {
				compacted++
			}
		case engine.Outcome:
			outcomes++
		}
	}
	if compacted == 0 {
		t.Fatal("the session never compacted; the test proves nothing")
	}
	f := metricstest.Scrape(t, srv.URL, "")
	if got := f.Value("hermes_compactions_total"); got != float64(compacted) {
		t.Errorf("compactions counted %v, announced %d", got, compacted)
	}
	if got := f.Value("hermes_context_used_ratio"); got != turns {
		t.Errorf("context observations %v for %d turns", got, turns)
	}
	if sum := f.Sum("hermes_context_used_ratio"); sum <= 0 || sum > turns {
		t.Errorf("context ratios sum to %v", sum)
	}
}
