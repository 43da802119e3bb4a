package runs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermes-go/hermes/engine/store"
)

// Heartbeat timing: a ledger rewrites its heartbeat every BeatEvery, valid for BeatTTL. A
// process on another host (or one whose liveness this host cannot check) is gone once its
// heartbeat is BeatTTL old. The heartbeat decides only who starts a queued head (and whether a
// run claimed without a session lease is restart-unknown); a running run lives by its
// session's lease (Check).
const (
	BeatTTL   = 15 * time.Second
	BeatEvery = 5 * time.Second
)

// LapseGrace is how long a process sees a running run's lease gone before it lapses the run:
// the settlement its executing process writes right after the turn ended (when the session's
// lease may already be released or passed on) lands first.
const LapseGrace = 3 * time.Second

// lapseTTL is the lifetime of the lease a ledger takes to fence a gone holder; it gives it back
// at once.
const lapseTTL = 5 * time.Second

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
	st    store.Store
	proc  string
	grace time.Duration // LapseGrace; tests shorten it

	mu   sync.Mutex
	gone map[string]sighting // run id → when this process first saw its lease gone

	// outage is when this process last found the store unavailable (unix nanoseconds; 0:
	// never): a heartbeat or a lease nobody could renew then says nothing about its holder.
	// Only the store's own answers set it (a lost change hint may be an overflow), so a
	// process stopped while the store is up is never taken for one cut off by an outage.
	outage atomic.Int64

	stop    context.CancelFunc
	done    chan struct{}
	closeMu sync.Once

	adopt atomic.Pointer[AdoptFunc] // SetAdopt
}

// AdoptFunc takes a run's session over (through the engine, which adopts a turn parked at an
// approval). adopted: the run now runs under a live lease. elsewhere: another process holds
// the session's lease (it took the session over first, and adopts the turn or not there).
type AdoptFunc func(ctx context.Context, rec Record) (adopted, elsewhere bool)

// SetAdopt gives the ledger a way to adopt a run whose lease is gone instead of lapsing it.
// nil removes it.
func (l *Ledger) SetAdopt(adopt AdoptFunc) {
	if adopt == nil {
		l.adopt.Store(nil)
		return
	}
	l.adopt.Store(&adopt)
}

// Adopt moves a running run to this process and to the lease generation gen that adopted its
// turn (compare-and-set: the run still running, not lapsed, under generation prev and turn
// turnID): this process settles it now, and any other that followed it reads the settlement.
// It returns the record as written.
func (l *Ledger) Adopt(ctx context.Context, sessionID, turnID string, prev, gen uint64) (Record, error) {
	head, ok, err := l.Head(ctx, sessionID)
	if err != nil {
		return Record{}, err
	}
	if !ok || head.TurnID != turnID {
		return Record{}, ErrNotOwner
	}
	return l.Update(ctx, head.RunID, func(cur *Record) error {
		if cur.Status != Running || cur.Lapsed || cur.LeaseGeneration == 0 || cur.LeaseGeneration != prev || cur.TurnID != turnID {
			return ErrNotOwner
		}
		cur.LeaseGeneration, cur.Process = gen, l.proc
		return nil
	})
}

