package runsapi

import (
	"context"
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/runs"
	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
)

// errRunNotQueued: a run's start lost to a stop or to another process's claim.
var errRunNotQueued = runs.ErrNotQueued

// getRunFor returns the caller's run: from memory, or from its durable record (after a
// restart, once its event log was dropped, or a run another process admitted). A run of
// another owner is not found (the admin key sees every run).
func (rs *Runs) getRunFor(c *fiber.Ctx, id string) (*run, error) {
	if err := wire.CheckID("run_id", "invalid_run_id", "run id", id); err != nil {
		return nil, err
	}
	rs.mu.Lock()
	r, ok := rs.m[id]
	rs.mu.Unlock()
	if ok {
		if !rs.sees(c, r.owner) {
			return nil, runNotFound(id)
		}
		// A mirror of a run another process executes follows it by change hints, which may
		// still be on their way: answer from its record, so that a run another process
		// reported settled is never read back as running here.
		r.mu.Lock()
		remote := !r.final && r.rec.Process != rs.ledger.Process()
		r.mu.Unlock()
		if remote {
			if rec, err := rs.ledger.Get(c.Context(), id); err == nil {
				rs.refresh(r, rec)
			}
			rs.derive(r) // its status follows its turn's events here
		}
		return r, nil
	}
	if len(id) < 5 || id[:4] != "run_" || len(id) > wire.MaxHeaderID {
		return nil, runNotFound(id)
	}
	rec, err := rs.ledger.Get(c.Context(), id)
	if errors.Is(err, runs.ErrNotFound) || (err == nil && !rs.sees(c, rec.Owner)) {
		return nil, runNotFound(id)
	}
	if err != nil {
		return nil, err
	}
	r = rs.mirror(rec)
	if !rec.Settled() {
		rs.derive(r)
	}
	return r, nil
}

// mirror returns the run of rec, from memory or rebuilt from the record. An unsettled one gets
// its session's lane, which follows it to its end.
func (rs *Runs) mirror(rec runRecord) *run {
	rs.mu.Lock()
	if cur, ok := rs.m[rec.RunID]; ok {
		rs.mu.Unlock()
		return cur
	}
	rs.mu.Unlock()
	r := rs.recoveredRun(rec)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if cur, ok := rs.m[rec.RunID]; ok {
		return cur
	}
	rs.addLocked(r)
	if !rec.Settled() {
		rs.lanes.Kick(rec.SessionID)
	}
	return r
}

// pruneEvery bounds how often addLocked scans for expired runs: a scan per admission would make
// admission cost grow with every run kept for runRetention.
const pruneEvery = time.Minute

// addLocked registers r and, at most once per pruneEvery, forgets the event logs of runs that
// finished more than runRetention ago.
func (rs *Runs) addLocked(r *run) {
	if rs.m == nil {
		rs.m = map[string]*run{}
	}
	rs.m[r.id] = r
	if time.Since(rs.pruned) < pruneEvery {
		return
	}
	rs.pruned = time.Now()
	for id, old := range rs.m {
		old.mu.Lock()
		stale := terminal(old.status) && time.Since(old.updated) > runRetention
		old.mu.Unlock()
		if stale {
			delete(rs.m, id)
		}
	}
}

// Create admits a run. With an Idempotency-Key, a retry of the same request (same body and
// session key) by the same owner gets the original run back (replayed:true) instead of
// starting another, for idempotencyRetention, across restarts and from any process on the
// store; the same key with a different body is a 409.
func (rs *Runs) Create(c *fiber.Ctx) error {
	owner := rs.host.Principal(c)
	fp := sha256Hex(string(c.Body()) + "\n" + c.Get(wire.HeaderSessionKey))
	ikey := c.Get("Idempotency-Key")
	if ikey == "" {
		return rs.admitRun(c, owner, "", fp)
	}
	if err := wire.ValidIdempotencyKey(ikey); err != nil {
		return err
	}
	keyHash := sha256Hex(ikey)
	rs.admit.Lock()
	defer rs.admit.Unlock()
	runID, conflict, err := rs.ledger.Lookup(c.Context(), owner, keyHash, fp)
	if err != nil {
		return err
	}
	if conflict {
		return idempotencyConflict()
	}
	if runID != "" {
		if done, err := rs.replayRun(c, runID); done {
			return err
		}
		// The record was swept between the lookup and the read: the key is free again.
	}
	return rs.admitRun(c, owner, keyHash, fp)
}

