package httpapi

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/store"
)

// Run statuses (a run is one agent turn started by POST /v1/runs and followed by polling or
// an event stream; it outlives the request that started it).
const (
	runRunning     = "running"
	runWaiting     = "waiting_for_approval"
	runStopping    = "stopping"
	runCompleted   = "completed"
	runFailed      = "failed"
	runCancelled   = "cancelled"
	runInterrupted = "interrupted"
)

// runRetention is how long a finished run stays readable.
const runRetention = time.Hour

// runEvent is one frame of a run's event log; seq is its SSE id (from 1).
type runEvent struct {
	seq  int
	data []byte
}

// run is the state of one run. The owner goroutine (follow) is its only writer of events.
type run struct {
	id      string
	sess    *engine.Session
	turn    *turnRun
	model   string
	created time.Time

	mu      sync.Mutex
	status  string
	updated time.Time
	last    string
	events  []runEvent
	changed chan struct{} // closed and replaced on every event
	result  map[string]any
}

func terminal(status string) bool {
	switch status {
	case runCompleted, runFailed, runCancelled, runInterrupted:
		return true
	}
	return false
}

// emit appends an event (and optionally sets the status) and wakes readers.
func (r *run) emit(name, status string, fields map[string]any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seq := len(r.events) + 1
	if fields == nil {
		fields = map[string]any{}
	}
	fields["event"], fields["run_id"], fields["timestamp"], fields["sequence_number"] = name, r.id, time.Now().Unix(), seq
	b, _ := json.Marshal(fields)
	r.events = append(r.events, runEvent{seq: seq, data: b})
	r.last, r.updated = name, time.Now()
	if status != "" && !terminal(r.status) {
		r.status = status
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

// since returns the events after seq, whether the run is over, and a channel that is closed
// when more arrive.
func (r *run) since(seq int) ([]runEvent, bool, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if seq < 0 {
		seq = 0
	}
	var out []runEvent
	if seq < len(r.events) {
		out = append(out, r.events[seq:]...)
	}
	return out, terminal(r.status), r.changed
}

func (r *run) statusObject() fiber.Map {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := fiber.Map{"object": "hermes.run", "run_id": r.id, "status": r.status, "created_at": r.created.Unix(),
		"updated_at": r.updated.Unix(), "session_id": r.sess.ID(), "model": r.model, "last_event": r.last}
	for k, v := range r.result {
		m[k] = v
	}
	if r.status == runWaiting {
		for _, q := range r.sess.OpenRequests() {
			if q.TurnID == r.turn.turnID && q.Kind == engine.KindApproval {
				m["approval"] = approvalFields(q)
				break
			}
		}
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

// runs is the registry of this server's runs.
type runs struct {
	mu   sync.Mutex
	m    map[string]*run
	idem map[string]idemEntry // Idempotency-Key → the run it admitted

	admit sync.Mutex // serialises keyed admissions: check, start and record as one step
}

// idemEntry remembers a keyed admission for runRetention.
type idemEntry struct {
	fingerprint string
	runID       string
	at          time.Time
}

// lookup returns the run a key admitted; conflict when the key came with another body.
func (rs *runs) lookup(key, fp string) (r *run, conflict bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	e, ok := rs.idem[key]
	if !ok || time.Since(e.at) > runRetention {
		return nil, false
	}
	if e.fingerprint != fp {
		return nil, true
	}
	return rs.m[e.runID], false
}

func (rs *runs) remember(key, fp, runID string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.idem == nil {
		rs.idem = map[string]idemEntry{}
	}
	for k, e := range rs.idem {
		if time.Since(e.at) > runRetention {
			delete(rs.idem, k)
		}
	}
	rs.idem[key] = idemEntry{fingerprint: fp, runID: runID, at: time.Now()}
}

func validIdempotencyKey(k string) error {
	if len(k) > 255 {
		return badRequest("Idempotency-Key", "invalid_idempotency_key", "Idempotency-Key must be 1-255 visible ASCII characters")
	}
	for i := 0; i < len(k); i++ {
		if k[i] <= 0x20 || k[i] >= 0x7f {
			return badRequest("Idempotency-Key", "invalid_idempotency_key", "Idempotency-Key must be 1-255 visible ASCII characters")
		}
	}
	return nil
}

func (rs *runs) get(id string) (*run, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r, ok := rs.m[id]; ok {
		return r, nil
	}
	return nil, &apiError{Status: fiber.StatusNotFound, Message: "Run not found: " + id, Type: "invalid_request_error", Param: "run_id", Code: "run_not_found"}
}

// add registers r and forgets runs that finished more than runRetention ago.
func (rs *runs) add(r *run) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.m == nil {
		rs.m = map[string]*run{}
	}
	for id, old := range rs.m {
		old.mu.Lock()
		stale := terminal(old.status) && time.Since(old.updated) > runRetention
		old.mu.Unlock()
		if stale {
			delete(rs.m, id)
		}
	}
	rs.m[r.id] = r
}

type runRequest struct {
	Input        json.RawMessage `json:"input"`
	SessionID    string          `json:"session_id"`
	Instructions *string         `json:"instructions"`
	Model        string          `json:"model"`
}

// createRun admits a run. With an Idempotency-Key, a retry of the same request (same body and
// session key) gets the original run back (replayed:true) instead of starting another; the
// same key with a different body is a 409. Keys are remembered in memory for an hour.
func (s *Server) createRun(c *fiber.Ctx) error {
	ikey := c.Get("Idempotency-Key")
	if ikey == "" {
		return s.admitRun(c, "", "")
	}
	if err := validIdempotencyKey(ikey); err != nil {
		return err
	}
	h := sha256.Sum256([]byte(string(c.Body()) + "\n" + c.Get(HeaderSessionKey)))
	fp := hex.EncodeToString(h[:])
	s.runs.admit.Lock()
	defer s.runs.admit.Unlock()
	r, conflict := s.runs.lookup(ikey, fp)
	if conflict {
		return &apiError{Status: fiber.StatusConflict, Message: "Idempotency-Key was used with a different request", Type: "invalid_request_error", Param: "Idempotency-Key", Code: "idempotency_key_conflict", NoRetry: true}
	}
	if r != nil {
		r.mu.Lock()
		status := r.status
		r.mu.Unlock()
		c.Set("Idempotency-Replayed", "true")
		c.Set(HeaderSessionID, r.sess.ID())
		return c.Status(fiber.StatusAccepted).JSON(fiber.Map{"run_id": r.id, "status": status, "session_id": r.sess.ID(), "replayed": true})
	}
	return s.admitRun(c, ikey, fp)
}

func (s *Server) admitRun(c *fiber.Ctx, ikey, fp string) error {
	var req runRequest
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	modelName := ""
	if req.Model != "" {
		m, err := s.pickModel(req.Model)
		if err != nil {
			return err
		}
		modelName = m
	}
	key := c.Get(HeaderSessionKey)
	if key != "" {
		if err := validSessionKey(key); err != nil {
			return err
		}
	}
	if req.SessionID != "" {
		if err := validSessionID(req.SessionID); err != nil {
			return withParam(err, "session_id")
		}
	}
	now := time.Now().UTC()
	history, prompt, err := parseInput(req.Input, now)
	if err != nil {
		return err
	}
	if req.Instructions != nil && *req.Instructions != "" {
		history = append([]store.Row{{Role: "system", Content: *req.Instructions, Time: now}}, history...)
	}
	id := "run_" + newHex(16)
	sid := req.SessionID
	if sid == "" {
		sid = id
	}
	sess, err := s.openOrSeed(s.ctx, sid, modelName, key, history)
	if err != nil {
		return err
	}
	tr, err := s.startTurn(s.ctx, sess, prompt)
	if err != nil {
		return err
	}
	tr.keep = true
	r := &run{id: id, sess: sess, turn: tr, model: sess.Record().Model, created: now, updated: now, status: runRunning, changed: make(chan struct{})}
	s.runs.add(r)
	if ikey != "" {
		s.runs.remember(ikey, fp, id)
	}
	r.emit("run.started", "", map[string]any{"session_id": sess.ID()})
	s.reqs.Add(1)
	go func() {
		defer s.reqs.Done()
		s.follow(r)
	}()
	if key != "" {
		c.Set(HeaderSessionKey, key)
	}
	c.Set(HeaderSessionID, sess.ID())
	return c.Status(fiber.StatusAccepted).JSON(fiber.Map{"run_id": id, "status": "started", "session_id": sess.ID(), "replayed": false})
}

// follow turns the turn's engine events into run events until the turn ends or the server
// stops (then the turn is interrupted and the run reported interrupted).
func (s *Server) follow(r *run) {
	tr := r.turn
	for !tr.done {
		ev, err := tr.next(s.ctx)
		if errors.Is(err, errSilent) {
			continue
		}
		if err != nil {
			tr.close("shutdown")
			r.emit("run.interrupted", runInterrupted, map[string]any{"error": "the server stopped before this run settled"})
			return
		}
		switch ev.Type {
		case engine.EvMessageDelta:
			if ev.Text != "" {
				r.emit("message.delta", "", map[string]any{"delta": ev.Text})
			}
		case engine.EvToolStart:
			if ts, ok := ev.Data.(engine.ToolStart); ok {
				r.emit("tool.started", "", map[string]any{"tool": ts.Name, "preview": toolLabel(ts.Args), "call_id": ts.CallID})
			}
		case engine.EvToolComplete:
			if tc, ok := ev.Data.(engine.ToolComplete); ok {
				r.emit("tool.completed", "", map[string]any{"tool": tc.Name, "call_id": tc.CallID, "duration": float64(tc.Duration.Milliseconds()) / 1000, "error": tc.Result.IsError || tc.Blocked})
			}
		case engine.EvRequestOpen:
			q, ok := ev.Data.(engine.Request)
			if !ok {
				continue
			}
			if q.Kind != engine.KindApproval {
				_ = r.sess.Withdraw(q.ID, noClient)
				continue
			}
			r.emit("approval.request", runWaiting, approvalFields(q))
		case engine.EvRequestResolved, engine.EvRequestCancel:
			r.mu.Lock()
			if r.status == runWaiting {
				r.status = runRunning
			}
			r.mu.Unlock()
		}
	}
	// Free the slot before the terminal event: a client that saw it may start the next turn.
	tr.close("shutdown")
	r.settle(tr.out)
}

// settle records the terminal status and event from the outcome: a run is never completed
// with completed:false or partial:true.
func (r *run) settle(o engine.Outcome) {
	usage := map[string]any{"input_tokens": o.Usage.PromptTokens, "output_tokens": o.Usage.CompletionTokens, "total_tokens": o.Usage.TotalTokens}
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
		res["error"] = outcomeError(o).Message
	}
	r.mu.Lock()
	r.result = res
	r.mu.Unlock()
	fields := map[string]any{}
	for k, v := range res {
		fields[k] = v
	}
	r.emit("run."+status, status, fields)
}

func (s *Server) getRun(c *fiber.Ctx) error {
	r, err := s.runs.get(c.Params("id"))
	if err != nil {
		return err
	}
	return c.JSON(r.statusObject())
}

// runEvents streams the run's events with id: lines. A reconnect with Last-Event-ID (or
// ?last_event_id=) replays what came after it; a finished run that has nothing left to replay
// answers 204, which tells an EventSource to stop reconnecting.
func (s *Server) runEvents(c *fiber.Ctx) error {
	r, err := s.runs.get(c.Params("id"))
	if err != nil {
		return err
	}
	after := 0
	if v := c.Get("Last-Event-ID", c.Query("last_event_id")); v != "" {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
			after = n // an invalid id means a fresh stream
		}
	}
	evs, done, _ := r.since(after)
	if done && len(evs) == 0 {
		return c.SendStatus(fiber.StatusNoContent)
	}
	sseHeaders(c)
	s.reqs.Add(1)
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer s.reqs.Done()
		s.streamRun(w, r, after)
	})
	return nil
}

