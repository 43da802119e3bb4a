package engine

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermes-go/hermes/engine/store"
)

// LeaseConfig sets how the engine takes session leases (see DESIGN.md "Processes and nodes").
// A session takes its lease before a turn starts, holds it while it has work (a running turn,
// a queued follow-up, prompts in line, open requests), renews it every TTL/3 and releases it
// when idle. Every write it makes meanwhile carries the lease generation (store.Fenced), so a
// process that lost the lease is refused by the store itself.
type LeaseConfig struct {
	// Off runs without leases: writes are unfenced and every command runs locally. Only for a
	// single engine that is alone on its store (some tests); every command of the binary
	// runs with leases.
	Off bool
	// Owner names this engine in lease records; default "hostname:pid:random".
	Owner string
	// TTL is a lease's lifetime without renewal; default 10 s.
	TTL time.Duration
	// InboxTimeout bounds how long a command sent to the process holding a session's lease
	// waits for its reply; default 30 s. Past it the command is withdrawn when it was not yet
	// taken, and the caller gets ErrOwnerUnavailable (safe to retry).
	InboxTimeout time.Duration
}

// EvTakeover is appended to a session's journal when this engine took the session's lease over
// from a holder that did not release it (it stopped, crashed or lost its store): whatever that
// holder was running is restart-unknown (payload Takeover).
const EvTakeover EventType = "session.takeover"

// OutcomeRestartUnknown is the outcome of a turn whose process stopped while running it: it
// may have done anything up to its last acknowledged write.
const OutcomeRestartUnknown = "restart_unknown"

// reasonLease is the exit reason of a turn stopped because its process lost the session's lease.
const reasonLease = "lease_lost"

// Takeover is the payload of EvTakeover and the argument of Config.OnTakeover.
type Takeover struct {
	SessionID          string `json:"session_id"`
	Owner              string `json:"owner"`
	Generation         uint64 `json:"generation"`
	PreviousOwner      string `json:"previous_owner"`
	PreviousGeneration uint64 `json:"previous_generation"`
	// TurnID is the turn of the newest transcript row, the one the previous holder was most
	// likely running ("" for an empty transcript).
	TurnID  string `json:"turn_id,omitempty"`
	Outcome string `json:"outcome"` // OutcomeRestartUnknown, or "" when the turn was adopted
	// Adopted says the turn TurnID was parked at an approval and goes on under this holder
	// (adopt.go): it is not restart-unknown.
	Adopted bool `json:"adopted,omitempty"`
}

func (Takeover) eventData() {}

// ErrOwnerUnavailable: a command for a session whose lease another process holds got no reply
// within LeaseConfig.InboxTimeout. When it is returned the command was withdrawn unexplained
// or not at all taken: retrying is safe.
var ErrOwnerUnavailable = errors.New("the process running this session did not answer; retry")

// errLeaseLost is the cause a turn is cancelled with when its process lost the lease.
var errLeaseLost = fmt.Errorf("%w: another process took this session over; the turn stopped", store.ErrLeaseLost)

// markerPrefix keys a session's "held" marker: written (fenced) after each acquisition and
// deleted before a clean release, so an acquirer that finds another holder's marker knows that
// holder did not finish (takeover). It also records the event seqs the holder reserved (it
// publishes none past them): a holder that takes over numbers its events past them, so no seq
// a client saw from the one before is ever reused (eventlog.go).
const markerPrefix = "lease/held/"

type leaseMarker struct {
	Owner string `json:"owner"`
	// Generation is the holder's lease generation; 0 in a birth reservation (the engine that
	// made the session, before any lease: see birthReservation).
	Generation uint64 `json:"generation"`
	// Reserved is the last event seq the holder may publish (0 in markers written before
	// seqs were reserved).
	Reserved uint64 `json:"reserved,omitempty"`
}

