package engine

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/tool"
)

// SessionStatus is idle, working (a turn runs), waiting (a turn waits on a request) or closed.
type SessionStatus string

// Session statuses.
const (
	StatusIdle    SessionStatus = "idle"
	StatusWorking SessionStatus = "working"
	StatusWaiting SessionStatus = "waiting"
	StatusClosed  SessionStatus = "closed"
)

// keptTurns is how many finished turns a session remembers for Wait.
const keptTurns = 16

// Session is a live session. All methods are safe for concurrent use.
//
// Lock order: Engine.mu, then Session.mu, then journal.mu (append never calls back into the
// session, and a session never takes the engine lock while holding its own).
type Session struct {
	e  *Engine
	id string
	j  *journal

	mu       sync.Mutex
	rec      store.Session
	status   SessionStatus
	turn     *turnState            // the in-flight turn, nil when idle
	failed   *Inflight             // the last turn, when it failed; cleared when a turn starts
	turns    map[string]*turnState // recent turns by id (for Wait)
	order    []string              // turn ids, oldest first
	queued   *queuedPrompt         // the one-slot merged follow-up queue
	line     []*inLine             // prompts admitted in line (Prompt.InLine), first come first
	steers   []steerItem           // pending steer (concatenated with \n on delivery)
	requests map[string]*pendingRequest
	approved map[string]bool // pattern keys approved for this session
	children int             // running delegated children
	closed   bool
	released bool     // dropped from the engine by ReleaseIdle; closed is set too
	stored   bool     // false for a lazy session until its first prompt
	depth    int      // delegation depth (0 = top level)
	parent   *Session // delegating session, for sub-agents

	procs     tool.Processes
	toolState tool.State                // tools' scratch space (the todo list)
	restored  map[string]bool           // Restorer tools whose state was looked up in the transcript
	attached  attachments               // what a surface lent this session (attach.go)
	meter     contextMeter              // context accounting (context.go), guarded by mu
	held      atomic.Pointer[heldLease] // the session's lease while this engine holds it (lease.go)
	rows      rowCache                  // the active transcript as last read (rowcache.go)
}

type queuedPrompt struct {
	text   string
	origin string
	count  int               // prompts merged into text
	turn   *turnState        // the turn the slot was drained into (guarded by Session.mu)
	parent trace.SpanContext // the first queued prompt's request span: the turn's parent
}

type steerItem struct {
	id   string
	text string
}

func newSession(e *Engine, rec store.Session) *Session {
	s := &Session{
		e: e, id: rec.ID, j: newStoredJournal(rec.ID, e.cfg.OnEvent, e.cfg.Store), rec: rec, status: StatusIdle, stored: true,
		turns: map[string]*turnState{}, requests: map[string]*pendingRequest{}, approved: map[string]bool{},
	}
	s.j.warn, s.j.debug = e.log.Warn, e.log.Debug
	// Background processes stream their output to the session's clients as it is written.
	s.procs.OnOutput = func(id, chunk string) {
		s.j.append(Event{Type: EvTerminalOutput, Data: TerminalOutput{ProcessID: id, Chunk: chunk}})
	}
	s.procs.OnExit = func(id string, code int) {
		s.j.append(Event{Type: EvTerminalClose, Data: TerminalOutput{ProcessID: id, ExitCode: &code}})
	}
	return s
}

// Released reports whether the engine released this session object while it was idle
// (Engine.ReleaseIdle) and it was not made live again yet: Submit, Run and Engine.Open make
// this same object live again.
func (s *Session) Released() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.released
}

// closedErrLocked is the error of work refused because the session is closed.
func (s *Session) closedErrLocked() error {
	if s.released {
		return ErrSessionReleased
	}
	return ErrSessionClosed
}

// Root is the top-level session a delegated sub-agent works for (s itself for a top-level
// session): the one whose clients answer its requests.
func (s *Session) Root() *Session { return s.requestHost() }

// ID is the durable session id.
func (s *Session) ID() string { return s.id }

// Record returns the cached stored record.
func (s *Session) Record() store.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec
}

// Stored reports whether the session has a row in the store (a lazy session gets one with
// its first prompt).
func (s *Session) Stored() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stored
}