// Open starts a ledger on st for this process (a fresh process id, its heartbeat written and
// kept up until Close).
func Open(ctx context.Context, st store.Store) (*Ledger, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	l := &Ledger{st: st, proc: "proc_" + hex.EncodeToString(b[:]), grace: LapseGrace, gone: map[string]sighting{}, done: make(chan struct{})}
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
				l.noteOutage(l.beat(bctx))
				l.lapseScan(bctx)
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

// noteOutage records an error that says the store is unavailable.
func (l *Ledger) noteOutage(err error) {
	if errors.Is(err, store.ErrUnavailable) {
		l.outage.Store(time.Now().UnixNano())
	}
}

// outageEnd is when this process last found the store unavailable (zero: never); after an
// outage, a process is given BeatTTL from then to show it is alive.
func (l *Ledger) outageEnd() time.Time {
	if n := l.outage.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
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
		l.noteOutage(err)
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
	if now := time.Now(); now.After(hb.Expires) {
		// Silent since the store was out: nobody could write a heartbeat then, so it is
		// given BeatTTL from the store's return to write one again before it counts as gone.
		if back := l.outageEnd(); back.After(hb.Expires.Add(-BeatTTL)) && now.Before(back.Add(BeatTTL)) {
			return true, back.Add(BeatTTL)
		}
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

// lapseScan checks (Check) the running head of every session's FIFO that another process
// runs; a ledger does it every BeatEvery, so a run whose lease is gone is lapsed by whichever
// process looks first, without anybody asking for it.
func (l *Ledger) lapseScan(ctx context.Context) {
	fifos, err := l.st.ListKV(ctx, fifoPrefix)
	if err != nil {
		return
	}
	for _, b := range fifos {
		f, err := decodeFIFO(b)
		if err != nil {
			continue
		}
		for _, id := range f.Queue {
			rec, err := l.Get(ctx, id)
			if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalidRecord) || (err == nil && rec.Settled()) {
				continue
			}
			if err != nil {
				return
			}
			if rec.Status == Running && rec.Process != l.proc {
				l.Check(ctx, rec)
			}
			break // only a FIFO's head runs
		}
	}
}

// sighting is a run whose lease a process saw gone: at, while the record was at version.
// deferred is when this process, failing to adopt the run, found another process had taken
// its session over and left the run to it for a grace: once per record version, so a session
// others keep using does not put the lapse off for ever.
type sighting struct {
	version  uint64
	at       time.Time
	deferred time.Time
}

// errUnchanged aborts an Update that has nothing to write.
var errUnchanged = errors.New("unchanged")

// Check looks at a run running under another process: the generation of its session's lease
// its turn runs under (Record.LeaseGeneration). While that generation is held, the run is
// running, and Check returns when the lease would expire. Once it is not — another generation
// holds the lease, or it expired or was released with the run unsettled — for LapseGrace as
// this process sees it (at once when the holder was a process of this host that exited), Check
// fences that holder and marks the run Lapsed (restart-unknown). Fencing: a lease nobody holds
// is taken here and given back, so its generation moves on and the holder, should it come back
// (a database outage, a process stopped past its TTL), can neither renew it nor write another
// row; a lease another generation holds fences it already. A store error decides nothing.
// A zero time means only a change of the record changes what Check says (settled, lapsed, or
// claimed without a lease and its process gone).
func (l *Ledger) Check(ctx context.Context, rec Record) time.Time {
	if rec.Status != Running || rec.Lapsed || rec.LeaseGeneration == 0 {
		l.forget(rec.RunID)
		if rec.Status == Running && rec.LeaseGeneration == 0 {
			return l.Recheck(ctx, rec.Process)
		}
		return time.Time{}
	}
	now := time.Now()
	lease, err := l.st.GetLease(ctx, rec.SessionID)
	free := errors.Is(err, store.ErrNotFound)
	switch {
	case err == nil && lease.Generation == rec.LeaseGeneration && exited(lease.Owner):
		// Its holder was a process of this host that no longer exists: nothing to wait for.
		if err := l.st.ReleaseLease(ctx, lease); err != nil {
			return now.Add(time.Second)
		}
		free = true
	case err == nil && lease.Generation == rec.LeaseGeneration:
		l.forget(rec.RunID)
		return now.Add(min(max(lease.Expires.Sub(now), 500*time.Millisecond), 30*time.Second))
	case err != nil && !free:
		l.noteOutage(err)
		return now.Add(time.Second)
	default:
		if at := l.sighted(rec, now); now.Before(at) {
			return at
		}
		if back := l.outageEnd(); free && now.Before(back.Add(BeatTTL)) && l.Alive(ctx, rec.Process) {
			// The store was out just now: the lease may have expired only because nobody
			// could renew it. Nobody took it since, and the run's process is alive: it
			// renews the same generation once it reaches the store, or it lost the lease,
			// stopped the turn and settles the run itself. Its silence is not a lapse.
			return back.Add(BeatTTL)
		}
	}
	if adopt := l.adopt.Load(); adopt != nil && rec.TurnID != "" {
		// Its turn may be parked at an approval: the session is taken over (as any use of it
		// would) and the turn adopted, the record moving to the new generation.
		adopted, elsewhere := (*adopt)(ctx, rec)
		if adopted {
			l.forget(rec.RunID)
			return now.Add(time.Second)
		}
		// Not adopted: the session may have been taken over meanwhile (its turn then
		// restart-unknown there), which fences the holder already.
		lease, err := l.st.GetLease(ctx, rec.SessionID)
		free = errors.Is(err, store.ErrNotFound)
		switch {
		case err != nil && !free:
			l.noteOutage(err)
			return now.Add(time.Second)
		case err == nil && lease.Generation == rec.LeaseGeneration:
			return now.Add(time.Second) // its holder is back: look again
		case err == nil && elsewhere:
			// Another process took the session over while this one tried: it adopts the turn
			// (the record then moves to it) or leaves it restart-unknown. A lapse written now
			// would refuse its adoption, so it gets the grace first.
			if at := l.deferTo(rec, now); now.Before(at) {
				return at
			}
		}
	}
	if free {
		mine, err := l.st.AcquireLease(ctx, rec.SessionID, "runs:"+l.proc, lapseTTL)
		if err != nil {
			return now.Add(time.Second) // taken meanwhile (or a store error): look again
		}
		defer func() { _ = l.st.ReleaseLease(context.WithoutCancel(ctx), mine) }()
	}
	_, err = l.Update(ctx, rec.RunID, func(cur *Record) error {
		if cur.Status != Running || cur.Lapsed || cur.LeaseGeneration != rec.LeaseGeneration {
			return errUnchanged
		}
		cur.Lapsed, cur.LapsedAt = true, time.Now().UTC()
		return nil
	})
	if err != nil && !errors.Is(err, errUnchanged) {
		return now.Add(time.Second)
	}
	l.forget(rec.RunID)
	return time.Time{}
}

// sighted records when this process first saw rec's lease gone (again when the record changed
// since) and returns when the grace ends.
func (l *Ledger) sighted(rec Record, now time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sightingLocked(rec, now)
	l.gone[rec.RunID] = s
	return s.at.Add(l.grace)
}

// sightingLocked is rec's sighting, a new one from now when the record changed since the last.
// Called with mu held.
func (l *Ledger) sightingLocked(rec Record, now time.Time) sighting {
	s, ok := l.gone[rec.RunID]
	if !ok || s.version != rec.Version {
		s = sighting{version: rec.Version, at: now}
	}
	return s
}

// deferTo records that the run was left to the process that took its session over as this
// one tried to adopt the run, and returns when that grace ends. The grace is given once per
// version of the record (see sighting).
func (l *Ledger) deferTo(rec Record, now time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sightingLocked(rec, now)
	if s.deferred.IsZero() {
		s.deferred = now
	}
	l.gone[rec.RunID] = s
	return s.deferred.Add(l.grace)
}

func (l *Ledger) forget(runID string) {
	l.mu.Lock()
	delete(l.gone, runID)
	l.mu.Unlock()
}

// exited reports whether a lease owner named as the engine names it ("host:pid:…") is a
// process of this host that no longer exists.
func exited(owner string) bool {
	host, _ := os.Hostname()
	h, rest, ok := strings.Cut(owner, ":")
	pid, _, _ := strings.Cut(rest, ":")
	n, err := strconv.Atoi(pid)
	return ok && h == host && err == nil && n > 0 && n != os.Getpid() && !pidExists(n)
}
