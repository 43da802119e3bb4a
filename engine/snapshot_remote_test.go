package engine

import (
	"errors"
	"io"
	"testing"

	"github.com/hermes-go/hermes/engine/store/memstore"
)

// TestLiveSnapshotOfARemoteTurn: a session whose turn runs in another engine (the lease
// holder) is, to a client resuming it through this engine, running that turn: LiveSnapshot
// asks the holder, while this engine's own Snapshot knows only that it runs nothing. Once the
// turn ends (the holder keeps the lease while idle), both say idle.
func TestLiveSnapshotOfARemoteTurn(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	pa, pb := newGated(), newGated()
	ea, eb := leaseEngine(t, st, pa, nil), leaseEngine(t, st, pb, nil)
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
	if got := reachedCall(t, pa); got != "slow one" {
		t.Fatalf("model called with %q", got)
	}
	sb, err := eb.Open(ctx, sa.ID())
	if err != nil {
		t.Fatal(err)
	}
	if local := sb.Snapshot(); local.Inflight != nil {
		t.Fatalf("this engine's own snapshot has a turn it does not run: %+v", local.Inflight)
	}
	snap := sb.LiveSnapshot(ctx)
	if snap.Inflight == nil || snap.Inflight.TurnID != adm.TurnID || snap.Inflight.Prompt != "slow one" || snap.Info.Status != StatusWorking {
		t.Fatalf("live snapshot through the other engine: %+v (inflight %+v)", snap, snap.Inflight)
	}
	pa.release <- struct{}{}
	for {
		if _, err := fa.Next(ctx); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if snap := sb.LiveSnapshot(ctx); snap.Inflight != nil || snap.Info.Status != StatusIdle {
		t.Fatalf("after the turn: %+v", snap)
	}
	if pb.Calls() != 0 {
		t.Fatalf("the other engine's model was called %d times", pb.Calls())
	}
}
