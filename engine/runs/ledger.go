package runs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/hermes-go/hermes/engine/store"
)

// Heartbeat timing: a ledger rewrites its heartbeat every BeatEvery, valid for BeatTTL. A
// process on another host (or one whose liveness this host cannot check) is gone once its
// heartbeat is BeatTTL old.
const (
	BeatTTL   = 15 * time.Second
	BeatEvery = 5 * time.Second
)

// heartbeat is a process's liveness record.
type heartbeat struct {
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Expires time.Time `json:"expires"`
}

// live are the ledgers open in this OS process, by process id: one of them that is closed is
// gone at once, whatever its heartbeat says.
var live sync.Map

var hostname = sync.OnceValue(func() string {
	h, _ := os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		h += "/" + string(b)
	}
	return h
})

// Ledger is the runs ledger of one process over a store.
type Ledger struct {
	st   store.Store
	proc string

	stop    context.CancelFunc
	done    chan struct{}
	closeMu sync.Once
}

// Open starts a ledger on st for this process (a fresh process id, its heartbeat written and
// kept up until Close).
func Open(ctx context.Context, st store.Store) (*Ledger, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	l := &Ledger{st: st, proc: "proc_" + hex.EncodeToString(b[:]), done: make(chan struct{})}
	if err := l.beat(ctx); err != nil {
		return nil, err
	}
	live.Store(l.proc, true)
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.stop = cancel
	go func() {
		defer close(l.done)
		t := time.NewTicker(BeatEvery)
		defer t.Stop()
		for {
			select {
			case <-bctx.Done():
				return
			case <-t.C:
				_ = l.beat(bctx)
			}
		}
	}()
	return l, nil
}

// Process is this ledger's process id (Record.Process of the runs it executes).
func (l *Ledger) Process() string { return l.proc }

func (l *Ledger) beat(ctx context.Context) error {
	b, err := json.Marshal(heartbeat{Host: hostname(), PID: os.Getpid(), Expires: time.Now().Add(BeatTTL)})
	if err != nil {
		return err
	}
	return l.st.PutKV(ctx, procPrefix+l.proc, b)
}

// Close stops the heartbeat and removes it: the runs this process left running are
// restart-unknown for everyone from now on.
func (l *Ledger) Close() {
	l.closeMu.Do(func() {
		live.Delete(l.proc)
		l.stop()
		<-l.done
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = l.st.DeleteKV(ctx, procPrefix+l.proc)
	})
}

// Alive reports whether process proc (a ledger's process id) is still there: this ledger, a
// ledger open in this OS process, or a process whose heartbeat has not expired and which, when
// it ran on this host, still exists. A store error counts as alive: nobody's runs are declared
// unknown on a guess.
func (l *Ledger) Alive(ctx context.Context, proc string) bool {
	alive, _ := l.alive(ctx, proc)
	return alive
}

// alive also returns, for a live process known only by its heartbeat, when to look again.
func (l *Ledger) alive(ctx context.Context, proc string) (bool, time.Time) {
	if proc == "" {
		return false, time.Time{}
	}
	if proc == l.proc {
		return true, time.Time{}
	}
	if _, ok := live.Load(proc); ok {
		return true, time.Time{}
	}
	b, err := l.st.GetKV(ctx, procPrefix+proc)
	if errors.Is(err, store.ErrNotFound) {
		return false, time.Time{}
	}
	if err != nil {
		return true, time.Now().Add(BeatEvery)
	}
	var hb heartbeat
	if json.Unmarshal(b, &hb) != nil {
		return false, time.Time{}
	}
	if hb.Host == hostname() && hb.PID > 0 {
		if hb.PID == os.Getpid() || !pidExists(hb.PID) {
			return false, time.Time{} // this process's ledger, closed; or a process that exited
		}
	}
	if time.Now().After(hb.Expires) {
		return false, time.Time{}
	}
	return true, hb.Expires
}

// Recheck returns when the liveness of proc should be looked at again (zero: it will not change
// by itself: only a hint can tell).
func (l *Ledger) Recheck(ctx context.Context, proc string) time.Time {
	_, at := l.alive(ctx, proc)
	return at
}