func idempotencyConflict() error {
	return &wire.Error{Status: fiber.StatusConflict, Message: "Idempotency-Key was used with a different request", Type: "invalid_request_error", Param: "Idempotency-Key", Code: "idempotency_key_conflict", NoRetry: true}
}

// replayRun answers a keyed admission with the run the key admitted; done is false when that
// run is gone.
func (rs *Runs) replayRun(c *fiber.Ctx, runID string) (bool, error) {
	r, err := rs.getRunFor(c, runID)
	if err != nil {
		return false, nil
	}
	r.mu.Lock()
	status, sid := r.status, r.sessionID
	r.mu.Unlock()
	c.Set("Idempotency-Replayed", "true")
	c.Set(wire.HeaderSessionID, sid)
	return true, c.Status(fiber.StatusAccepted).JSON(fiber.Map{"run_id": runID, "status": status, "session_id": sid, "replayed": true})
}

// admitRun validates the request, records the run (queued) in its session's FIFO and wakes
// the FIFO's worker. Nothing is allocated before validation passes.
func (rs *Runs) admitRun(c *fiber.Ctx, owner, keyHash, fp string) error {
	var req runRequest
	if err := wire.DecodeJSON(c.Body(), &req); err != nil {
		return err
	}
	modelName := ""
	if req.Model != "" {
		m, err := rs.host.PickModel(req.Model)
		if err != nil {
			return err
		}
		modelName = m
	}
	key := c.Get(wire.HeaderSessionKey)
	if key != "" {
		if err := wire.ValidSessionKey(key); err != nil {
			return err
		}
	}
	if req.SessionID != "" {
		if err := wire.ValidSessionID(req.SessionID); err != nil {
			return wire.WithParam(err, "session_id")
		}
	}
	now := time.Now().UTC()
	history, prompt, err := rs.host.Input(req.Input, now)
	if err != nil {
		return err
	}
	if req.Instructions != nil && *req.Instructions != "" {
		history = append([]engine.Row{{Role: "system", Content: *req.Instructions, Time: now}}, history...)
	}
	// The cap counts turns in flight; a run that would start now and finds it full is refused
	// as chat and responses are. A run queued behind another waits for a slot when its turn
	// comes.
	// Only the caller's own queue counts: another principal's would be told apart by a 404.
	if rs.slots != nil && len(rs.slots) >= cap(rs.slots) && !(rs.lanes.Busy(req.SessionID) && rs.seesSession(rs.host.Who(c), req.SessionID)) {
		rs.host.Rejected("turn_cap")
		return &wire.Error{Status: fiber.StatusTooManyRequests, Message: "too many agent turns in flight; retry shortly", Type: "rate_limit_error", Code: "rate_limit_exceeded", RetryAfter: 1}
	}
	id := "run_" + wire.NewHex(16)
	sid := req.SessionID
	if sid == "" {
		sid = id
	}
	sess, err := rs.host.OpenOrSeed(rs.ctx, rs.host.Who(c), sid, modelName, key, history)
	if err != nil {
		return err
	}
	model := modelName
	if model == "" {
		model = sess.Record().Model
	}
	rec := runRecord{RunID: id, AdmissionID: "adm_" + wire.NewHex(16), Owner: owner, SessionID: sess.ID(), Fingerprint: fp,
		IdemKey: keyHash, Prompt: prompt, Model: model, SwitchModel: modelName, SessionKey: key, CreatedAt: now}
	// The run is registered (and locked) before the ledger has it: the session's worker, which
	// may reach it as soon as it is in the FIFO, finds this run and waits for its run.queued.
	r := newRun(rec, runQueued)
	r.trace = rs.host.Trace(c)
	rs.mu.Lock()
	rs.addLocked(r)
	rs.mu.Unlock()
	r.mu.Lock()
	adm, err := rs.ledger.Admit(rs.storeCtx(), rec)
	if err != nil || adm.Replay != "" {
		r.mu.Unlock()
		rs.mu.Lock()
		delete(rs.m, id)
		rs.mu.Unlock()
		switch {
		case errors.Is(err, runs.ErrIdempotencyReused):
			return idempotencyConflict()
		case err != nil:
			return err
		}
		if done, err := rs.replayRun(c, adm.Replay); done {
			return err
		}
		return runNotFound(adm.Replay)
	}
	r.rec = adm.Record
	r.prefixLocked() // run.queued when runs are ahead (the record says how many)
	r.mu.Unlock()
	rs.lanes.Kick(r.sessionID)
	if key != "" {
		c.Set(wire.HeaderSessionKey, key)
	}
	c.Set(wire.HeaderSessionID, sess.ID())
	// "started" as the reference answers; GET /v1/runs/{id} tells queued from running and
	// carries the admission.
	return c.Status(fiber.StatusAccepted).JSON(fiber.Map{"run_id": id, "status": "started", "session_id": sess.ID(), "replayed": false})
}

