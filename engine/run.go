package engine

import (
	"context"
	"errors"
	"io"
	"iter"

	"go.opentelemetry.io/otel/trace"
)

// ErrQueueDropped ends a Follow whose prompt was queued behind a running turn and then
// dropped before it ran (an interrupt clears the queue).
var ErrQueueDropped = errors.New("the queued prompt was dropped before it ran")

// Run admits a prompt like Submit and follows what it admitted: the Follow reads the events of
// the turn the prompt started or, when the busy policy queued it, of the turn the queue starts
// with it, and ends with that turn's message.complete (its Outcome) as the last event. A
// steered, rejected or command admission has no turn of its own: its Follow is already at its
// end. A turn started by another process (the session's lease holder) is read from the events
// it stores. An error is one Submit would return; nothing was admitted.
//
// The subscription is taken before the prompt is submitted, so no event of the turn is missed
// or repeated. A handle the engine released while idle is made live again first.
func (s *Session) Run(ctx context.Context, p Prompt) (Admission, *Follow, error) {
	if err := s.revive(ctx); err != nil {
		return Admission{}, nil, err
	}
	sub := s.Subscribe(s.LastSeq())
	adm, tk, err := s.admit(ctx, p)
	if err != nil {
		sub.Close()
		return adm, nil, err
	}
	f := &Follow{s: s, sub: sub, chain: p.FollowQueue}
	switch {
	case tk.t != nil:
		// A prompt that waited in line saw other turns go by: what belongs to no turn is
		// passed on from its own turn's start.
		f.t, f.live = tk.t, !p.InLine && p.Claim == nil
	case tk.q != nil:
		f.q = tk.q
	case tk.remote != "":
		// Queued by the lease holder behind the turn it interrupted: the turn it became
		// there is followed as one it started.
		f.remote = tk.remote
	case tk.dropped:
		f.end(ErrQueueDropped)
	case tk.behind != "":
		// Queued by the lease holder behind its running turn: the turn the queue starts
		// after that one, read from the events it stores, is followed.
		f.behind = tk.behind
	case adm.Status == AdmitStarted && adm.TurnID != "":
		// Started by the process holding the session's lease: its events reach this journal
		// from the store.
		f.remote = adm.TurnID
	default:
		f.end(io.EOF)
	}
	return adm, f, nil
}

// Follow reads the events of the turn a Run admitted. It yields the turn's own events, the
// session's events that belong to no turn (status, queue, policy decisions) once the turn has
// started, and every request.open (a delegated sub-agent's requests are answered on the
// session that delegated). The turn's message.complete, carrying its Outcome, is the last
// event; after it Next returns io.EOF.
//
// When the reader falls out of the journal window (ErrLagged) the events in between are lost,
// but the outcome is not: Next waits for the turn and returns its message.complete, built from
// the outcome (Seq 0). A turn that ended without one (its queued prompt could not be written)
// ends with the failed outcome it was given. When the session closes before the turn ends,
// Next returns ErrSessionClosed.
//
// A Follow is owned by one goroutine. Close detaches it; it does not stop the turn (Interrupt
// does). While it is attached the engine does not release the session.
type Follow struct {
	s      *Session
	sub    *Subscription
	t      *turnState    // the turn followed; nil while a queued prompt waits for its turn
	q      *queuedPrompt // the queue slot of a queued admission
	remote string        // the turn another process started for the prompt (its lease holder)
	behind string        // the turn another process's queue waits behind, until its follow-up starts
	passed bool          // behind has ended (its message.complete was read)
	chain  bool          // Prompt.FollowQueue
	live   bool          // the followed turn has started: turn-less events are passed on
	buf    []Event
	i      int
	out    *Outcome // the last outcome read
	err    error    // once set, what Next returns (io.EOF after the outcome)
	relags int      // times the subscription was taken again after the journal's window restarted
}

// maxRelags bounds how often a Follow reads on after its journal's window restarted (each time
// this process takes the session's lease over); past it the Follow ends with ErrLagged.
const maxRelags = 8

