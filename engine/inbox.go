package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hermes-go/hermes/engine/store"
)

// The inbox carries the commands that need a session's live turn state (a prompt under the
// busy-input policy, a steer, an interrupt, an answer to an open request) from a process that
// does not hold the session's lease to the one that does. A command is a KV record
// inbox/<session>/<id> (ids sort in sending order) naming a reply key; the holder, woken by
// store change hints on its session's prefix, takes each command (a fenced compare-and-swap,
// so a command is taken once and never after its sender withdrew it), executes it as if it
// had been given locally and writes the reply. A sender whose session has no live holder
// takes the lease itself, and its own inbox goroutine serves the command: a command given
// while the holder is gone is served by the next one.
//
// Order: the holder takes the commands stored when it looks in id order (the sender's clock,
// then its process), and prompts in line (Prompt.InLine) join the session's line in the order
// they were taken, one after the other, whatever else the holder serves meanwhile.
//
// Nothing stays behind: a command carries the time its sender stops waiting (Deadline); past
// it and a grace (inboxGrace) its sender has withdrawn it or is gone, and the holder drops it
// unexecuted. A reply that nobody fetched (its sender gave up or died) is removed by the
// session's next holder (at acquisition, then every inboxGrace) once past the same time.

const (
	inboxRoot = "inbox/"
	replyRoot = "inbox-reply/"
)

// inboxGrace is how long past its deadline a command or its reply is kept: its sender (alive)
// withdraws it and fetches the reply within a lease TTL of the deadline, and clocks of the
// processes sharing a store may differ a little.
const inboxGrace = time.Minute

func inboxPrefix(sid string) string { return inboxRoot + sid + "/" }

func replyPrefix(sid string) string { return replyRoot + sid + "/" }

// inboxCommand is one command for a session's lease holder.
type inboxCommand struct {
	ID     string         `json:"id"`
	Kind   string         `json:"kind"` // submit | steer | interrupt | answer | withdraw | snapshot
	Reply  string         `json:"reply"`
	Prompt *Prompt        `json:"prompt,omitempty"`
	Text   string         `json:"text,omitempty"`   // steer text, interrupt reason
	Hold   bool           `json:"hold,omitempty"`   // steer: SteerOrHold
	Req    string         `json:"req,omitempty"`    // answer: request id
	Answer map[string]any `json:"answer,omitempty"` // answer
	// Deadline is when the sender stops waiting for the reply (zero in a command of an
	// earlier build: its id's time and this process's InboxTimeout stand in).
	Deadline time.Time `json:"deadline,omitzero"`
}

// pastUse reports whether a command (or its reply) is past any use at now: its sender has
// withdrawn it or is gone. id is the command's id, for a record without a deadline.
func (e *Engine) pastUse(id string, deadline, now time.Time) bool {
	if deadline.IsZero() {
		sent, ok := inboxSentAt(id)
		if !ok {
			return false
		}
		deadline = sent.Add(e.cfg.Leases.InboxTimeout)
	}
	return now.After(deadline.Add(e.cfg.Leases.TTL + inboxGrace))
}