// ensureStored writes a lazy session's record. A title that became taken meanwhile is dropped
// (with an error event) rather than failing the prompt.
func (s *Session) ensureStored(ctx context.Context) error {
	s.mu.Lock()
	if s.stored {
		s.mu.Unlock()
		return nil
	}
	rec := s.rec
	s.mu.Unlock()
	stored, err := s.e.createRecord(ctx, rec)
	if errors.Is(err, store.ErrTitleTaken) {
		s.j.append(Event{Type: EvError, Data: ErrorInfo{Message: "title " + strconv.Quote(rec.Title) + " was taken meanwhile; session saved untitled", Code: "title"}})
		rec.Title = ""
		stored, err = s.e.cfg.Store.CreateSession(ctx, rec)
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	stored.Model, stored.Title = s.rec.Model, rec.Title // changes made while storing
	// An approval mode chosen while storing went to the in-memory record only (the session
	// was not stored yet): keep it, and write it, or it would be lost.
	mode := s.rec.Meta[metaMode]
	modeChanged := mode != rec.Meta[metaMode]
	if modeChanged {
		stored.Meta = maps.Clone(stored.Meta)
		if stored.Meta == nil {
			stored.Meta = map[string]string{}
		}
		stored.Meta[metaMode] = mode
	}
	s.rec, s.stored = stored, true
	s.mu.Unlock()
	if modeChanged {
		if _, err := s.e.cfg.Store.UpdateSession(ctx, s.id, 0, func(r *store.Session) error {
			if r.Meta == nil {
				r.Meta = map[string]string{}
			}
			r.Meta[metaMode] = mode
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// Status returns the session status.
func (s *Session) Status() SessionStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

func (s *Session) setStatusLocked(st SessionStatus) {
	if s.status == st {
		return
	}
	s.status = st
	s.j.append(Event{Type: EvStatus, Data: StatusInfo{Status: st}})
}

// Info is the payload of session.info.
type Info struct {
	SessionID string        `json:"session_id"`
	Title     string        `json:"title,omitempty"`
	Model     string        `json:"model"`
	Cwd       string        `json:"cwd"`
	ParentID  string        `json:"parent_id,omitempty"`
	Status    SessionStatus `json:"status"`
	Usage     store.Usage   `json:"usage"`
}

// Info returns the session.info payload.
func (s *Session) Info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Info{SessionID: s.id, Title: s.rec.Title, Model: s.rec.Model, Cwd: s.rec.Cwd, ParentID: s.rec.ParentID, Status: s.status, Usage: s.rec.Usage}
}

func (s *Session) reload(ctx context.Context) error {
	rec, err := s.e.cfg.Store.GetSession(ctx, s.id)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.rec = rec
	s.mu.Unlock()
	return nil
}

// Subscribe attaches a subscriber that reads events after seq since. While it is attached the
// engine does not release the session (Engine.ReleaseIdle); on a released session the
// subscription ends at once (ErrJournalClosed, or ErrLagged for a cursor behind the last seq):
// check Released after subscribing.
func (s *Session) Subscribe(since uint64) *Subscription { return s.j.subscribe(since) }

// SubscribeStored is Subscribe for events the store holds: the lease holder publishes its
// events as it appends them, before they are stored, and a reader that must see exactly what
// every other process will read back (a run's event log) waits for them to be stored. In a
// process that is not the session's writer, and for a session without a stored log, it is
// Subscribe.
func (s *Session) SubscribeStored(since uint64) *Subscription { return s.j.subscribeTo(since, true) }

// Events replays events after since and then follows live ones, until ctx ends, the session
// closes, or the reader lags (yielding ErrLagged).
func (s *Session) Events(ctx context.Context, since uint64) iter.Seq2[Event, error] {
	return events(ctx, s.j, since)
}

// EventsSince returns the retained events after since without waiting; ok is false when since
// is older than the journal window.
func (s *Session) EventsSince(since uint64) ([]Event, bool) { return s.j.eventsSince(since) }

// StoredEvents reads the session's event log after since from the store itself, a window's
// worth at most per call (none: the stored log ends at since): what every process sharing the
// store reads alike, whatever this process's journal holds or is still catching up with. An
// error says the store could not be read; for a session whose events are not stored (a store
// without a durable log) it reads the journal, and the error says since is older than it keeps.
func (s *Session) StoredEvents(ctx context.Context, since uint64) ([]Event, error) {
	if st := s.e.cfg.Store; st != nil && !s.e.cfg.Leases.Off {
		// Whatever state this process's journal is in (following, writing, or not yet
		// mirroring the log), the stored log is the session's truth.
		return s.j.fromStore(ctx, st, since, 0)
	}
	// Without leases this process's journal is the log's one writer.
	evs, ok := s.j.eventsSince(since)
	if !ok {
		return evs, errOlderThanJournal
	}
	return evs, nil
}

// errOlderThanJournal is StoredEvents' error for a cursor older than the journal keeps, with
// no stored log to read it from.
var errOlderThanJournal = errors.New("session events: older than the journal keeps, and not stored")

// EventsStored waits until every event this process has published for the session is in the
// store: what a surface reports as ended (a run's record) is then never ahead of the log every
// other process reads. Nothing to wait for without a stored log; an error says the events
// could not be stored within ctx (or this process no longer writes the log).
func (s *Session) EventsStored(ctx context.Context) error { return s.j.stored(ctx, s.j.lastSeq()) }

// Generation identifies the session's journal. A session made live again (after a close or a
// restart) starts a new journal whose seq restarts at 1: a client holding a cursor from another
// generation must refetch instead of replaying.
func (s *Session) Generation() string { return s.j.generation() }

// LastSeq is the seq of the newest event. It is read under the session's lock, so events the
// engine appends together under it (a turn's message.complete, the idle status and the
// session.info that follow) are seen all or none: a surface that waits for its clients to
// have every event up to LastSeq before answering a request (the gateway) never answers
// between them.
func (s *Session) LastSeq() uint64 {
	s.j.sync(context.Background()) // its store read, if any, is not made under the lock
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.j.lastSeqNoSync()
}

// Emit appends a surface-originated event (e.g. a gateway notice) to the journal; its payload is
// a [SurfaceEvent].
func (s *Session) Emit(t EventType, payload SurfaceEvent) uint64 {
	ev := Event{Type: t}
	if payload != nil {
		ev.Data = payload
	}
	return s.j.append(ev)
}

// Prompt is a user message submitted to a session.
type Prompt struct {
	Text   string
	Origin string // submitting surface
	// Queued marks a client-side queue drain: the busy path holds it, never steers it.
	Queued   bool
	Truncate *Truncate // rewind / edit / regenerate
	// Images are image files sent with the prompt (stored as the row's attachments).
	Images []string
	// Hidden stores the user row typed display_kind "hidden": the model sees it, no client
	// renders it as a bubble (gateway-originated scaffolding).
	Hidden bool
	// FollowQueue (Run only): after the followed turn completes (not cancelled), follow the
	// turn the queue starts next with the prompts that arrived meanwhile, and so on.
	FollowQueue bool
	// InLine admits the prompt first come, first served: while a turn runs, Submit waits in
	// the session's line (after the busy policy's follow-up, which is the conversation's next
	// turn) and returns once the prompt's own turn has started, or with ctx's error. The busy
	// policy does not see it, an interrupt does not drop it, and it is never merged.
	InLine bool
	// IfIdle admits the prompt only when no turn runs, here or in the process holding the
	// session's lease: otherwise Submit and Run fail with ErrBusy and nothing is stored,
	// queued or interrupted (the busy policy does not see it). For surfaces that answer one
	// prompt with one turn of its own.
	IfIdle bool
	// Claim is a durable admission's start (a run of the runs ledger): it is called once the
	// prompt's turn is claimed — the session is the prompt's, no other turn can start — and
	// before its user row is written, with the turn's id. An error gives the turn back
	// unstarted (the next prompt in line goes on) and is what Submit or Run returns. A prompt
	// the engine answers without a turn of its own (a /model command, or one forwarded to the
	// process holding the session's lease) is claimed before it is handed on. A prompt with
	// a Claim is admitted in line (InLine), whatever InLine says.
	Claim func(ctx context.Context, turnID string) error `json:"-"`
}

// Truncate asks a submit to cut the transcript before a user turn first.
type Truncate struct {
	BeforeRowID       uint64
	BeforeUserOrdinal *int // 0-based index among the session's user turns
	Confirm           bool
	ConfirmEmpty      bool
}

// Admission statuses.
const (
	AdmitStarted  = "started"
	AdmitQueued   = "queued"
	AdmitSteered  = "steered"
	AdmitRejected = "rejected"
	AdmitCommand  = "command" // a slash command handled without a turn
)

// Admission reports what Submit did.
type Admission struct {
	Status      string   `json:"status"`
	TurnID      string   `json:"turn_id,omitempty"`
	UserRowID   uint64   `json:"user_row_id,omitempty"`
	SteerID     string   `json:"steer_id,omitempty"`
	Interrupted bool     `json:"interrupted,omitempty"` // the busy policy interrupted the running turn
	Survivors   []uint64 `json:"survivor_user_row_ids,omitempty"`
	Message     string   `json:"message,omitempty"`
	// QueuedCount is how many prompts wait in the follow-up queue (merged into one turn),
	// this one included, when Status is queued.
	QueuedCount int `json:"-"`
}

// Submit sends a prompt. When a turn is running the busy-input policy decides (interrupt,
// queue, steer or reject); a truncating submit is never absorbed by it (ErrBusy). Submit
// returns once the prompt is durable (or queued/steered); the turn reports through events.
// Session.Run is Submit that also follows the turn it admitted.
func (s *Session) Submit(ctx context.Context, p Prompt) (Admission, error) {
	adm, _, err := s.admit(ctx, p)
	return adm, err
}

// ticket is what admit hands Run besides the Admission: the turn it started or the queue
// slot the prompt went into.
type ticket struct {
	t *turnState
	q *queuedPrompt
	// remote is the turn the lease holder (another process) started for a prompt it queued
	// behind the turn it interrupted; dropped says the holder dropped that queued prompt.
	remote  string
	dropped bool
	// behind is the turn a queued prompt waits behind: its follow-up is the prompt's turn
	// (what another process's Run follows through the event log).
	behind string
}

// admit is Submit, also returning the admitted turn or queue slot.
func (s *Session) admit(ctx context.Context, p Prompt) (Admission, ticket, error) {
	text := strings.TrimSpace(p.Text)
	if text == "" {
		return Admission{}, ticket{}, ErrEmptyPrompt
	}
	p.InLine = p.InLine || p.Claim != nil
	if err := s.revive(ctx); err != nil {
		return Admission{}, ticket{}, err
	}
	if p.Truncate == nil {
		if name, ok := strings.CutPrefix(text, "/model"); ok && (name == "" || name[0] == ' ') {
			if err := p.claim(ctx, ""); err != nil {
				return Admission{}, ticket{}, err
			}
			adm, err := s.modelCommand(ctx, strings.TrimSpace(name))
			return adm, ticket{}, err
		}
	}
	// The session's lease first: another process may be running it, and then that process
	// decides, as this one would (inbox.go).
	h, err := s.hold(ctx)
	if elsewhere := (*heldElsewhere)(nil); errors.As(err, &elsewhere) {
		if err := p.claim(ctx, ""); err != nil {
			return Admission{}, ticket{}, err
		}
		return s.remoteAdmit(ctx, p)
	}
	if err != nil {
		return Admission{}, ticket{}, err
	}
	defer h.unpin() // the turn or the queued prompt holds the lease from here on
	if err := s.lockLive(ctx); err != nil {
		return Admission{}, ticket{}, err
	}
	if s.closed {
		err := s.closedErrLocked()
		s.mu.Unlock()
		return Admission{}, ticket{}, err
	}
	var t *turnState
	switch {
	case s.turn != nil && (p.Truncate != nil || p.IfIdle):
		s.mu.Unlock()
		return Admission{}, ticket{}, ErrBusy
	case s.turn != nil && p.InLine:
		var err error
		if t, err = s.waitInLine(ctx, text, p.Origin); err != nil { // unlocks
			return Admission{}, ticket{}, err
		}
	case s.turn != nil:
		return s.busyLocked(ctx, p, text) // unlocks
	}
	if t == nil && p.Truncate != nil {
		// Refuse a bad rewind before claiming the turn: a refusal leaves no trace.
		s.mu.Unlock()
		if _, err := s.checkRewind(ctx, *p.Truncate); err != nil {
			return Admission{}, ticket{}, err
		}
		s.mu.Lock()
		if s.closed {
			err := s.closedErrLocked()
			s.mu.Unlock()
			return Admission{}, ticket{}, err
		}
		if s.turn != nil {
			s.mu.Unlock()
			return Admission{}, ticket{}, ErrBusy
		}
	}
	if t == nil {
		t = s.newTurnLocked(text, p.Origin, trace.SpanContextFromContext(ctx))
		s.mu.Unlock()
	}
	cctx := ctx
	if h != nil {
		// The claim records the lease generation the turn runs under: this holder's, also
		// when the stored lease has just expired and is being renewed.
		h.mu.Lock()
		cctx = store.WithFence(ctx, s.id, h.lease.Generation)
		h.mu.Unlock()
	}
	if err := p.claim(cctx, t.id); err != nil {
		s.giveBackTurn(t, err)
		return Admission{}, ticket{}, err
	}

	if err := s.ensureStored(ctx); err != nil {
		s.abandonTurn(t)
		return Admission{}, ticket{}, err
	}
	var adm Admission
	userRow := store.Row{Role: "user", Content: text, TurnID: t.id, Time: time.Now().UTC(), Attachments: p.Images}
	if p.Hidden {
		userRow.DisplayKind = "hidden"
	}
	if p.Truncate != nil {
		adm, err = s.rewind(ctx, *p.Truncate, userRow)
	} else {
		var rows []store.Row
		rows, err = s.wst().AppendRows(ctx, s.id, store.Fence{}, []store.Row{userRow})
		if err == nil {
			adm.UserRowID = rows[0].ID
		}
	}
	if err != nil {
		s.noteFenced(err)
		s.abandonTurn(t)
		return Admission{}, ticket{}, err
	}
	adm.Status, adm.TurnID = AdmitStarted, t.id
	t.userRowID = adm.UserRowID
	s.startTurn(t)
	return adm, ticket{t: t}, nil
}

// claim calls the prompt's Claim, if any.
func (p *Prompt) claim(ctx context.Context, turnID string) error {
	if p.Claim == nil {
		return nil
	}
	return p.Claim(ctx, turnID)
}

// busyLocked applies the busy-input policy. Called with s.mu held; returns with it released.
func (s *Session) busyLocked(ctx context.Context, p Prompt, text string) (Admission, ticket, error) {
	in := policy.BusyInput{SessionID: s.id, Surface: p.Origin, Text: text, Origin: p.Origin, Status: string(s.status), Iteration: s.turn.iteration}
	if s.queued != nil {
		in.Queued = s.queued.text
	}
	s.mu.Unlock()
	d := s.busyDecision(ctx, in)
	mode := d.Mode
	if p.Queued && mode == policy.Steer {
		mode = policy.Queue
	}
	if mode == policy.Steer {
		if r, err := s.Steer(text); err == nil {
			return Admission{Status: AdmitSteered, SteerID: r.ID}, ticket{}, nil
		}
		mode = policy.Interrupt // steer refused (turn just ended or empty): fall through
	}
	switch mode {
	case policy.Reject:
		return Admission{Status: AdmitRejected, Message: d.Reason}, ticket{}, nil
	case policy.Queue, policy.Interrupt:
		s.mu.Lock()
		if s.turn == nil { // the turn ended while we asked the policy: start normally
			s.mu.Unlock()
			return s.admit(ctx, Prompt{Text: text, Origin: p.Origin})
		}
		s.enqueueLocked(text, p.Origin)
		if !s.queued.parent.IsValid() {
			s.queued.parent = trace.SpanContextFromContext(ctx)
		}
		cur, q := s.turn, s.queued
		n := q.count
		s.mu.Unlock()
		adm := Admission{Status: AdmitQueued, QueuedCount: n}
		if mode == policy.Interrupt {
			cur.interrupt(errInterruptUser)
			adm.Interrupted = true
		}
		return adm, ticket{q: q, behind: cur.id}, nil
	}
	return Admission{}, ticket{}, fmt.Errorf("busy policy returned unknown mode %q", mode)
}

func (s *Session) busyDecision(ctx context.Context, in policy.BusyInput) policy.BusyDecision {
	pctx, span := s.e.policySpan(ctx, "busy_input", s.id, s.e.cfg.Policy.Busy)
	hctx, cancel := context.WithTimeout(pctx, s.e.cfg.HookTimeout)
	defer cancel()
	d, err := s.e.cfg.Policy.Busy.BusyInput(hctx, in)
	if err == nil {
		switch d.Mode {
		case policy.Interrupt, policy.Queue, policy.Steer, policy.Reject:
		default:
			err = fmt.Errorf("unknown busy-input mode %q", d.Mode)
		}
	}
	defer func() { endPolicySpan(span, d.Mode, err) }()
	if err != nil {
		var ferr error
		if d, ferr = s.e.cfg.Fallback.Busy.BusyInput(ctx, in); ferr != nil || policy.NormalizeBusyMode(d.Mode) != d.Mode {
			d, _ = policy.Defaults{}.BusyInput(ctx, in)
		}
		s.j.append(Event{Type: EvPolicyDecision, Data: PolicyDecision{Hook: "busy_input", Decision: d.Mode, Error: err.Error()}})
		return d
	}
	s.j.append(Event{Type: EvPolicyDecision, Data: PolicyDecision{Hook: "busy_input", Decision: d.Mode, Reason: d.Reason}})
	return d
}

// enqueueLocked merges text into the one-slot follow-up queue.
func (s *Session) enqueueLocked(text, origin string) {
	if s.queued == nil {
		s.queued = &queuedPrompt{text: text, origin: origin, count: 1}
	} else {
		s.queued.text += "\n\n" + text
		s.queued.origin = origin
		s.queued.count++
	}
	s.j.append(Event{Type: EvQueueUpdated, Data: QueueInfo{Queued: s.queued.text}})
}

// Queued returns the queued follow-up text ("" when the slot is empty).
func (s *Session) Queued() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queued == nil {
		return ""
	}
	return s.queued.text
}

// SteerReceipt identifies an accepted steer; steer.delivered events name it when it reaches
// the model, or it comes back in the turn outcome's pending_steer.
type SteerReceipt struct {
	ID     string `json:"steer_id"`
	TurnID string `json:"turn_id"`
}

// Steer queues mid-turn guidance for the running turn, delivered at its next tool boundary
// (or returned as the outcome's pending_steer). It fails with ErrNotRunning when idle.
func (s *Session) Steer(text string) (SteerReceipt, error) { return s.steerAnywhere(text, false) }

// SteerOrHold is Steer that also accepts guidance while idle: it waits for the next turn's
// first tool boundary, or comes back as that turn's pending_steer.
func (s *Session) SteerOrHold(text string) (SteerReceipt, error) { return s.steerAnywhere(text, true) }

// steerAnywhere is steer, sent to the process holding the session's lease when that is
// another one.
func (s *Session) steerAnywhere(text string, hold bool) (SteerReceipt, error) {
	if strings.TrimSpace(text) != "" && !s.runningHere() && s.remoteOwner(context.Background()) {
		r, err := s.remoteCall(inboxCommand{Kind: "steer", Text: text, Hold: hold})
		if err != nil {
			return SteerReceipt{}, err
		}
		if r.Steer == nil {
			return SteerReceipt{}, errors.New("session inbox: reply without a steer receipt")
		}
		return *r.Steer, nil
	}
	return s.steer(text, hold)
}

// runningHere reports whether a turn of the session runs in this engine.
func (s *Session) runningHere() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turn != nil && !s.turn.finishing
}

func (s *Session) steer(text string, hold bool) (SteerReceipt, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return SteerReceipt{}, ErrEmptySteer
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return SteerReceipt{}, s.closedErrLocked()
	}
	running := s.turn != nil && !s.turn.finishing
	if !running && !hold {
		return SteerReceipt{}, ErrNotRunning
	}
	it := steerItem{id: newID("steer_"), text: text}
	s.steers = append(s.steers, it)
	r := SteerReceipt{ID: it.id}
	if running {
		r.TurnID = s.turn.id
	}
	return r, nil
}

// PendingSteer returns the steer text not yet delivered.
func (s *Session) PendingSteer() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return joinSteers(s.steers)
}