// Next returns the next event, waiting for it. It returns io.EOF after the outcome,
// ErrQueueDropped, ErrSessionClosed, or ctx's error (the Follow can be read again after a
// ctx error; the others are final).
func (f *Follow) Next(ctx context.Context) (Event, error) {
	for {
		if f.i < len(f.buf) {
			ev := f.buf[f.i]
			f.buf[f.i] = Event{}
			f.i++
			if out, ok := f.accept(ev); ok {
				return out, nil
			}
			continue
		}
		if f.err != nil {
			return Event{}, f.err
		}
		if err := f.fill(ctx); err != nil {
			return Event{}, err
		}
	}
}

// NextBatch appends to buf every event available now (at least one, waiting if none) up to
// and including the outcome, and returns it; the errors are Next's, returned only with no
// event appended.
func (f *Follow) NextBatch(ctx context.Context, buf []Event) ([]Event, error) {
	n := len(buf)
	for {
		for f.i < len(f.buf) { // left over from an earlier batch, or an outcome made up after a lag
			ev := f.buf[f.i]
			f.buf[f.i] = Event{}
			f.i++
			if out, ok := f.accept(ev); ok {
				buf = append(buf, out)
				if out.Type == EvMessageComplete { // one turn per batch
					return buf, nil
				}
			}
		}
		if len(buf) > n {
			return buf, nil
		}
		if f.err != nil {
			return buf, f.err
		}
		// Read straight into the caller's buffer and filter in place: no second copy.
		raw, err := f.sub.NextBatch(ctx, buf)
		if err != nil {
			if err := f.failed(ctx, err); err != nil {
				return buf, err
			}
			continue
		}
		w := n
		for k := n; k < len(raw); k++ {
			out, ok := f.accept(raw[k])
			if !ok {
				continue
			}
			raw[w] = out
			w++
			if out.Type == EvMessageComplete {
				if f.err == nil { // going on into a follow-up: keep the rest for the next batch
					f.buf, f.i = append(f.buf[:0], raw[k+1:]...), 0
				}
				break
			}
			if f.err != nil {
				break
			}
		}
		clear(raw[w:])
		buf = raw[:w]
		if len(buf) > n { // what is kept for the next batch must not follow this batch's outcome
			return buf, nil
		}
	}
}

// Events is the iterator form of Next: it yields events until the outcome (then stops) or an
// error (yielded last; ctx's error included).
func (f *Follow) Events(ctx context.Context) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for {
			ev, err := f.Next(ctx)
			if errors.Is(err, io.EOF) {
				return
			}
			if !yield(ev, err) || err != nil {
				return
			}
		}
	}
}

// TurnID is the id of the turn being followed ("" while a queued prompt waits for its turn).
func (f *Follow) TurnID() string {
	if f.t == nil {
		return ""
	}
	return f.t.id
}

// Outcome is the outcome of the last turn followed to its end.
func (f *Follow) Outcome() (Outcome, bool) {
	if f.out == nil {
		return Outcome{}, false
	}
	return *f.out, true
}

// Done reports whether the Follow has reached its end (the outcome was read, or it failed for
// good).
func (f *Follow) Done() bool { return f.err != nil && f.i >= len(f.buf) }

// Interrupt interrupts the followed turn if it is still the one running (a client that went
// away: nobody will read its answer), as Session.Interrupt does; it reports whether it did.
// The Follow still reads the turn to its outcome.
func (f *Follow) Interrupt(reason string) bool {
	if f.t == nil || f.err != nil {
		return false
	}
	return f.s.interrupt(f.t, reason)
}

// Close detaches the Follow; Next then returns an error. Closing twice is harmless.
func (f *Follow) Close() {
	if f.err == nil {
		f.end(errFollowClosed)
	}
}

// errFollowClosed is what Next returns after Close.
var errFollowClosed = errors.New("follow closed")

// end makes err final and drops what was read past this point.
func (f *Follow) end(err error) {
	f.err = err
	clear(f.buf[f.i:])
	f.buf = f.buf[:f.i]
	if f.sub != nil {
		f.sub.Close()
		f.sub = nil
	}
}

// fill reads the next batch of the journal into f.buf.
func (f *Follow) fill(ctx context.Context) error {
	buf, err := f.sub.NextBatch(ctx, f.buf[:0])
	f.buf, f.i = buf, 0
	if err != nil {
		return f.failed(ctx, err)
	}
	return nil
}