// storeCtx is the context of ledger writes: they must land even while the server stops (a
// settlement written at shutdown is what keeps a run from being reported unknown later).
func (rs *Runs) storeCtx() context.Context { return context.WithoutCancel(rs.ctx) }

// seesSession reports whether principal p sees session id (live or stored); an unknown
// session is not seen.
func (rs *Runs) seesSession(p engine.Principal, id string) bool {
	if sess, ok := rs.eng.Peek(id); ok {
		return p.Sees(sess.Record().Principal)
	}
	rec, err := rs.eng.Store().GetSession(rs.ctx, id)
	return err == nil && p.Sees(rec.Principal)
}

// refresh brings the view of a run this process does not execute up to its record: started
// or restart-unknown elsewhere, or settled. Its log follows in the goroutine deriving it, woken
// here (derive.go); a run with no turn to read (settled before it started, or recorded
// without its turn) is finished at once.
func (rs *Runs) refresh(r *run, rec runRecord) {
	if rec.Process == rs.ledger.Process() && !rec.Settled() {
		return // executed here: the worker publishes its events
	}
	unknown := false
	if !rec.Settled() && rec.Status == recRunning {
		rec, unknown = rs.ledger.Lapse(rs.ctx, rec) // lapsed just now: the record says when (unknownAt)
	}
	r.mu.Lock()
	if r.final || r.here && !rec.Settled() {
		r.mu.Unlock()
		return
	}
	r.rec = rec
	switch {
	case rec.Settled():
		if !terminal(r.status) {
			r.status, r.result, r.updated = rec.Status, rec.Result, time.Now()
		}
	case unknown && r.status != runUnknown:
		r.status = runUnknown
		rs.log.Warn("runs: a run was executing in a process that is gone; it is restart-unknown until resolved",
			"run_id", rec.RunID, "session_id", rec.SessionID, "admission_id", rec.AdmissionID, "execution_generation", rec.Generation)
	case !unknown && rec.Status == recRunning && r.status == runQueued:
		r.status = runRunning
	case !unknown && r.status == runUnknown:
		// Read unknown while its process was silent (a store outage), and it is not: the
		// record says so now, and so does every process that reads it.
		r.status = runRunning
	}
	wake, deriving := r.wake, r.deriving
	direct := rec.Settled() && !deriving && (r.here || rec.TurnID == "")
	r.mu.Unlock()
	if wake != nil {
		wake()
	}
	if direct {
		// Nothing to read from the session: the record's events are the whole log.
		rs.log.Debug("runs: a settled run's log ends with its record", "run_id", r.id, "turn", rec.TurnID)
		r.finish(rec, true, rec.Status, rec.Result)
	}
}

// wasUnknown reports whether the record says the run went restart-unknown: its lease lapsed
// (Lapsed stays set once it settles, also when the process that ran it settled it after
// all), or it was resolved as such. Every process reads the same record, so every log of the
// run has run.unknown, or none has.
func wasUnknown(rec runRecord) bool {
	return rec.Lapsed || rec.Result["turn_exit_reason"] == resolvedReason
}

// unknownAt is the time of a run's run.unknown: when the lapse was written, else (a run
// resolved without a lease: its process was gone) when it was settled, else now.
func unknownAt(rec runRecord) time.Time {
	switch {
	case !rec.LapsedAt.IsZero():
		return rec.LapsedAt
	case !rec.SettledAt.IsZero():
		return rec.SettledAt
	}
	return time.Now()
}

// unknownLocked adds run.unknown to the log, once. Called with mu held.
func (r *run) unknownLocked(rec runRecord) {
	if !r.unknownSent {
		r.unknownSent = true
		r.emitLocked("run.unknown", "", unknownFields(rec), unknownAt(rec))
	}
}

func unknownFields(rec runRecord) map[string]any {
	return map[string]any{"session_id": rec.SessionID, "admission_id": rec.AdmissionID,
		"execution_generation": rec.Generation, "restart_unknown": true, "error": msgUnknown}
}

// laneFuncs are this server's parts of the sessions' lanes (engine/runs.Lanes).
func (rs *Runs) laneFuncs() runs.LaneFuncs {
	return runs.LaneFuncs{
		Start: func(rec runRecord) { rs.execute(rs.mirror(rec)) },
		Watch: func(rec runRecord) { rs.refresh(rs.mirror(rec), rec) },
		Local: rs.local,
		StopQueued: func(rec runRecord) bool {
			return rs.settleQueued(rs.mirror(rec), runInterrupted, msgShutdownQueue, "interrupted_by_system(server_shutdown)")
		},
		Viewed: rs.viewed,
	}
}

