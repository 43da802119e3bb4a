package runsapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
)

// Run statuses (a run is one agent turn started by POST /v1/runs and followed by polling or
// an event stream; it outlives the request that started it, and its admission outlives the
// process: see admission.go).
const (
	runQueued      = "queued"
	runRunning     = "running"
	runWaiting     = "waiting_for_approval"
	runStopping    = "stopping"
	runUnknown     = "unknown" // restart-unknown: started by a process that died before it settled
	runCompleted   = "completed"
	runFailed      = "failed"
	runCancelled   = "cancelled"
	runInterrupted = "interrupted"
)

// runRetention is how long a finished run stays in memory with its event log; its durable
// record (status and result) stays readable for idempotencyRetention.
const runRetention = time.Hour

// Messages of the interrupted settlements.
const (
	msgShutdown      = "the server stopped before this run settled"
	msgShutdownQueue = "the server stopped before this run started"
	msgRestarted     = "The gateway restarted before this run settled." // the reference's wording
	msgUnknown       = "the server restarted while this run was executing; whether its turn finished is unknown until it is resolved with POST /v1/runs/{run_id}/resolve-unknown"
)

// runEvent is one frame of a run's event log; seq is its SSE id (from 1).
type runEvent struct {
	seq  int
	data []byte
}

// run is the state of one run in this process. Its log is written by one goroutine at a time:
// the worker executing it here, or the one deriving it from the store (derive.go); handlers
// change statuses only.
type run struct {
	id        string
	owner     string
	sessionID string
	created   time.Time

	mu       sync.Mutex
	rec      runRecord       // the durable record as last written or read
	sess     *engine.Session // set when the run starts, cleared when it settles
	turn     Turn            // nil until the run is started and after it settles
	model    string
	trace    trace.SpanContext // the admitting request's traceparent (not kept across a restart)
	status   string
	updated  time.Time
	last     string
	events   []runEvent    // the log, or once settled its last runLogKeep events
	base     int           // seq of the event before events[0] (0 until a settled log is trimmed)
	changed  chan struct{} // closed and replaced on every event
	result   map[string]any
	done     chan struct{} // closed when the run settles (finish)
	doneOnce sync.Once

	// final: the terminal event is in the log, and stays its last event. Guarded by mu.
	final bool

	// How far the log is derived (derive.go), guarded by mu: the record's events added, the
	// turn's events taken up to session seq cursor.
	queuedSent, startedSent, unknownSent bool
	view                                 turnView
	cursor                               uint64
	here                                 bool               // this process executes the run: its worker writes the log
	adopting                             bool               // taken over here from a process that went away (adopt.go)
	deriving                             bool               // a goroutine derives the log from the store here
	wake                                 context.CancelFunc // wakes the deriving goroutine
	approval                             map[string]any     // the last approval.request taken
	readers                              int                // streams open on the log: a settled log is trimmed once none is
}

func newRun(rec runRecord, status string) *run {
	return &run{id: rec.RunID, owner: rec.Owner, sessionID: rec.SessionID, created: rec.CreatedAt, rec: rec,
		model: rec.Model, status: status, updated: time.Now(), changed: make(chan struct{}), done: make(chan struct{})}
}

func terminal(status string) bool {
	switch status {
	case runCompleted, runFailed, runCancelled, runInterrupted:
		return true
	}
	return false
}