// heldLease is the lease of one session held by this engine: its renewal goroutine and its
// inbox goroutine (inbox.go), which also releases it once the session is idle.
type heldLease struct {
	e     *Engine
	sid   string
	ready chan struct{} // closed when the acquisition ended (err set, or active)
	err   error         // the acquisition's error
	gone  chan struct{} // closed when the lease was released or lost and the entry removed

	ctx    context.Context // ends when the lease stops
	cancel context.CancelFunc
	stop   chan struct{} // closed to stop both goroutines
	once   sync.Once
	poke   chan struct{} // cap 1: the session may be idle, or the engine closes
	paused atomic.Bool   // tests: a holder that hangs (no renewal, no inbox)
	j      *journal      // the journal of the session object that acquired it

	mu          sync.Mutex
	lease       store.Lease
	view        store.Store    // store.Fenced with the lease's generation
	pins        int            // callers between hold and registering their work
	lineq       []inboxCommand // forwarded prompts in line not yet submitted, in the order taken
	lineRunning bool           // the line goroutine runs (inbox.go inLine)
	active      bool           // false once releasing or lost
	lost        bool
	deadline    time.Time // the lease is surely valid until then (renewal sent + TTL - margin)
}

func newOwnerID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + ":" + strconv.Itoa(os.Getpid()) + ":" + hex.EncodeToString(b[:])
}

// leaseDefaults fills the lease settings' defaults.
func leaseDefaults(c *LeaseConfig) {
	if c.Owner == "" {
		c.Owner = newOwnerID()
	}
	if c.TTL <= 0 {
		c.TTL = 10 * time.Second
	}
	if c.InboxTimeout <= 0 {
		c.InboxTimeout = 30 * time.Second
	}
}

// releaseDeadLocal gives back the session's lease when its holder was a process of this host
// that no longer exists (killed, crashed): waiting out its TTL would only delay the restart
// path, which the next acquirer runs because the holder left its held marker. The release is
// refused by the store if the lease changed hands meanwhile. It reports whether it released.
func (e *Engine) releaseDeadLocal(ctx context.Context, sid string) bool {
	l, err := e.cfg.Store.GetLease(ctx, sid)
	if err != nil {
		return false
	}
	host, _ := os.Hostname()
	h, rest, ok := strings.Cut(l.Owner, ":")
	pid, _, _ := strings.Cut(rest, ":")
	n, err := strconv.Atoi(pid)
	if !ok || h != host || err != nil || n <= 0 || n == os.Getpid() || !pidGone(n) {
		return false
	}
	if err := e.cfg.Store.ReleaseLease(ctx, l); err != nil {
		return false
	}
	e.log.Warn("released the lease of a process of this host that no longer exists", "session_id", sid, "owner", l.Owner, "generation", l.Generation)
	return true
}

// LeaseOwner is the owner id this engine's leases carry.
func (e *Engine) LeaseOwner() string { return e.cfg.Leases.Owner }

// heldElsewhere is hold's error when another process holds the lease.
type heldElsewhere struct{ err error }

func (h *heldElsewhere) Error() string { return h.err.Error() }
func (h *heldElsewhere) Unwrap() error { return h.err }

// wst is the store the session writes through: fenced with its lease's generation while it
// holds one (also once lost: those writes are then refused), the plain store otherwise.
func (s *Session) wst() store.Store {
	if h := s.held.Load(); h != nil {
		return h.view
	}
	return s.e.cfg.Store
}