// viewed reports the session of this server's view of a run whose record changed, and whether
// the view follows the record: its settlement and its execution are another process'rs.
func (rs *Runs) viewed(runID string) (string, bool, bool) {
	rs.mu.Lock()
	r, ok := rs.m[runID]
	rs.mu.Unlock()
	if !ok {
		return "", false, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sessionID, !r.final && r.rec.Process != rs.ledger.Process(), true
}

// local is given the head of a FIFO running in this process: when it has ended here, its
// settlement did not reach the store (or its FIFO), and is written again.
func (rs *Runs) local(rec runRecord) (bool, <-chan struct{}) {
	r := rs.mirror(rec)
	select {
	case <-r.done:
	default:
		r.mu.Lock()
		adopting := r.adopting
		r.mu.Unlock()
		if sess, _ := r.started(); sess != nil || adopting {
			return false, r.done
		}
		// Claimed by this process but never started here: its start failed with the store
		// out after a claim whose answer the outage cut. Nothing ran.
		rs.settle(r, runFailed, map[string]any{"completed": false, "partial": false, "interrupted": false,
			"error": "the run's start failed while the store was unavailable; it did not run"})
		select {
		case <-r.done:
			return true, nil
		default:
			return false, r.done
		}
	}
	r.mu.Lock()
	status, res := r.status, r.result
	r.mu.Unlock()
	_, err := rs.ledger.Settle(rs.storeCtx(), r.id, status, res, false)
	return err == nil || errors.Is(err, runs.ErrSettled), nil
}

// execute starts a queued head of a FIFO and follows it to its end.
func (rs *Runs) execute(r *run) {
	if rs.slots != nil {
		select {
		case rs.slots <- struct{}{}:
		case <-r.done: // stopped while waiting for a slot
			return
		case <-rs.ctx.Done():
			return
		}
	}
	sess, tr, err := rs.startRun(r)
	if err != nil {
		rs.release()
		r.mu.Lock()
		claimed := r.rec.Status == recRunning && r.rec.Process == rs.ledger.Process()
		r.mu.Unlock()
		switch {
		case errors.Is(err, errRunNotQueued), errors.Is(err, runs.ErrSettled): // stopped while queued, or claimed elsewhere
		case !claimed && errors.Is(err, engine.ErrStoreUnavailable):
			// The store is out and the run did not start: it stays queued, and its lane
			// starts it again once the store answers (failing it here would fail an
			// acknowledged run for an outage, and only in this process's view).
			rs.log.Warn("runs: starting a run failed with the store out; it stays queued", "run_id", r.id, "err", err)
		case rs.ctx.Err() != nil:
			rs.settle(r, runInterrupted, map[string]any{"completed": false, "partial": false, "interrupted": true,
				"turn_exit_reason": "interrupted_by_system(server_shutdown)", "error": msgShutdownQueue})
		default:
			rs.settle(r, runFailed, map[string]any{"completed": false, "partial": false, "interrupted": false, "error": wire.Classify(err).Message})
		}
		return
	}
	rs.follow(r, sess, tr)
}

// startRun submits the run's prompt as a durable admission: the engine admits it in the
// session's line, behind the running turn and the busy policy's follow-up, and claims the run
// in the ledger when its turn comes, before the turn starts (a crash after the claim leaves a
// run that may have done work, which is what restart-unknown means). The run stays queued
// while other turns go first.
func (rs *Runs) startRun(r *run) (*engine.Session, Turn, error) {
	sess, err := rs.eng.Open(rs.ctx, r.sessionID)
	if err != nil {
		return nil, nil, err
	}
	r.mu.Lock()
	prompt, owner, sc := r.rec.Prompt, r.rec.Owner, r.trace
	r.mu.Unlock()
	claim := func(ctx context.Context, turnID string) error {
		// Not cancelled with the request, but with the fence the engine put in ctx: the lease
		// generation the turn runs under.
		rec, err := rs.ledger.ClaimTurn(context.WithoutCancel(ctx), r.id, turnID)
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.rec, r.here = rec, true
		if r.wake != nil {
			r.wake() // a goroutine deriving the log while the run was queued leaves it to this one
		}
		r.mu.Unlock()
		// A model the request named: the session moves to it before the turn starts.
		if rec.SwitchModel != "" && sess.Record().Model != rec.SwitchModel {
			if _, err := sess.SetModel(rs.ctx, rec.SwitchModel); err != nil {
				return err
			}
		}
		return nil
	}
	// The run's owner (the principal that admitted it) owns the turn, so its browser tool
	// calls reach that principal's controller only, even after a restart.
	tr, err := rs.host.StartTurn(rs.ctx, sess, engine.Prompt{Text: prompt, Claim: claim}, owner, sc)
	if err != nil {
		return nil, nil, err
	}
	r.mu.Lock()
	r.sess, r.turn, r.model = sess, tr, sess.Record().Model
	stopping := r.status == runStopping // stop arrived between the record and the turn
	if !stopping {
		r.status = runRunning
	}
	if r.view.turn == "" {
		r.view.turn = tr.ID()
	}
	r.prefixLocked()
	turnID, recorded := tr.ID(), r.rec.TurnID
	r.mu.Unlock()
	if recorded == "" && turnID != "" {
		// The prompt was handed to the process holding the session's lease, whose turn it
		// became: the record names it now, so every process reads the same events.
		if rec, err := rs.ledger.Update(rs.storeCtx(), r.id, func(rec *runRecord) error { rec.TurnID = turnID; return nil }); err == nil {
			r.mu.Lock()
			r.rec = rec
			r.mu.Unlock()
		}
	}
	if stopping {
		tr.Interrupt("user")
	}
	return sess, tr, nil
}

// settle writes the terminal status of a run this process runs (compare-and-set: only a record
// still running under this process is settled), then publishes the terminal event. The write
// comes first, so a client that saw the event never finds the run unsettled after a restart,
// and no process reads another status than the record's: a write the store refused (an
// outage) is tried again every settleRetry until it lands, the run reading as it stands in the
// record meanwhile, or until the record shows another outcome (resolved, or taken by another
// process), which then wins. Only a server that stops gives up: the record then reads as
// restart-unknown, which is the truth as far as the store knows.
func (rs *Runs) settle(r *run, status string, res map[string]any) {
	for logged := false; ; logged = true {
		rec, err := rs.ledger.Settle(rs.storeCtx(), r.id, status, res, false)
		if errors.Is(err, runs.ErrNotOwner) || errors.Is(err, runs.ErrSettled) {
			// Another process runs it or settled it (a start that lost to another, a run
			// resolved meanwhile): the record is the truth, not this process's status.
			if cur, gerr := rs.ledger.Get(rs.storeCtx(), r.id); gerr == nil {
				moved := !cur.Settled() && cur.Process != rs.ledger.Process()
				if moved {
					// Adopted by another process while this one was cut off (its lease
					// lost): the run's log and status follow that process from here.
					r.mu.Lock()
					r.here, r.sess, r.turn = false, nil, nil
					r.mu.Unlock()
				}
				rs.refresh(r, cur)
				if moved {
					rs.derive(r)
				}
				return
			}
		}
		if err == nil || errors.Is(err, runs.ErrNotFound) || rs.ctx.Err() != nil {
			if err != nil {
				rs.log.Error("runs: settling a run in the store failed", "run_id", r.id, "status", status, "err", err)
			}
			r.finish(rec, err == nil, status, res)
			return
		}
		if !logged {
			rs.log.Warn("runs: settling a run in the store failed; trying again", "run_id", r.id, "status", status, "err", err)
		}
		select {
		case <-time.After(settleRetry):
		case <-rs.ctx.Done():
		}
	}
}

// settleRetry is how often a settlement the store refused is written again.
const settleRetry = time.Second

// settleQueued settles a run that never started (stopped while queued, the server stopping,
// or a start that failed) with compare-and-set from queued. It reports whether it settled it;
// a write the store refused settles nothing, here or anywhere: the run stays queued.
func (rs *Runs) settleQueued(r *run, status, msg, reason string) bool {
	res := map[string]any{"completed": false, "partial": false, "interrupted": status != runFailed, "error": msg}
	if reason != "" {
		res["turn_exit_reason"] = reason
	}
	rec, err := rs.ledger.Settle(rs.storeCtx(), r.id, status, res, status != runFailed)
	if errors.Is(err, runs.ErrSettled) || errors.Is(err, runs.ErrNotQueued) || errors.Is(err, runs.ErrNotOwner) {
		return false
	}
	if err != nil {
		rs.log.Error("runs: settling a queued run in the store failed; it stays queued", "run_id", r.id, "status", status, "err", err)
		return false
	}
	r.finish(rec, true, status, res)
	return true
}
