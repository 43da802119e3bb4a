package engine

import (
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/engine/store/memstore"
)

// TestIfIdleRefusesWhileATurnRuns: a prompt admitted only when idle (what the OpenAI routes
// send) is refused with ErrBusy while a turn runs — in the same engine or in the process
// holding the session's lease — under every busy-input mode, and leaves no trace: the running
// turn is not interrupted, nothing is queued or steered, no row is written. Once the turn is
// over the same prompt starts a turn.
func TestIfIdleRefusesWhileATurnRuns(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{policy.Interrupt, policy.Queue, policy.Steer} {
		for _, where := range []string{"same engine", "other engine"} {
			t.Run(mode+"/"+where, func(t *testing.T) {
				t.Parallel()
				st := memstore.New()
				busy := func(c *Config) { c.Policy.Busy = fixedBusy(mode) }
				pa, pb := newGated(), newGated()
				ea, eb := leaseEngine(t, st, pa, busy), leaseEngine(t, st, pb, busy)
				ctx := waitCtx(t)
				sa, err := ea.Create(ctx, CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				pa.gate(true)
				adm, fa, err := sa.Run(ctx, Prompt{Text: "slow one"})
				if err != nil || adm.Status != AdmitStarted {
					t.Fatalf("run: %+v %v", adm, err)
				}
				defer fa.Close()
				reachedCall(t, pa)
				sender := sa
				if where == "other engine" {
					if sender, err = eb.Open(ctx, sa.ID()); err != nil {
						t.Fatal(err)
					}
				}
				if adm, err := sender.Submit(ctx, Prompt{Text: "only if idle", IfIdle: true}); !errors.Is(err, ErrBusy) {
					t.Fatalf("IfIdle submit while a turn runs: %+v %v, want ErrBusy", adm, err)
				}
				pa.gate(false)
				pa.release <- struct{}{}
				for {
					if _, err := fa.Next(ctx); errors.Is(err, io.EOF) {
						break
					} else if err != nil {
						t.Fatal(err)
					}
				}
				if out, ok := fa.Outcome(); !ok || out.Status != StatusCompleted || out.Text != "answer to slow one" {
					t.Fatalf("the running turn's outcome: %+v %v", out, ok)
				}
				want := []string{"user:slow one", "assistant:answer to slow one"}
				if got := contents(t, st, sa.ID()); !slices.Equal(got, want) {
					t.Fatalf("rows after the refusal: %q, want %q", got, want)
				}
				if pa.Calls() != 1 || pb.Calls() != 0 {
					t.Fatalf("model calls %d / %d: the refused prompt reached a model", pa.Calls(), pb.Calls())
				}
				adm, f, err := sender.Run(ctx, Prompt{Text: "now idle", IfIdle: true})
				if err != nil || adm.Status != AdmitStarted {
					t.Fatalf("IfIdle run on an idle session: %+v %v", adm, err)
				}
				defer f.Close()
				for {
					if _, err := f.Next(ctx); errors.Is(err, io.EOF) {
						break
					} else if err != nil {
						t.Fatal(err)
					}
				}
				if out, ok := f.Outcome(); !ok || out.Status != StatusCompleted || out.Text != "answer to now idle" {
					t.Fatalf("outcome of the idle run: %+v %v", out, ok)
				}
			})
		}
	}
}