// emitLocked appends an event that happened at at (and optionally sets the status) and wakes
// readers. Called with mu held.
func (r *run) emitLocked(name, status string, fields map[string]any, at time.Time) {
	if r.final {
		return
	}
	seq := r.base + len(r.events) + 1
	if fields == nil {
		fields = map[string]any{}
	}
	fields["event"], fields["run_id"], fields["timestamp"], fields["sequence_number"] = name, r.id, at.Unix(), seq
	b, _ := json.Marshal(fields)
	r.events = append(r.events, runEvent{seq: seq, data: b})
	r.last, r.updated = name, time.Now()
	if status != "" && !terminal(r.status) {
		r.status = status
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

// logBehindRecord reports whether the run's record says it is over (settled, or
// restart-unknown) while its log here does not end yet with what that implies.
func (r *run) logBehindRecord() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.final && (r.rec.Settled() || r.status == runUnknown && !r.unknownSent)
}

// since returns the events after seq, whether the stream is over (the run's terminal event is
// in the log, or it is restart-unknown: nothing will add to it until someone resolves it), and
// a channel that is closed when more arrive. The log is the same in every process (derive.go):
// an id beyond it while the run goes on is one this process has yet to reach, and the reader
// waits for the events after it; beyond the log of a run that is over, the reader gets the
// whole log again.
//
// While a run executes its whole log is kept, so no reader misses an event however far behind
// it is. Once it settles and no stream reads it, only the last runLogKeep events are retained
// (with the terminal event, which carries the output): a reconnect from before that window
// gets what is left.
func (r *run) since(seq int) ([]runEvent, bool, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	last := r.base + len(r.events)
	done := r.final || r.unknownSent && r.status == runUnknown
	switch {
	case seq < r.base || seq > last && done:
		seq = r.base
	case seq > last:
		return nil, false, r.changed
	}
	var out []runEvent
	if seq < last {
		out = append(out, r.events[seq-r.base:]...)
	}
	return out, done, r.changed
}

// runLogKeep is how many events of a settled run stay replayable (the reference bounds its
// replay at 1,000 events as well).
const runLogKeep = 1000

// trimLocked drops all but the last runLogKeep events of a settled run, once no stream is
// reading the log: a reader still connected, however far behind, gets every event it has yet
// to read. Called with mu held.
func (r *run) trimLocked() {
	if !r.final || r.readers > 0 {
		return
	}
	if n := len(r.events) - runLogKeep; n > 0 {
		r.events = append([]runEvent(nil), r.events[n:]...)
		r.base += n
	}
}

// attach counts a stream reading the log; the func it returns ends the count (and trims the
// log of a settled run the last reader leaves).
func (r *run) attach() func() {
	r.mu.Lock()
	r.readers++
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		r.readers--
		r.trimLocked()
		r.mu.Unlock()
	}
}

// remote reports whether another process than proc executes the run.
func (r *run) remote(proc string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rec.Process != "" && r.rec.Process != proc
}

func (r *run) getStatus() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// started returns the session and turn once the run executes.
func (r *run) started() (*engine.Session, Turn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sess, r.turn
}

func (r *run) statusObject() fiber.Map {
	r.mu.Lock()
	defer r.mu.Unlock()
	last := r.last
	if !r.final && r.rec.Settled() {
		// Settled, its log not derived here yet (derive.go): whatever it holds, it ends with
		// the terminal event.
		last = "run." + r.rec.Status
	}
	m := fiber.Map{"object": "hermes.run", "run_id": r.id, "status": r.status, "created_at": r.created.Unix(),
		"updated_at": r.updated.Unix(), "session_id": r.sessionID, "model": r.model, "last_event": last,
		"admission_id": r.rec.AdmissionID, "execution_generation": r.rec.Generation}
	for k, v := range r.result {
		m[k] = v
	}
	if r.status == runUnknown {
		m["restart_unknown"] = true
		m["error"] = msgUnknown
	}
	if r.status == runWaiting && r.turn != nil {
		for _, q := range r.sess.OpenRequests() {
			if q.TurnID == r.turn.ID() && q.Kind == engine.KindApproval {
				m["approval"] = approvalFields(q)
				break
			}
		}
	} else if r.status == runWaiting && r.approval != nil {
		m["approval"] = r.approval // run by another process: the request its log shows
	}
	return m
}

func approvalFields(q engine.Request) map[string]any {
	m := map[string]any{"request_id": q.ID}
	for _, k := range []string{"command", "description", "pattern_key", "pattern_keys", "allow_permanent", "tool"} {
		if v, ok := q.Payload[k]; ok {
			m[k] = v
		}
	}
	choices := []string{engine.ChoiceOnce, engine.ChoiceSession, engine.ChoiceAlways, engine.ChoiceDeny}
	if perm, _ := q.Payload["allow_permanent"].(bool); !perm {
		choices = []string{engine.ChoiceOnce, engine.ChoiceSession, engine.ChoiceDeny}
	}
	m["choices"] = choices
	return m
}