func (s *Server) streamRun(w *bufio.Writer, r *run, after int) {
	sse := &sseWriter{w: w}
	sse.write([]byte("retry: 3000\n\n"))
	timer := time.NewTimer(s.opts.KeepAlive)
	defer timer.Stop()
	for {
		evs, done, changed := r.since(after)
		for _, ev := range evs {
			sse.write([]byte("id: "+strconv.Itoa(ev.seq)+"\n"), []byte("data: "), ev.data, []byte("\n\n"))
			after = ev.seq
		}
		if done {
			sse.comment("stream closed")
			_ = sse.flush()
			return
		}
		if sse.flush() != nil {
			return
		}
		timer.Reset(s.opts.KeepAlive)
		select {
		case <-changed:
		case <-timer.C:
			sse.comment("keepalive")
		case <-s.ctx.Done():
			return
		}
	}
}

func (s *Server) runApproval(c *fiber.Ctx) error {
	r, err := s.runs.get(c.Params("id"))
	if err != nil {
		return err
	}
	var req struct {
		Choice    string   `json:"choice"`
		RequestID string   `json:"request_id"`
		All       flexBool `json:"all"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	choice := strings.ToLower(strings.TrimSpace(req.Choice))
	switch choice {
	case "approve", "approved", "allow":
		choice = engine.ChoiceOnce
	case engine.ChoiceOnce, engine.ChoiceSession, engine.ChoiceAlways, engine.ChoiceDeny:
	default:
		return badRequest("choice", "invalid_approval_choice", "choice must be one of once, session, always, deny")
	}
	if len(req.RequestID) > maxHeaderID {
		return badRequest("request_id", "invalid_approval_request", "invalid request_id")
	}
	var ids []string
	for _, q := range r.sess.OpenRequests() {
		if q.TurnID != r.turn.turnID || q.Kind != engine.KindApproval || (req.RequestID != "" && q.ID != req.RequestID) {
			continue
		}
		ids = append(ids, q.ID)
		if !bool(req.All) {
			break
		}
	}
	resolved := 0
	for _, id := range ids {
		if err := r.sess.Answer(id, map[string]any{"choice": choice}); err == nil {
			resolved++
		}
	}
	if resolved == 0 {
		return &apiError{Status: fiber.StatusConflict, Message: "no approval is pending for run " + r.id, Type: "invalid_request_error", Code: "approval_not_pending", NoRetry: true}
	}
	r.emit("approval.responded", runRunning, map[string]any{"choice": choice, "request_id": req.RequestID, "resolved": resolved})
	out := fiber.Map{"object": "hermes.run.approval_response", "run_id": r.id, "choice": choice, "resolved": resolved}
	if req.RequestID != "" {
		out["request_id"] = req.RequestID
	}
	return c.JSON(out)
}

func (s *Server) runSteer(c *fiber.Ctx) error {
	r, err := s.runs.get(c.Params("id"))
	if err != nil {
		return err
	}
	var req struct {
		Input   json.RawMessage `json:"input"`
		Message json.RawMessage `json:"message"`
		Text    json.RawMessage `json:"text"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	var text string
	for _, raw := range []json.RawMessage{req.Input, req.Message, req.Text} {
		t, err := flatten(raw, 0)
		if err != nil {
			return badRequest("input", "invalid_steer_input", "steer text must be a string or text parts")
		}
		if strings.TrimSpace(t) != "" {
			text = t
			break
		}
	}
	if text == "" {
		return badRequest("input", "invalid_steer_input", "steer text is empty")
	}
	r.mu.Lock()
	status := r.status
	r.mu.Unlock()
	if status != runRunning {
		return &apiError{Status: fiber.StatusConflict, Message: "run " + r.id + " is " + status + " and does not accept steer", Type: "invalid_request_error", Code: "run_not_accepting_steer", NoRetry: true}
	}
	if _, err := r.sess.Steer(text); err != nil {
		return &apiError{Status: fiber.StatusConflict, Message: "steer not accepted: " + err.Error(), Type: "invalid_request_error", Code: "steer_not_accepted", NoRetry: true}
	}
	r.emit("run.steered", "", map[string]any{"accepted": true})
	return c.JSON(fiber.Map{"object": "hermes.run.steer", "run_id": r.id, "accepted": true})
}

func (s *Server) stopRun(c *fiber.Ctx) error {
	r, err := s.runs.get(c.Params("id"))
	if err != nil {
		return err
	}
	r.mu.Lock()
	status := r.status
	r.mu.Unlock()
	if terminal(status) || status == runStopping {
		return c.JSON(r.statusObject())
	}
	r.emit("run.stopping", runStopping, nil)
	r.sess.Interrupt("user")
	return c.JSON(fiber.Map{"run_id": r.id, "status": runStopping})
}