// inboxSentAt reads the sending time an inbox id starts with.
func inboxSentAt(id string) (time.Time, bool) {
	hex, _, ok := strings.Cut(id, "-")
	if !ok {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(hex, 16, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, n), true
}

// inboxReply is what the holder did with a command.
type inboxReply struct {
	Admission   *Admission    `json:"admission,omitempty"`
	Queued      int           `json:"queued,omitempty"` // Admission.QueuedCount
	Steer       *SteerReceipt `json:"steer,omitempty"`
	Interrupted bool          `json:"interrupted,omitempty"`
	// QueuedTurn is the turn a prompt queued by an interrupt became (the holder waits for
	// the interrupted turn to end before replying); QueueDropped says the queue was
	// cleared before it ran. The sender follows that turn, as Run does a local queue slot.
	QueuedTurn   string `json:"queued_turn,omitempty"`
	QueueDropped bool   `json:"queue_dropped,omitempty"`
	// Behind is the turn a queued prompt waits behind there: the sender follows the turn
	// that starts after it in the event log (the queue's follow-up), as Run does a local slot.
	Behind string `json:"behind,omitempty"`
	// Snapshot is the holder's Snapshot of the session (command snapshot).
	Snapshot *Snapshot `json:"snapshot,omitempty"`
	Code     string    `json:"code,omitempty"` // a sentinel error's text (wireErrors)
	Error    string    `json:"error,omitempty"`
	// Deadline is the command's: a reply nobody fetched is removed once past its use.
	Deadline time.Time `json:"deadline,omitzero"`

	slot *queuedPrompt // the queue slot an interrupting prompt went into (not sent)
}

// wireErrors are the errors a reply carries by name, so the sender's caller matches them with
// errors.Is as it would a local call's.
var wireErrors = []error{
	ErrEmptyPrompt, ErrBusy, ErrNotRunning, ErrEmptySteer, ErrUnknownRequest, ErrInvalidAnswer,
	ErrSessionReleased, ErrSessionClosed, ErrSessionNotFound, ErrEngineClosed, ErrInvalidModel,
	ErrTruncateNoTarget, ErrTruncateConsent, ErrTruncateStale, ErrTruncateMismatch, ErrTruncateEmpty,
	ErrTruncateOrdinal, ErrOwnerUnavailable, store.ErrTitleTaken, store.ErrUnavailable,
}

func replyErr(err error) inboxReply {
	r := inboxReply{Error: err.Error()}
	for _, w := range wireErrors {
		if errors.Is(err, w) {
			r.Code = w.Error()
			break
		}
	}
	return r
}

func (r inboxReply) err() error {
	if r.Error == "" {
		return nil
	}
	for _, w := range wireErrors {
		if w.Error() == r.Code {
			if r.Error == r.Code {
				return w
			}
			return fmt.Errorf("%w (%s)", w, r.Error)
		}
	}
	return errors.New(r.Error)
}

// casKV is the store's compare-and-swap on a KV record, when it has one.
type casKV interface {
	CompareAndSwapKV(ctx context.Context, key string, old, new []byte) (bool, error)
}

// inboxLoop serves the inbox while the lease is held, and gives the lease back once the
// session is idle. It is the only goroutine that decides to release.
func (h *heldLease) inboxLoop(sub *store.Subscription) {
	defer sub.Close()
	defer h.halt()
	h.drain()
	h.sweepReplies()
	sweep := time.NewTicker(inboxGrace)
	defer sweep.Stop()
	for {
		if h.idle() {
			return
		}
		select {
		case <-h.stop:
			return
		case _, ok := <-sub.C():
			if !ok {
				return
			}
			sub.Take() // a hint says where to look; on loss too, everything is read again
			h.drain()
		case <-sweep.C:
			h.sweepReplies()
		case <-h.poke:
		}
	}
}

// sweepReplies removes the session's replies that nobody fetched and nobody will: their
// sender gave up waiting, or died.
func (h *heldLease) sweepReplies() {
	if h.paused.Load() {
		return
	}
	st := h.e.cfg.Store
	all, err := st.ListKV(h.ctx, replyPrefix(h.sid))
	if err != nil {
		if h.ctx.Err() == nil {
			h.e.log.Warn("session inbox: reading replies failed", "session_id", h.sid, "err", err)
		}
		return
	}
	now := time.Now()
	for k, raw := range all {
		var r inboxReply
		if err := json.Unmarshal(raw, &r); err == nil && !h.e.pastUse(strings.TrimPrefix(k, replyPrefix(h.sid)), r.Deadline, now) {
			continue
		}
		if err := st.DeleteKV(h.ctx, k); err != nil && h.ctx.Err() == nil {
			h.e.log.Warn("session inbox: removing a reply nobody fetched failed", "session_id", h.sid, "key", k, "err", err)
		}
	}
}

// drain executes the pending commands in order.
func (h *heldLease) drain() {
	if h.paused.Load() {
		return
	}
	st := h.e.cfg.Store
	all, err := st.ListKV(h.ctx, inboxPrefix(h.sid))
	if err != nil {
		if h.ctx.Err() == nil {
			h.e.log.Warn("session inbox: reading commands failed", "session_id", h.sid, "err", err)
		}
		return
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		select {
		case <-h.stop:
			return
		default:
		}
		raw := all[k]
		var c inboxCommand
		if err := json.Unmarshal(raw, &c); err != nil || c.Reply == "" {
			h.e.log.Warn("session inbox: dropping an unreadable command", "session_id", h.sid, "key", k, "err", err)
			_ = h.view.DeleteKV(h.ctx, k)
			continue
		}
		if !h.take(k, raw) {
			continue
		}
		if h.e.pastUse(c.ID, c.Deadline, time.Now()) {
			// Its sender withdrew it (and lost the race to this take) or is gone: nobody
			// waits for it, and running it now would surprise.
			h.e.log.Warn("session inbox: dropped a command past its deadline", "session_id", h.sid, "kind", c.Kind, "deadline", c.Deadline)
			continue
		}
		h.mu.Lock()
		h.pins++ // what the command starts keeps the lease
		h.mu.Unlock()
		if c.Kind == "submit" && c.Prompt != nil && c.Prompt.InLine {
			// A prompt in line waits for its turn: it must not hold up the commands after
			// it, and it joins the line after the ones taken before it.
			h.inLine(c)
			continue
		}
		r := h.execute(c)
		if r.slot != nil {
			// An interrupting prompt: its reply names the turn it becomes once the
			// interrupted turn has ended, without holding up the commands after it.
			h.e.leaseWG.Add(1)
			go func() {
				defer h.e.leaseWG.Done()
				h.reply(c, h.queuedTurn(c, r))
				h.unpin()
			}()
			continue
		}
		h.reply(c, r)
		h.unpin()
	}
}

// queuedTurn waits until the queue slot of an interrupting prompt becomes a turn (the
// interrupted turn has ended) or is dropped, and adds that to the reply. Past half the
// sender's wait, or once the lease is given up, the reply goes as it is.
func (h *heldLease) queuedTurn(c inboxCommand, r inboxReply) inboxReply {
	wait := h.e.cfg.Leases.InboxTimeout / 2
	if !c.Deadline.IsZero() {
		wait = time.Until(c.Deadline) / 2
	}
	limit := time.NewTimer(wait)
	defer limit.Stop()
	s, err := h.e.Open(h.ctx, h.sid)
	if err != nil {
		return r
	}
	for {
		s.mu.Lock()
		q, cur := r.slot, s.turn
		switch {
		case q.turn != nil:
			r.QueuedTurn = q.turn.id
		case s.queued != q || cur == nil:
			r.QueueDropped = true
		}
		s.mu.Unlock()
		if r.QueuedTurn != "" || r.QueueDropped {
			return r
		}
		select {
		case <-cur.done:
		case <-limit.C:
			return r
		case <-h.stop:
			return r
		case <-h.ctx.Done():
			return r
		}
	}
}

// inLine hands a prompt in line to the lease's line goroutine, which submits them one after
// the other in the order taken: each joins the session's line once the one before it has
// its turn (Submit of a prompt in line returns then), so none overtakes another.
func (h *heldLease) inLine(c inboxCommand) {
	h.mu.Lock()
	h.lineq = append(h.lineq, c)
	if h.lineRunning {
		h.mu.Unlock()
		return
	}
	h.lineRunning = true
	h.mu.Unlock()
	h.e.leaseWG.Add(1)
	go func() {
		defer h.e.leaseWG.Done()
		for {
			h.mu.Lock()
			if len(h.lineq) == 0 {
				h.lineRunning = false
				h.mu.Unlock()
				return
			}
			c := h.lineq[0]
			h.lineq = h.lineq[1:]
			h.mu.Unlock()
			h.reply(c, h.execute(c))
			h.unpin()
		}
	}()
}

// take claims a command: exactly one of the holder and the sender (withdrawing) wins.
func (h *heldLease) take(key string, raw []byte) bool {
	h.mu.Lock()
	gen := h.lease.Generation
	h.mu.Unlock()
	if cas, ok := h.e.cfg.Store.(casKV); ok {
		ok, err := cas.CompareAndSwapKV(store.WithFence(h.ctx, h.sid, gen), key, raw, nil)
		if err != nil {
			h.noteErr(err)
			return false
		}
		return ok
	}
	if err := h.view.DeleteKV(h.ctx, key); err != nil {
		h.noteErr(err)
		return false
	}
	return true
}

func (h *heldLease) noteErr(err error) {
	if errors.Is(err, store.ErrFenced) {
		h.lose(err)
		return
	}
	if h.ctx.Err() == nil {
		h.e.log.Warn("session inbox: taking a command failed", "session_id", h.sid, "err", err)
	}
}

// reply writes a command's reply. It is the sender's record, not the session's: it is written
// whatever became of the lease meanwhile, so a sender waits no longer than needed.
func (h *heldLease) reply(c inboxCommand, r inboxReply) {
	r.Deadline = c.Deadline
	b, _ := json.Marshal(r)
	ctx, cancel := context.WithTimeout(context.Background(), h.e.cfg.Leases.TTL)
	defer cancel()
	if err := h.e.cfg.Store.PutKV(ctx, c.Reply, b); err != nil {
		h.e.log.Warn("session inbox: writing a reply failed", "session_id", h.sid, "err", err)
	}
}

// execute runs a command on the live session, exactly as its local method would.
func (h *heldLease) execute(c inboxCommand) inboxReply {
	ctx := h.ctx
	s, err := h.e.Open(ctx, h.sid)
	if err != nil {
		return replyErr(err)
	}
	switch c.Kind {
	case "submit":
		if c.Prompt == nil {
			return replyErr(ErrEmptyPrompt)
		}
		adm, tk, err := s.admit(ctx, *c.Prompt)
		if err != nil {
			return replyErr(err)
		}
		r := inboxReply{Admission: &adm, Queued: adm.QueuedCount, Behind: tk.behind}
		if adm.Interrupted && tk.q != nil {
			r.slot = tk.q
		}
		return r
	case "steer":
		r, err := s.steer(c.Text, c.Hold)
		if err != nil {
			return replyErr(err)
		}
		return inboxReply{Steer: &r}
	case "interrupt":
		return inboxReply{Interrupted: s.interrupt(nil, c.Text)}
	case "answer":
		if err := s.answer(c.Req, c.Answer); err != nil {
			return replyErr(err)
		}
		return inboxReply{}
	case "withdraw":
		if err := s.withdrawRequest(c.Req, c.Text); err != nil {
			return replyErr(err)
		}
		return inboxReply{}
	case "snapshot":
		snap := s.Snapshot()
		return inboxReply{Snapshot: &snap}
	}
	return replyErr(fmt.Errorf("unknown inbox command %q", c.Kind))
}

// inboxSeq makes command ids unique within the process; ids sort by sending time.
var inboxSeq = newID("")[:8]

// send posts a command for the session's lease holder and waits for its reply. With no live
// holder the lease is taken here and this engine's inbox goroutine serves the command.
func (s *Session) send(ctx context.Context, c inboxCommand) (inboxReply, error) {
	e := s.e
	st := e.cfg.Store
	now := time.Now()
	c.ID = fmt.Sprintf("%016x-%s-%s", now.UnixNano(), inboxSeq, newID("")[:8])
	c.Deadline = now.Add(e.cfg.Leases.InboxTimeout).UTC()
	key := inboxPrefix(s.id) + c.ID
	c.Reply = replyPrefix(s.id) + c.ID
	sub, err := st.Watch(ctx, store.Interest{Sessions: []string{s.id}, KeyPrefixes: []string{c.Reply}})
	if err != nil {
		return inboxReply{}, err
	}
	defer sub.Close()
	raw, err := json.Marshal(c)
	if err != nil {
		return inboxReply{}, err
	}
	if err := st.PutKV(ctx, key, raw); err != nil {
		return inboxReply{}, err
	}
	timeout := time.NewTimer(e.cfg.Leases.InboxTimeout)
	defer timeout.Stop()
	expiry := time.NewTimer(time.Hour)
	defer expiry.Stop()
	for {
		b, err := st.GetKV(ctx, c.Reply)
		if err == nil {
			_ = st.DeleteKV(context.WithoutCancel(ctx), c.Reply)
			var r inboxReply
			if err := json.Unmarshal(b, &r); err != nil {
				return inboxReply{}, fmt.Errorf("session inbox: unreadable reply: %w", err)
			}
			return r, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return s.withdraw(key, raw, c.Reply, err)
		}
		// Nobody holds the session (its holder released it or died): take it, and the
		// command is served here.
		h, err := s.hold(ctx)
		var elsewhere *heldElsewhere
		switch {
		case err == nil:
			h.unpin()
		case errors.As(err, &elsewhere):
			// A holder that dies sends no hint: look again when its lease expires.
			if l, ok := e.currentLease(ctx, s.id); ok {
				expiry.Reset(time.Until(l.Expires) + 5*time.Millisecond)
			} else {
				expiry.Reset(0)
			}
		default:
			return s.withdraw(key, raw, c.Reply, err)
		}
		select {
		case <-sub.C():
			sub.Take()
		case <-expiry.C:
		case <-timeout.C:
			return s.withdraw(key, raw, c.Reply, fmt.Errorf("%w (no reply within %s)", ErrOwnerUnavailable, e.cfg.Leases.InboxTimeout))
		case <-ctx.Done():
			return s.withdraw(key, raw, c.Reply, ctx.Err())
		}
	}
}

// withdraw takes back a command that got no reply. When the holder took it first, a reply
// that came meanwhile is returned; otherwise the command did not run and cause is returned.
func (s *Session) withdraw(key string, raw []byte, reply string, cause error) (inboxReply, error) {
	st := s.e.cfg.Store
	ctx, cancel := context.WithTimeout(context.Background(), s.e.cfg.Leases.TTL)
	defer cancel()
	if cas, ok := st.(casKV); ok {
		if won, err := cas.CompareAndSwapKV(ctx, key, raw, nil); err == nil && !won {
			// Taken by the holder: its reply is on its way (or it died executing it).
			if b, err := st.GetKV(ctx, reply); err == nil {
				_ = st.DeleteKV(ctx, reply)
				var r inboxReply
				if json.Unmarshal(b, &r) == nil {
					return r, nil
				}
			}
			return inboxReply{}, fmt.Errorf("%w; the command was taken, its effect is unknown", cause)
		}
		return inboxReply{}, cause
	}
	_ = st.DeleteKV(ctx, key)
	return inboxReply{}, cause
}

// remoteAdmit sends a prompt to the process holding the session's lease.
// The ticket names the turn an interrupting prompt became there, for Run to follow.
func (s *Session) remoteAdmit(ctx context.Context, p Prompt) (Admission, ticket, error) {
	r, err := s.send(ctx, inboxCommand{Kind: "submit", Prompt: &p})
	if err != nil {
		return Admission{}, ticket{}, err
	}
	if err := r.err(); err != nil {
		return Admission{}, ticket{}, err
	}
	if r.Admission == nil {
		return Admission{}, ticket{}, errors.New("session inbox: reply without an admission")
	}
	adm := *r.Admission
	adm.QueuedCount = r.Queued
	return adm, ticket{remote: r.QueuedTurn, dropped: r.QueueDropped, behind: r.Behind}, nil
}

// remoteCall sends a steer, interrupt, answer or withdraw to the lease holder, bounded by the inbox
// timeout (these methods take no context).
func (s *Session) remoteCall(c inboxCommand) (inboxReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.e.cfg.Leases.InboxTimeout+time.Second)
	defer cancel()
	r, err := s.send(ctx, c)
	if err != nil {
		return r, err
	}
	return r, r.err()
}
