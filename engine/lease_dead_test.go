//go:build unix

package engine

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/store/memstore"
)

// TestLeaseOfDeadLocalProcess: a lease whose holder was a process of this host that no longer
// exists is taken at once (not after its TTL), and the restart path runs for it.
func TestLeaseOfDeadLocalProcess(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("no process to borrow a dead pid from: %v", err)
	}
	host, _ := os.Hostname()
	dead := host + ":" + strconv.Itoa(cmd.Process.Pid) + ":x"

	st := memstore.New()
	p := newGated()
	e := leaseEngine(t, st, p, nil) // default TTL: 10 s
	ctx := waitCtx(t)
	s, err := e.Create(ctx, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := st.AcquireLease(ctx, s.ID(), dead, time.Hour) // would outlive the test
	if err != nil {
		t.Fatal(err)
	}
	mark, _ := json.Marshal(leaseMarker{Owner: l.Owner, Generation: l.Generation})
	if err := st.PutKV(ctx, markerPrefix+s.ID(), mark); err != nil {
		t.Fatal(err)
	}
	since := s.LastSeq()
	adm, err := s.Submit(ctx, Prompt{Text: "after the crash"})
	if err != nil || adm.Status != AdmitStarted {
		t.Fatalf("submit: %+v %v", adm, err)
	}
	ev := waitEvent(t, s, since, func(ev Event) bool { return ev.Type == EvTakeover })
	if tk := ev.Data.(Takeover); tk.PreviousOwner != dead || tk.Owner != e.LeaseOwner() || tk.Generation <= l.Generation {
		t.Fatalf("takeover %+v", tk)
	}
	if out, err := s.Wait(ctx, adm.TurnID); err != nil || out.Status != StatusCompleted {
		t.Fatalf("turn: %+v %v", out, err)
	}
}

// TestLeaseOfLiveLocalProcessKept: a live holder of this host keeps its lease.
func TestLeaseOfLiveLocalProcessKept(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	e := leaseEngine(t, st, newGated(), nil)
	ctx := waitCtx(t)
	host, _ := os.Hostname()
	live := host + ":" + strconv.Itoa(os.Getppid()) + ":x"
	s, err := e.Create(ctx, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AcquireLease(ctx, s.ID(), live, time.Hour); err != nil {
		t.Fatal(err)
	}
	if e.releaseDeadLocal(context.Background(), s.ID()) {
		t.Fatal("released the lease of a live process")
	}
	if ls, err := st.ListLeases(ctx); err != nil || len(ls) != 1 || ls[0].Owner != live {
		t.Fatalf("leases %+v %v", ls, err)
	}
}