func runNotFound(id string) error {
	return &wire.Error{Status: fiber.StatusNotFound, Message: "Run not found: " + id, Type: "invalid_request_error", Param: "run_id", Code: "run_not_found"}
}

type runRequest struct {
	Input        json.RawMessage `json:"input"`
	SessionID    string          `json:"session_id"`
	Instructions *string         `json:"instructions"`
	Model        string          `json:"model"`
}

// follow takes the turn's events into the run's log until the turn ends or the server stops
// (then the turn is interrupted and the run settled interrupted once its end is stored).
func (rs *Runs) follow(r *run, sess *engine.Session, tr Turn) {
	// The log takes the turn's events as the store holds them, as every other process reads
	// them (derive.go), not as the turn publishes them: an event this process published and
	// never stored (it was killed, or lost the lease, before its flush) is in no log.
	stopLog := rs.logStored(r, sess, tr.ID())
	out, err := tr.Follow(func(ev engine.Event) {
		if q, ok := ev.Data.(engine.Request); ok && ev.Type == engine.EvRequestOpen && q.Kind != engine.KindApproval {
			_ = sess.Withdraw(q.ID, wire.NoClient)
		}
	})
	// The turn's events are in the store before its record says it ended: a process deriving
	// the run's log reads them there once it sees the record settled (derive.go). The reads
	// and waits that ensure it are not cut short by the server stopping: they get storedWithin
	// from then, which is when an interrupted turn's last events are being stored.
	gctx, cancel := rs.untilStoppedFor(storedWithin)
	defer cancel()
	if err != nil {
		// The server stops with the turn still running. It is interrupted, and the run is
		// settled only once the turn's end (what the interrupted tool calls report, then its
		// message.complete) is in the store and in this log: settled before, this log would
		// end where every later process's goes on with those events, under the same ids.
		tr.Interrupt("shutdown")
		stopLog()
		ended := rs.turnEnded(gctx, r, sess, tr.ID())
		tr.Close("shutdown")
		rs.release()
		if !ended {
			// Left running: the record reads as restart-unknown once this process is gone,
			// and every process's log goes on from what the store holds of the turn.
			rs.log.Warn("runs: the turn of a run did not end in the store before the server stopped; the run is left unsettled",
				"run_id", r.id, "session_id", r.sessionID)
			return
		}
		rs.settle(r, runInterrupted, map[string]any{"completed": false, "partial": false, "interrupted": true,
			"turn_exit_reason": "interrupted_by_system(server_shutdown)", "error": msgShutdown})
		return
	}
	sctx, scancel := context.WithTimeout(gctx, storedWithin)
	_ = sess.EventsStored(sctx) // not stored: the settlement is refused too, or tried again
	scancel()
	stopLog()
	rs.catchUp(gctx, r, sess) // what the store holds of the turn that the subscription had yet to pass on
	// Free the slot before the terminal event: a client that saw it may start the next turn.
	tr.Close("shutdown")
	rs.release()
	status, res := outcomeResult(out)
	wire.AddContext(res, sess.Context())
	rs.settle(r, status, res)
}

// turnEnded waits, within ctx, for the interrupted turn to end and its events to be stored,
// and takes them from the store; it reports whether the log reached the turn's end (its
// message.complete, or a takeover that ends it). Events this process could not store end the
// wait at once: the settlement would not reach the store either.
func (rs *Runs) turnEnded(ctx context.Context, r *run, sess *engine.Session, turnID string) bool {
	_, err := sess.Wait(ctx, turnID)
	here := err == nil // else run by another process (or gone from this one), or ctx ended
	if here && sess.EventsStored(ctx) != nil {
		return false
	}
	for {
		rs.catchUp(ctx, r, sess)
		r.mu.Lock()
		done := r.view.done
		r.mu.Unlock()
		if done || here {
			return done // run here: all of it is stored, and taken
		}
		select {
		case <-time.After(20 * time.Millisecond): // the process running it is still ending it
		case <-ctx.Done():
			return false
		}
	}
}