// failed handles an error of the subscription: ctx's is returned as it is; after a lag the
// turn's outcome is put in f.buf (nil is returned); anything else ends the Follow.
func (f *Follow) failed(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return err
	case errors.Is(err, ErrLagged) && f.t == nil && f.relags < maxRelags:
		// Not yet at a turn of this process (a turn another process runs, a prompt waiting for
		// its turn): the journal restarted its window on the stored log, this process having
		// taken the session's lease over. What the Follow waits for is in that log: it reads
		// on from where it was, or from the log's end when that is before (the events it had
		// past there were numbered here and never stored).
		f.relags++
		since := min(f.sub.Cursor(), f.s.LastSeq())
		f.sub.Close()
		f.sub = f.s.Subscribe(since)
		return nil
	case errors.Is(err, ErrLagged) && f.t != nil:
		// The events in between are gone; the outcome is not.
		select {
		case <-f.t.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		out := f.t.outcome
		f.buf, f.i, f.chain = append(f.buf[:0], Event{Type: EvMessageComplete, SessionID: f.s.id, TurnID: f.t.id, Text: out.Text, Data: out}), 0, false
		return nil
	case errors.Is(err, ErrJournalClosed):
		f.end(ErrSessionClosed)
	default:
		f.end(err)
	}
	return f.err
}

// accept decides whether ev is passed on and advances the Follow's state.
func (f *Follow) accept(ev Event) (Event, bool) {
	if f.behind != "" {
		return f.acceptBehind(ev)
	}
	if f.remote != "" {
		return f.acceptRemote(ev)
	}
	if f.t == nil {
		f.s.mu.Lock()
		t, dropped := f.q.turn, f.q.turn == nil && f.s.queued != f.q
		f.s.mu.Unlock()
		if t == nil {
			if dropped {
				f.end(ErrQueueDropped)
			}
			return Event{}, false
		}
		f.t = t
	}
	if ev.TurnID == f.t.id {
		f.live = true
		if ev.Type == EvMessageComplete {
			f.finished(ev)
		}
		return ev, true
	}
	if isClosed(f.t.done) && f.t.abandoned { // done first: abandoned is written before done is closed
		// The turn never started (its queued prompt could not be written): no message.complete
		// will come. End with the outcome it was given.
		out := f.t.outcome
		f.out = &out
		f.end(io.EOF)
		return Event{Type: EvMessageComplete, SessionID: f.s.id, TurnID: f.t.id, Data: out}, true
	}
	if !f.live {
		return Event{}, false
	}
	return ev, ev.TurnID == "" || ev.Type == EvRequestOpen
}

// acceptRemote is accept for a turn another process runs: it ends at the turn's
// message.complete or, when that process went away before it (another took the session over),
// with a failed outcome.
func (f *Follow) acceptRemote(ev Event) (Event, bool) {
	// The takeover cases come first: a takeover event carries the turn it is about (the
	// newest row's), which is the followed one when its process went away mid-turn.
	switch {
	case ev.Type == EvTakeover && adoptedTurn(ev) == f.remote:
		// Its process went away while it waited for an approval, and the new holder goes on
		// with it (adopt.go): its events keep coming, from that holder.
		f.live = true
		return ev, true
	case ev.Type == EvTakeover && (f.live || takenTurn(ev) == f.remote):
		// The process that started the turn is gone. A takeover about an earlier turn (this
		// engine took the session over and then started the prompt itself) is passed over.
		out := Outcome{TurnID: f.remote, Status: StatusFailed, ExitReason: OutcomeRestartUnknown,
			Error: "the process running the turn stopped before it ended"}
		f.out = &out
		f.end(io.EOF)
		return Event{Type: EvMessageComplete, SessionID: f.s.id, TurnID: f.remote, Data: out}, true
	case ev.TurnID == f.remote:
		f.live = true
		if ev.Type == EvMessageComplete {
			out, _ := ev.Data.(Outcome)
			f.out = &out
			f.end(io.EOF)
		}
		return ev, true
	}
	return ev, f.live && (ev.TurnID == "" || ev.Type == EvRequestOpen)
}