func joinSteers(items []steerItem) string {
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = it.text
	}
	return strings.Join(parts, "\n")
}

var (
	errInterruptUser     = errors.New("interrupted_by_user")
	errInterruptShutdown = errors.New("interrupted_by_system(shutdown)")
)

// Interrupt stops the running turn: in-flight tools are cancelled, open requests withdrawn,
// the queued follow-up dropped; a steer not yet delivered comes back as the interrupted
// outcome's PendingSteer (with no turn running, a held steer is dropped). It reports whether a
// turn was running.
// reason "" or "user" is a user interrupt; anything else is a system issuer. When another
// process runs the session's turn it is asked to interrupt it (except for "shutdown" and
// "close", which stop this process's use of the session only).
func (s *Session) Interrupt(reason string) bool {
	if s.interrupt(nil, reason) {
		return true
	}
	if reason == "shutdown" || reason == "close" || !s.remoteOwner(context.Background()) {
		return false
	}
	r, err := s.remoteCall(inboxCommand{Kind: "interrupt", Text: reason})
	if err != nil {
		s.e.log.Warn("interrupting the session in the process running it failed", "session_id", s.id, "err", err)
		return false
	}
	return r.Interrupted
}

// interrupt is Interrupt; with only non-nil, it acts only while that turn is the one running
// (a follower stopping its own turn must not stop the next one).
func (s *Session) interrupt(only *turnState, reason string) bool {
	cause := errInterruptUser
	switch reason {
	case "", "user":
	case "shutdown":
		cause = errInterruptShutdown
	default:
		cause = fmt.Errorf("interrupted_by_system(%s)", reason)
	}
	s.mu.Lock()
	t := s.turn
	if only != nil && t != only {
		s.mu.Unlock()
		return false
	}
	if cause == errInterruptShutdown {
		s.failLineLocked(ErrSessionClosed) // nothing starts after a shutdown interrupt
	}
	if t == nil {
		s.steers = nil // held while idle; a running turn's finish hands them back as pending
	}
	hadQueue := s.queued != nil
	s.queued = nil
	s.mu.Unlock()
	if hadQueue {
		s.j.append(Event{Type: EvQueueUpdated, Data: QueueInfo{}})
	}
	if t == nil {
		return false
	}
	t.interrupt(cause)
	return true
}