// hold makes sure this engine holds the session's lease, acquiring it when needed, and pins it
// until unpin: the caller registers its work (a turn, a queued prompt) meanwhile. It returns
// nil with leases off, and a *heldElsewhere error when another process holds the lease.
func (s *Session) hold(ctx context.Context) (*heldLease, error) {
	e := s.e
	if e.cfg.Leases.Off {
		return nil, nil
	}
	if err := s.ensureStored(ctx); err != nil {
		return nil, err
	}
	for {
		e.lmu.Lock()
		if e.leasesClosed {
			e.lmu.Unlock()
			return nil, ErrEngineClosed
		}
		h := e.leases[s.id]
		if h == nil {
			h = &heldLease{e: e, sid: s.id, ready: make(chan struct{}), gone: make(chan struct{}), stop: make(chan struct{}), poke: make(chan struct{}, 1)}
			e.leases[s.id] = h
			e.leaseWG.Add(1)
			e.lmu.Unlock()
			if err := h.acquire(ctx, s); err != nil {
				e.lmu.Lock()
				delete(e.leases, s.id)
				e.lmu.Unlock()
				h.err = err
				close(h.ready)
				close(h.gone)
				e.leaseWG.Done()
				return nil, err
			}
			close(h.ready)
			return h, nil
		}
		e.lmu.Unlock()
		select {
		case <-h.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if h.err != nil {
			return nil, h.err
		}
		h.mu.Lock()
		if h.active {
			h.pins++
			h.mu.Unlock()
			s.held.Store(h)
			return h, nil
		}
		h.mu.Unlock()
		select {
		case <-h.gone:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// unpin ends a hold: the lease may be released once the session is idle. Nil-safe.
func (h *heldLease) unpin() {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.pins--
	h.mu.Unlock()
	h.wake()
}

// wake asks the inbox goroutine to look whether the session went idle.
func (h *heldLease) wake() {
	select {
	case h.poke <- struct{}{}:
	default:
	}
}

// acquire takes the lease in the store, notices a takeover, and starts the lease's goroutines.
func (h *heldLease) acquire(ctx context.Context, s *Session) error {
	e := h.e
	st := e.cfg.Store
	ttl := e.cfg.Leases.TTL
	sent := time.Now()
	l, err := st.AcquireLease(ctx, h.sid, e.cfg.Leases.Owner, ttl)
	if errors.Is(err, store.ErrLeaseHeld) && e.releaseDeadLocal(ctx, h.sid) {
		l, err = st.AcquireLease(ctx, h.sid, e.cfg.Leases.Owner, ttl)
	}
	if errors.Is(err, store.ErrLeaseHeld) {
		return &heldElsewhere{err: err}
	}
	if err != nil {
		return err
	}
	// The marker and the stored last seq are read together, and the reservation written while
	// the inbox watch is set up: over the home's store process each pair is one round trip's
	// wait instead of two.
	var (
		prev       leaseMarker
		last       uint64
		lastErr    error
		readsDone  = make(chan struct{})
		releaseNow = func() { _ = st.ReleaseLease(context.WithoutCancel(ctx), l) }
	)
	go func() {
		defer close(readsDone)
		last, lastErr = st.LastEventSeq(ctx, h.sid)
	}()
	b, err := st.GetKV(ctx, markerPrefix+h.sid)
	<-readsDone
	if err == nil {
		_ = json.Unmarshal(b, &prev)
	} else if !errors.Is(err, store.ErrNotFound) {
		releaseNow()
		return err
	}
	if lastErr != nil {
		releaseNow()
		return lastErr
	}
	view := store.Fenced(st, h.sid, l.Generation)
	// The event seqs this holder numbers from and reserves: past the stored log, and past what
	// a holder that left its marker behind may have published without storing it.
	sl := &seqLease{floor: max(last, prev.Reserved), stored: last, storedKnown: true}
	born := prev.Owner != "" && prev.Generation == 0 // a birth reservation: no lease was taken, nothing ran
	if born && prev.Owner == l.Owner {
		sl.floor = last // this engine's own: its journal numbered those seqs and goes on numbering
	}
	sl.reserved = sl.floor + seqBlock
	sl.reserve = func(ctx context.Context, upto uint64) error {
		b, _ := json.Marshal(leaseMarker{Owner: l.Owner, Generation: l.Generation, Reserved: upto})
		return view.PutKV(ctx, markerPrefix+h.sid, b)
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	var (
		sub      *store.Subscription
		watchErr error
		watched  = make(chan struct{})
	)
	go func() {
		defer close(watched)
		sub, watchErr = st.Watch(h.ctx, store.Interest{KeyPrefixes: []string{inboxPrefix(h.sid)}})
	}()
	err = sl.reserve(ctx, sl.reserved)
	<-watched
	if err != nil || watchErr != nil {
		h.cancel() // ends the watch, if it was set up
		if err == nil {
			_ = view.DeleteKV(context.WithoutCancel(ctx), markerPrefix+h.sid)
		}
		releaseNow()
		return cmp.Or(err, watchErr)
	}
	h.mu.Lock()
	h.lease, h.view, h.active, h.pins = l, view, true, 1
	h.deadline = sent.Add(ttl - ttl/10)
	h.mu.Unlock()
	s.held.Store(h)
	h.j = s.j
	if err := s.j.own(ctx, st, l.Generation, sl); err != nil { // this process numbers the session's events now
		e.log.Warn("session lease: taking the event log over failed", "session_id", h.sid, "err", err)
	}
	if prev.Owner != "" && !born && (prev.Owner != l.Owner || prev.Generation != l.Generation) {
		h.takeover(ctx, s, prev, l)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); h.renewLoop() }()
	go func() { defer wg.Done(); h.inboxLoop(sub) }()
	go func() { // the lease's owner: waits for both, then gives the lease back
		defer e.leaseWG.Done()
		wg.Wait()
		h.finish()
	}()
	return nil
}

// errBirthTaken: a birth reservation could not be extended because a lease holder's marker
// replaced it; the session's log is that holder's now.
var errBirthTaken = errors.New("another process took the session's lease")

// birthReservation writes the held marker of a session this engine just made, before any lease
// (generation 0), reserving the first seqs of its log for this engine's journal, which publishes
// within them (journal.bornStored). A process that takes the session's lease first numbers
// past the reservation. Extending it is a compare-and-swap: it never overwrites the marker of a
// lease holder. nil when it could not be written.
func (e *Engine) birthReservation(ctx context.Context, sid string) *seqLease {
	st, key := e.cfg.Store, markerPrefix+sid
	var (
		mu  sync.Mutex // the flusher extends, a closing journal deletes
		cur []byte     // the marker as this engine last wrote it (nil: absent)
	)
	swap := func(ctx context.Context, b []byte) error {
		mu.Lock()
		defer mu.Unlock()
		ok, err := st.CompareAndSwapKV(ctx, key, cur, b)
		if err != nil {
			return err
		}
		if !ok {
			return errBirthTaken
		}
		cur = b
		return nil
	}
	reserve := func(ctx context.Context, upto uint64) error {
		b, _ := json.Marshal(leaseMarker{Owner: e.cfg.Leases.Owner, Reserved: upto})
		return swap(ctx, b)
	}
	if err := reserve(ctx, seqBlock); err != nil {
		e.log.Warn("session log: reserving the first event seqs failed; its events are published once stored", "session_id", sid, "err", err)
		return nil
	}
	return &seqLease{reserved: seqBlock, reserve: reserve, drop: func(ctx context.Context) error { return swap(ctx, nil) }}
}

// takeover runs the single-node restart path for a session whose previous holder did not
// release it: what it was running is restart-unknown.
func (h *heldLease) takeover(ctx context.Context, s *Session, prev leaseMarker, l store.Lease) {
	tk := Takeover{SessionID: h.sid, Owner: l.Owner, Generation: l.Generation, PreviousOwner: prev.Owner,
		PreviousGeneration: prev.Generation, Outcome: OutcomeRestartUnknown}
	if rows, err := h.e.cfg.Store.Rows(ctx, h.sid, store.RowQuery{Tail: true, Limit: 1}); err == nil && len(rows) > 0 {
		tk.TurnID = rows[0].TurnID
	}
	if h.adopt(ctx, s, tk) {
		return
	}
	h.e.log.WarnContext(ctx, "took a session over from a holder that did not release it; its turn is restart-unknown",
		"session_id", h.sid, "previous_owner", prev.Owner, "previous_generation", prev.Generation, "generation", l.Generation)
	s.mu.Lock()
	if s.turn == nil && tk.TurnID != "" {
		s.failed = &Inflight{TurnID: tk.TurnID, Status: OutcomeRestartUnknown, ExitReason: OutcomeRestartUnknown,
			Error: "the process running this turn (" + prev.Owner + ") stopped; its outcome is unknown"}
	}
	s.mu.Unlock()
	s.j.append(Event{Type: EvTakeover, TurnID: tk.TurnID, Data: tk})
	if f := h.e.cfg.OnTakeover; f != nil {
		f(ctx, tk)
	}
}

// renewLoop renews the lease every TTL/3 until it stops; a renewal refused (or none succeeding
// before the local deadline) loses the lease.
func (h *heldLease) renewLoop() {
	ttl := h.e.cfg.Leases.TTL
	tick := time.NewTicker(ttl / 3)
	defer tick.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-tick.C:
		}
		if h.paused.Load() {
			continue
		}
		h.mu.Lock()
		cur := h.lease
		h.mu.Unlock()
		sent := time.Now()
		ctx, cancel := context.WithTimeout(h.ctx, ttl/3)
		l, err := h.e.cfg.Store.RenewLease(ctx, cur, ttl)
		cancel()
		if err != nil && h.ctx.Err() == nil {
			// Late (it expired, say on a loaded machine) but not taken over: acquiring again
			// keeps the generation, so no other writer can have come in between.
			ctx, cancel := context.WithTimeout(h.ctx, ttl/3)
			l, err = h.reacquire(ctx, cur, err)
			cancel()
		}
		if err == nil {
			h.mu.Lock()
			h.lease, h.deadline = l, sent.Add(ttl-ttl/10)
			h.mu.Unlock()
			continue
		}
		select {
		case <-h.stop:
			return
		default:
		}
		h.mu.Lock()
		past := time.Now().After(h.deadline)
		h.mu.Unlock()
		if errors.Is(err, store.ErrLeaseLost) || past {
			h.lose(err)
			return
		}
		h.e.log.Warn("session lease renewal failed; retrying", "session_id", h.sid, "err", err)
	}
}

// reacquire takes the lease again after a refused renewal. It succeeds only when the
// generation is still cur's; a lease taken with another generation is given back.
func (h *heldLease) reacquire(ctx context.Context, cur store.Lease, renewErr error) (store.Lease, error) {
	l, err := h.e.cfg.Store.AcquireLease(ctx, h.sid, cur.Owner, h.e.cfg.Leases.TTL)
	if err != nil {
		if errors.Is(err, store.ErrLeaseHeld) {
			return store.Lease{}, renewErr
		}
		return store.Lease{}, err
	}
	if l.Generation != cur.Generation {
		_ = h.e.cfg.Store.ReleaseLease(ctx, l)
		return store.Lease{}, renewErr
	}
	return l, nil
}

// lose self-fences: the lease is gone (a renewal was refused, or a write was fenced), so the
// running turn stops at once and the lease is not released (it is no longer this engine's).
func (h *heldLease) lose(cause error) {
	h.mu.Lock()
	if h.lost {
		h.mu.Unlock()
		return
	}
	h.lost, h.active = true, false
	h.mu.Unlock()
	h.e.log.Warn("session lease lost; stopping its turn", "session_id", h.sid, "err", cause)
	h.halt()
	if s, ok := h.e.Peek(h.sid); ok {
		s.mu.Lock()
		t := s.turn
		s.mu.Unlock()
		if t != nil {
			t.interrupt(errLeaseLost)
		}
	}
}

// halt stops both goroutines and what they are doing.
func (h *heldLease) halt() {
	h.once.Do(func() {
		close(h.stop)
		h.cancel()
	})
}

// idle reports whether the lease can be given back, and marks it so under h.mu: no pin, and
// the session has nothing running, queued, in line or waiting on a request.
func (h *heldLease) idle() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.active || h.pins > 0 {
		return false
	}
	if s, ok := h.e.Peek(h.sid); ok {
		s.mu.Lock()
		busy := s.turn != nil || s.queued != nil || len(s.line) > 0 || len(s.requests) > 0
		s.mu.Unlock()
		if busy {
			return false
		}
	}
	h.active = false
	return true
}

// finish runs once both goroutines ended: a lease not lost is given back (marker first, so a
// clean release never looks like a takeover), and the entry is removed so the next hold
// acquires again.
func (h *heldLease) finish() {
	h.mu.Lock()
	h.active = false
	lost, l, view := h.lost, h.lease, h.view
	h.mu.Unlock()
	clean := true
	if h.j != nil {
		clean = h.j.disown() // what it numbered is stored first; then it follows the log
	}
	if !lost {
		ctx, cancel := context.WithTimeout(context.Background(), h.e.cfg.Leases.TTL)
		if !clean {
			// Events it published may not be stored: the marker keeps their seqs reserved, and
			// the next holder runs the takeover path.
			h.e.log.Warn("session lease: released with events not stored; the next holder takes over", "session_id", h.sid)
		} else if err := view.DeleteKV(ctx, markerPrefix+h.sid); err != nil && !errors.Is(err, store.ErrClosed) {
			h.e.log.Warn("session lease: clearing the held marker failed", "session_id", h.sid, "err", err)
		}
		if err := h.e.cfg.Store.ReleaseLease(ctx, l); err != nil && !errors.Is(err, store.ErrClosed) {
			h.e.log.Warn("session lease release failed", "session_id", h.sid, "err", err)
		}
		cancel()
	}
	h.cancel()
	h.e.lmu.Lock()
	if h.e.leases[h.sid] == h {
		delete(h.e.leases, h.sid)
	}
	h.e.lmu.Unlock()
	if s, ok := h.e.Peek(h.sid); ok && !lost {
		s.held.CompareAndSwap(h, nil) // a lost one stays until its turn ended: its writes are refused
	}
	close(h.gone)
}

// noteFenced loses the session's lease when err says a write was fenced.
func (s *Session) noteFenced(err error) {
	if err == nil || !errors.Is(err, store.ErrFenced) {
		return
	}
	if h := s.held.Load(); h != nil {
		h.lose(err)
	}
}

// closeLeases stops every held lease and waits until each is given back (Engine.Close, after
// the turns ended).
func (e *Engine) closeLeases() {
	e.lmu.Lock()
	e.leasesClosed = true
	hs := make([]*heldLease, 0, len(e.leases))
	for _, h := range e.leases {
		hs = append(hs, h)
	}
	e.lmu.Unlock()
	for _, h := range hs {
		<-h.ready
		h.halt()
	}
	e.leaseWG.Wait()
}

// remoteOwner reports whether another process holds the session's lease now.
func (s *Session) remoteOwner(ctx context.Context) bool {
	if s.e.cfg.Leases.Off {
		return false
	}
	if h := s.held.Load(); h != nil {
		h.mu.Lock()
		mine := h.active
		h.mu.Unlock()
		if mine {
			return false
		}
	}
	l, ok := s.e.currentLease(ctx, s.id)
	return ok && l.Owner != s.e.cfg.Leases.Owner
}

// currentLease looks up the live lease of a session.
func (e *Engine) currentLease(ctx context.Context, sid string) (store.Lease, bool) {
	l, err := e.cfg.Store.GetLease(ctx, sid)
	return l, err == nil
}

// Followers decode the takeover event's payload as what it is (eventlog.go).
func init() { payloadTypes[EvTakeover] = decodeAs[Takeover] }