// acceptBehind is accept for a prompt another process queued behind its running turn: once
// that turn has ended, the next turn to start is the queue's follow-up (the lease holder
// starts it at once, before any other), which is then followed as acceptRemote does. The
// queue cleared before that turn ended, the session going idle after it instead, or the
// holder gone (a takeover) end the Follow with ErrQueueDropped, as a dropped local slot does.
func (f *Follow) acceptBehind(ev Event) (Event, bool) {
	switch {
	case ev.Type == EvTakeover:
		f.end(ErrQueueDropped)
	case !f.passed:
		if ev.TurnID == f.behind && ev.Type == EvMessageComplete {
			f.passed = true
		} else if q, ok := ev.Data.(QueueInfo); ok && ev.Type == EvQueueUpdated && q.Queued == "" {
			f.end(ErrQueueDropped)
		}
	case ev.TurnID != "" && ev.TurnID != f.behind:
		f.remote, f.behind = ev.TurnID, ""
		return f.acceptRemote(ev)
	case idleEvent(ev):
		f.end(ErrQueueDropped)
	}
	return Event{}, false
}

// idleEvent reports whether ev says the session went idle.
func idleEvent(ev Event) bool {
	switch d := ev.Data.(type) {
	case Info:
		return ev.Type == EvSessionInfo && d.Status == StatusIdle
	case StatusInfo:
		return ev.Type == EvStatus && d.Status == StatusIdle
	}
	return false
}

// takenTurn is the turn a takeover event says its previous holder was running.
func takenTurn(ev Event) string {
	if tk, ok := ev.Data.(Takeover); ok {
		return tk.TurnID
	}
	return ev.TurnID
}

// adoptedTurn is the turn a takeover event says the new holder adopted ("" when none).
func adoptedTurn(ev Event) string {
	if tk, ok := ev.Data.(Takeover); ok && tk.Adopted {
		return tk.TurnID
	}
	return ""
}

// finished handles the followed turn's message.complete: the end, or with FollowQueue after a
// turn that was not cancelled, the turn the queue started next.
func (f *Follow) finished(ev Event) {
	out, _ := ev.Data.(Outcome)
	f.out = &out
	if f.chain && f.sub != nil && out.Status != StatusCancelled && !out.Interrupted {
		f.s.mu.Lock()
		next := f.t.next
		f.s.mu.Unlock()
		if next != nil {
			f.t, f.live = next, false
			return
		}
	}
	f.end(io.EOF)
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// inLine is a prompt waiting in the session's line (Prompt.InLine).
type inLine struct {
	text, origin string
	parent       trace.SpanContext // the waiting request's span: the turn's parent
	ready        chan struct{}     // closed once t or err is set
	t            *turnState        // the turn claimed for it
	err          error
}

// waitInLine queues the prompt behind the running turn and waits until a turn is claimed for
// it (handOverLocked). Called with s.mu held; returns with it released.
func (s *Session) waitInLine(ctx context.Context, text, origin string) (*turnState, error) {
	w := &inLine{text: text, origin: origin, parent: trace.SpanContextFromContext(ctx), ready: make(chan struct{})}
	s.line = append(s.line, w)
	s.mu.Unlock()
	select {
	case <-w.ready:
		return w.t, w.err
	case <-ctx.Done():
	}
	s.mu.Lock()
	for i, x := range s.line {
		if x == w {
			s.line = append(s.line[:i:i], s.line[i+1:]...)
			s.mu.Unlock()
			return nil, ctx.Err()
		}
	}
	s.mu.Unlock()
	<-w.ready // handed over meanwhile: the turn is ours; its start will see ctx
	return w.t, w.err
}

// handOverLocked claims a turn for the first prompt in line once the running turn ended, and
// reports whether there was one (its waiter writes the user row and starts it). Called with
// s.mu held.
func (s *Session) handOverLocked() bool {
	if len(s.line) == 0 {
		return false
	}
	w := s.line[0]
	s.line = s.line[1:]
	w.t = s.newTurnLocked(w.text, w.origin, w.parent) // not t.next: FollowQueue does not follow it
	close(w.ready)
	return true
}

// failLineLocked refuses every prompt in line (the session or the engine closes). Called with
// s.mu held.
func (s *Session) failLineLocked(err error) {
	for _, w := range s.line {
		w.err = err
		close(w.ready)
	}
	s.line = nil
}