// Wait blocks until the turn ends and returns its outcome.
func (s *Session) Wait(ctx context.Context, turnID string) (Outcome, error) {
	s.mu.Lock()
	t, ok := s.turns[turnID]
	s.mu.Unlock()
	if !ok {
		return Outcome{}, fmt.Errorf("%w: %q", ErrUnknownTurn, turnID)
	}
	select {
	case <-t.done:
		return t.outcome, nil
	case <-ctx.Done():
		return Outcome{}, ctx.Err()
	}
}

// WaitIdle blocks until no turn runs and the queue is drained.
func (s *Session) WaitIdle(ctx context.Context) error {
	for {
		s.mu.Lock()
		t := s.turn
		s.mu.Unlock()
		if t == nil {
			return nil
		}
		select {
		case <-t.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *Session) modelCommand(ctx context.Context, name string) (Admission, error) {
	if name == "" {
		return Admission{Status: AdmitCommand, Message: "model: " + s.Record().Model}, nil
	}
	m, err := s.SetModel(ctx, name)
	if err != nil {
		return Admission{}, err
	}
	return Admission{Status: AdmitCommand, Message: "model switched to " + m}, nil
}

// SetModel switches the session's model; it applies from the next model call.
func (s *Session) SetModel(ctx context.Context, name string) (string, error) {
	m, _, err := s.e.ResolveModel(name)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	if !s.stored {
		s.rec.Model = m
		s.mu.Unlock()
		s.j.append(Event{Type: EvModelChanged, Data: s.Info()})
		return m, nil
	}
	s.mu.Unlock()
	rec, err := s.wst().UpdateSession(ctx, s.id, 0, func(r *store.Session) error { r.Model = m; return nil })
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	s.rec = rec
	s.mu.Unlock()
	s.j.append(Event{Type: EvModelChanged, Data: s.Info()})
	return m, nil
}

// SetTitle renames the session (titles are unique: store.ErrTitleTaken).
func (s *Session) SetTitle(ctx context.Context, title string) error {
	title = strings.TrimSpace(title)
	s.mu.Lock()
	if s.closed && !s.released { // closed or deleted: a title written now would hold it for nothing
		err := s.closedErrLocked()
		s.mu.Unlock()
		return err
	}
	s.mu.Unlock()
	if err := s.e.checkTitle(ctx, s.id, title); err != nil { // also covers pending titles of lazy sessions
		return err
	}
	if !s.Stored() {
		s.mu.Lock()
		s.rec.Title = title
		s.mu.Unlock()
		s.j.append(Event{Type: EvSessionTitle, Data: s.Info()})
		return nil
	}
	rec, err := s.wst().UpdateSession(ctx, s.id, 0, func(r *store.Session) error { r.Title = title; return nil })
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.rec = rec
	s.mu.Unlock()
	s.j.append(Event{Type: EvSessionTitle, Data: s.Info()})
	return nil
}

// History returns the session's active transcript rows with their durable row ids.
func (s *Session) History(ctx context.Context, q store.RowQuery) ([]store.Row, error) {
	if !s.Stored() {
		return nil, nil
	}
	return s.e.cfg.Store.Rows(ctx, s.id, q)
}

// Usage returns the stored usage counters.
func (s *Session) Usage() store.Usage { return s.Record().Usage }

// Processes is the session's background-process table.
func (s *Session) Processes() *tool.Processes { return &s.procs }

// Inflight describes the running turn, or the last one when it failed (Snapshot.Failed, with
// Status, Error and ExitReason set). Text is what the model streamed in the current model
// call.
type Inflight struct {
	TurnID      string       `json:"turn_id"`
	Prompt      string       `json:"user"`
	Text        string       `json:"assistant"`
	Iteration   int          `json:"iteration"`
	Started     time.Time    `json:"started"`
	Corrections []Correction `json:"corrections,omitempty"`
	Status      string       `json:"status,omitempty"`
	Error       string       `json:"error,omitempty"`
	ExitReason  string       `json:"turn_exit_reason,omitempty"`
}

// Correction is a steer delivered to the model during a turn: its text, the iteration it was
// delivered in and how many characters of that iteration's text had streamed by then.
type Correction struct {
	Text      string `json:"text"`
	Iteration int    `json:"iteration"`
	Offset    int    `json:"offset"`
}

// Snapshot is everything a surface needs to show a session it just attached to.
type Snapshot struct {
	Info         Info      `json:"info"`
	Inflight     *Inflight `json:"inflight,omitempty"`
	Failed       *Inflight `json:"failed,omitempty"` // the last turn, when it failed and none runs
	OpenRequests []Request `json:"open_requests"`
	Queued       string    `json:"queued,omitempty"`
	InLine       int       `json:"in_line,omitempty"` // prompts waiting in line (Prompt.InLine)
	PendingSteer string    `json:"pending_steer,omitempty"`
	LastSeq      uint64    `json:"last_seq"`
}

// Snapshot returns the session's current state.
func (s *Session) Snapshot() Snapshot {
	info := s.Info()
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := Snapshot{Info: info, OpenRequests: s.openRequestsLocked(), PendingSteer: joinSteers(s.steers), LastSeq: s.j.lastSeq(), InLine: len(s.line)}
	if s.queued != nil {
		snap.Queued = s.queued.text
	}
	if t := s.turn; t != nil {
		t.mu.Lock()
		snap.Inflight = &Inflight{TurnID: t.id, Prompt: t.prompt, Text: t.text.String(), Iteration: t.iteration, Started: t.started,
			Corrections: append([]Correction(nil), t.corrections...)}
		t.mu.Unlock()
	} else if s.failed != nil {
		f := *s.failed
		snap.Failed = &f
	}
	return snap
}

// remoteSnapshotWithin bounds how long LiveSnapshot waits for the lease holder's answer.
const remoteSnapshotWithin = 2 * time.Second

// LiveSnapshot is Snapshot of the session wherever it runs. When another process holds its
// lease (a turn of it may run there), that process's snapshot, asked through the session's
// inbox: its running turn, queue, open requests and status, as a client resuming the session
// through this process must see them. This process's own when the session is not held
// elsewhere, or when the holder does not answer within a short bound (an earlier build's
// holder, one that is dying).
func (s *Session) LiveSnapshot(ctx context.Context) Snapshot {
	if !s.runningHere() && s.remoteOwner(ctx) {
		ctx, cancel := context.WithTimeout(ctx, remoteSnapshotWithin)
		defer cancel()
		r, err := s.send(ctx, inboxCommand{Kind: "snapshot"})
		if err == nil && r.err() == nil && r.Snapshot != nil {
			return *r.Snapshot
		}
		if err == nil {
			err = r.err()
		}
		s.e.log.Debug("session snapshot: the lease holder's could not be had; this process's instead", "session_id", s.id, "err", err)
	}
	return s.Snapshot()
}

// Close interrupts any running turn, waits for it, stops background processes and detaches the
// session. The stored session remains and can be opened again.
func (s *Session) Close(ctx context.Context, reason string) error {
	if s.Released() {
		// A stale object of a released session: close the session itself, live again or not.
		if cur, ok := s.e.Live(s.id); ok && cur != s {
			return cur.Close(ctx, reason)
		}
	}
	s.mu.Lock()
	s.failLineLocked(ErrSessionClosed) // the prompts in line would keep the session busy
	s.mu.Unlock()
	s.Interrupt("close")
	if err := s.WaitIdle(ctx); err != nil {
		return err
	}
	if reason == "" {
		reason = "closed"
	}
	s.shutdown(reason)
	if !s.Stored() {
		return nil
	}
	_, err := s.wst().UpdateSession(ctx, s.id, 0, func(r *store.Session) error {
		r.EndedAt, r.EndReason = time.Now().UTC(), reason
		return nil
	})
	return err
}

func (s *Session) shutdown(reason string) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.status = StatusClosed
	s.mu.Unlock()
	s.procs.StopAll()
	s.e.mu.Lock()
	if s.e.live[s.id] == s {
		delete(s.e.live, s.id)
	}
	s.e.mu.Unlock()
	s.j.append(Event{Type: EvSessionClosed, Data: SessionClosed{Reason: reason}})
	s.j.close()
}