// logStored takes the events of the turn the run executes here into its log as the store
// holds them (engine.Session.SubscribeStored), until the turn's end or the func it returns is
// called (which waits for it to stop).
func (rs *Runs) logStored(r *run, sess *engine.Session, turnID string) (stop func()) {
	ctx, cancel := context.WithCancel(rs.ctx)
	r.mu.Lock()
	if r.view.turn == "" {
		r.view.turn = turnID
	}
	from := max(r.cursor, r.rec.EventFloor)
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		sub := sess.SubscribeStored(from)
		defer func() { sub.Close() }()
		var buf []engine.Event
		for {
			var err error
			buf, err = sub.NextBatch(ctx, buf[:0])
			for _, ev := range buf {
				rs.take(r, sess, ev)
			}
			r.mu.Lock()
			over, cur := r.view.done, r.cursor
			r.mu.Unlock()
			switch {
			case over || ctx.Err() != nil:
				return
			case errors.Is(err, engine.ErrLagged):
				// Events numbered here were forgotten unstored (the lease was lost): the
				// stored log goes on from what was taken.
				sub.Close()
				sub = sess.SubscribeStored(cur)
			case err != nil:
				return // the session closed: the follower reads the rest from the store (catchUp)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// untilStoppedFor returns a context that ends grace after the server stops (or when cancel is
// called), for what a run's settlement must still read or wait for as the server stops.
func (rs *Runs) untilStoppedFor(grace time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(rs.storeCtx())
	go func() {
		defer cancel()
		select {
		case <-rs.ctx.Done():
		case <-ctx.Done():
			return
		}
		select {
		case <-time.After(grace):
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// storedWithin bounds how long a run's settlement waits for its turn's events to be stored.
const storedWithin = 10 * time.Second

// outcomeResult maps a turn's outcome to the terminal status and fields: a run is never
// completed with completed:false or partial:true.
func outcomeResult(o engine.Outcome) (string, map[string]any) {
	usage := map[string]any{"input_tokens": o.Usage.PromptTokens, "output_tokens": o.Usage.CompletionTokens, "total_tokens": o.Usage.TotalTokens}
	if o.Usage.CostUSD != 0 { // priced models only (the model catalogue)
		usage["cost_usd"] = o.Usage.CostUSD
	}
	res := map[string]any{"completed": o.Completed, "partial": o.Partial, "interrupted": o.Interrupted, "turn_exit_reason": o.ExitReason, "output": o.Text, "usage": usage}
	if o.PendingSteer != "" {
		res["pending_steer"] = o.PendingSteer
	}
	status := runCompleted
	switch {
	case o.Interrupted || o.Status == engine.StatusCancelled:
		status = runCancelled
	case o.Status != engine.StatusCompleted || !o.Completed || o.Partial:
		status = runFailed
		res["error"] = wire.OutcomeError(o).Message
	}
	return status, res
}

// finish records the result in memory and publishes the terminal event run.<status>.
func (r *run) finish(rec runRecord, stored bool, status string, res map[string]any) {
	fields := make(map[string]any, len(res))
	for k, v := range res {
		fields[k] = v
	}
	r.mu.Lock()
	if stored {
		r.rec = rec
	}
	// A settled run is kept for runRetention with its own log; it must not also keep the
	// session object alive.
	r.sess, r.turn = nil, nil
	r.result = res
	r.prefixLocked()
	if stored && wasUnknown(rec) {
		r.unknownLocked(rec) // the executor's log too, when its run lapsed before it settled it
	}
	at := time.Now()
	if stored && !rec.SettledAt.IsZero() {
		at = rec.SettledAt
	}
	r.emitLocked("run."+status, status, fields, at)
	r.final = true
	if r.wake != nil {
		r.wake() // the goroutine deriving the log, if any, is done
	}
	r.trimLocked()
	r.mu.Unlock()
	r.doneOnce.Do(func() { close(r.done) })
}

func (rs *Runs) Get(c *fiber.Ctx) error {
	r, err := rs.getRunFor(c, c.Params("id"))
	if err != nil {
		return err
	}
	return c.JSON(r.statusObject())
}

// Events streams the run's events with id: lines. A reconnect with Last-Event-ID (or
// ?last_event_id=) replays what came after it; a finished run that has nothing left to replay
// answers 204, which tells an EventSource to stop reconnecting.
func (rs *Runs) Events(c *fiber.Ctx) error {
	r, err := rs.getRunFor(c, c.Params("id"))
	if err != nil {
		return err
	}
	after, err := wire.LastEventID(c.Get("Last-Event-ID"), c.Query("last_event_id"))
	if err != nil {
		return err
	}
	rs.derive(r)
	evs, done, changed := r.since(after)
	if !done && len(evs) == 0 && r.logBehindRecord() {
		// The record says the run is over and this process is still adding what that implies
		// to its log (derive.go): answer once it has, so a reader already at the log's end
		// gets 204 here too rather than a stream that closes empty.
		wait := time.NewTimer(finishWithin)
		defer wait.Stop()
	await:
		for !done && len(evs) == 0 {
			select {
			case <-changed:
				evs, done, changed = r.since(after)
			case <-wait.C:
				break await // stream what there is, as before
			}
		}
	}
	if done && len(evs) == 0 {
		return c.SendStatus(fiber.StatusNoContent)
	}
	wire.SSEHeaders(c)
	rs.streams.Add(1)
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer rs.streams.Done()
		defer rs.host.Streaming()()
		rs.streamRun(w, r, after)
	})
	return nil
}

func (rs *Runs) Approval(c *fiber.Ctx) error {
	r, err := rs.getRunFor(c, c.Params("id"))
	if err != nil {
		return err
	}
	var req struct {
		Choice    string        `json:"choice"`
		RequestID string        `json:"request_id"`
		All       wire.FlexBool `json:"all"`
	}
	if err := wire.DecodeJSON(c.Body(), &req); err != nil {
		return err
	}
	choice := strings.ToLower(strings.TrimSpace(req.Choice))
	switch choice {
	case "approve", "approved", "allow":
		choice = engine.ChoiceOnce
	case engine.ChoiceOnce, engine.ChoiceSession, engine.ChoiceAlways, engine.ChoiceDeny:
	default:
		return wire.BadRequest("choice", "invalid_approval_choice", "choice must be one of once, session, always, deny")
	}
	if len(req.RequestID) > wire.MaxHeaderID {
		return wire.BadRequest("request_id", "invalid_approval_request", "invalid request_id")
	}
	var ids []string
	sess, tr := r.started()
	if sess != nil {
		for _, q := range sess.OpenRequests() {
			if q.TurnID != tr.ID() || q.Kind != engine.KindApproval || (req.RequestID != "" && q.ID != req.RequestID) {
				continue
			}
			ids = append(ids, q.ID)
			if !bool(req.All) {
				break
			}
		}
	}
	if len(ids) == 0 {
		// Run by another process: its approvals are answered through the session, which
		// sends them to the process holding it.
		sess, ids = rs.remoteApprovals(c.Context(), r, req.RequestID, bool(req.All))
	}
	resolved := 0
	for _, id := range ids {
		if err := sess.Answer(id, map[string]any{"choice": choice}); err == nil {
			resolved++
		}
	}
	if resolved == 0 {
		return &wire.Error{Status: fiber.StatusConflict, Message: "no approval is pending for run " + r.id, Type: "invalid_request_error", Code: "approval_not_pending", NoRetry: true}
	}
	// The log shows the answers from the session's events (approval.responded); the status
	// moves on now.
	r.mu.Lock()
	if r.status == runWaiting {
		r.status = runRunning
	}
	r.mu.Unlock()
	out := fiber.Map{"object": "hermes.run.approval_response", "run_id": r.id, "choice": choice, "resolved": resolved}
	if req.RequestID != "" {
		out["request_id"] = req.RequestID
	}
	return c.JSON(out)
}

func (rs *Runs) Steer(c *fiber.Ctx) error {
	r, err := rs.getRunFor(c, c.Params("id"))
	if err != nil {
		return err
	}
	var req struct {
		Input   json.RawMessage `json:"input"`
		Message json.RawMessage `json:"message"`
		Text    json.RawMessage `json:"text"`
	}
	if err := wire.DecodeJSON(c.Body(), &req); err != nil {
		return err
	}
	var text string
	for _, raw := range []json.RawMessage{req.Input, req.Message, req.Text} {
		t, err := rs.host.Text(raw)
		if err != nil {
			return wire.BadRequest("input", "invalid_steer_input", "steer text must be a string or text parts")
		}
		if strings.TrimSpace(t) != "" {
			text = t
			break
		}
	}
	if text == "" {
		return wire.BadRequest("input", "invalid_steer_input", "steer text is empty")
	}
	status := r.getStatus()
	sess, _ := r.started()
	if status == runRunning && sess == nil {
		// Run by another process: the session sends the steer to the one holding it.
		sess = rs.remoteSession(c.Context(), r)
	}
	if status != runRunning || sess == nil {
		return &wire.Error{Status: fiber.StatusConflict, Message: "run " + r.id + " is " + status + " and does not accept steer", Type: "invalid_request_error", Code: "run_not_accepting_steer", NoRetry: true}
	}
	if _, err := sess.Steer(text); err != nil {
		return &wire.Error{Status: fiber.StatusConflict, Message: "steer not accepted: " + err.Error(), Type: "invalid_request_error", Code: "steer_not_accepted", NoRetry: true}
	}
	// The log shows it once the turn takes it (run.steered, from steer.delivered).
	return c.JSON(fiber.Map{"object": "hermes.run.steer", "run_id": r.id, "accepted": true})
}

// Stop interrupts a running run (it then ends cancelled, or completed when it finished
// first) and cancels a queued one before it starts. A restart-unknown run is not active here:
// resolve-unknown is how it ends.
func (rs *Runs) Stop(c *fiber.Ctx) error {
	r, err := rs.getRunFor(c, c.Params("id"))
	if err != nil {
		return err
	}
	switch status := r.getStatus(); {
	case terminal(status) || status == runStopping:
		return c.JSON(r.statusObject())
	case status == runUnknown:
		return &wire.Error{Status: fiber.StatusConflict, Message: "run " + r.id + " is restart-unknown and not active in this process; resolve it with POST /v1/runs/" + r.id + "/resolve-unknown", Type: "invalid_request_error", Code: "run_not_active", NoRetry: true}
	case (status == runRunning || status == runWaiting) && r.remote(rs.ledger.Process()):
		// Run by another process: the session asks the one holding it to interrupt the turn.
		sess := rs.remoteSession(c.Context(), r)
		if sess == nil || !sess.Interrupt("user") {
			if rec, err := rs.ledger.Get(c.Context(), r.id); err == nil && rec.Settled() {
				rs.refresh(r, rec)
				return c.JSON(r.statusObject())
			}
			return &wire.Error{Status: fiber.StatusConflict, Message: "run " + r.id + " could not be stopped in the process running it; retry", Type: "invalid_request_error", Code: "run_not_active"}
		}
		r.setStopping()
		return c.JSON(fiber.Map{"run_id": r.id, "status": runStopping})
	case status == runQueued:
		if rs.settleQueued(r, runCancelled, "stopped before it started", "interrupted_by_user") {
			return c.JSON(r.statusObject())
		}
		// It started meanwhile: stop it as a running run.
	}
	r.setStopping()
	sess, _ := r.started()
	r.mu.Lock()
	here := r.here
	r.mu.Unlock()
	switch {
	case sess != nil:
		sess.Interrupt("user")
	case !here:
		// Queued a moment ago, started since by another process (a start here sees the
		// stopping status and interrupts its turn itself).
		if sess := rs.remoteSession(c.Context(), r); sess != nil {
			sess.Interrupt("user")
		}
	}
	return c.JSON(fiber.Map{"run_id": r.id, "status": runStopping})
}

// setStopping marks a run being stopped (a status only: the log shows the interrupted
// outcome).
func (r *run) setStopping() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !terminal(r.status) {
		r.status, r.updated = runStopping, time.Now()
	}
}
