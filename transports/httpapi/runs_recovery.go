package httpapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/engine/store"
)

// initRuns loads the durable run records when the server is built: expired records are
// dropped, keyed admissions are indexed again for Idempotency-Key replays, a run a previous
// process left executing is restart-unknown and blocks its session's FIFO, and a run that was
// admitted but never started takes its place in its FIFO again. It also starts the sweeper.
func (s *Server) initRuns() error {
	s.runs.ledger = ledger{st: s.eng.Store()}
	s.runs.boot = "proc_" + newHex(8)
	recs, err := s.runs.ledger.list(s.ctx, func(key string, err error) {
		s.log.Warn("runs: skipping an unreadable run record", "key", key, "err", err)
	})
	if err != nil {
		return fmt.Errorf("httpapi: reading run records: %w", err)
	}
	now := time.Now()
	for _, rec := range recs {
		if rec.expired(now) {
			if err := s.runs.ledger.delete(s.ctx, rec.RunID); err != nil {
				return fmt.Errorf("httpapi: dropping an expired run record: %w", err)
			}
			continue
		}
		r := recoveredRun(rec, s.runs.boot)
		if !rec.settled() {
			if r.status == runUnknown {
				s.log.Warn("runs: a run was executing when the server stopped; it is restart-unknown until resolved",
					"run_id", rec.RunID, "session_id", rec.SessionID, "admission_id", rec.AdmissionID, "execution_generation", rec.Generation)
			}
			s.enqueue(r)
			continue
		}
		s.runs.mu.Lock()
		s.runs.rememberLocked(rec)
		if now.Sub(rec.SettledAt) <= runRetention {
			s.runs.addLocked(r)
		}
		s.runs.mu.Unlock()
	}
	s.reqs.Add(1)
	go func() {
		defer s.reqs.Done()
		t := time.NewTicker(sweepEvery)
		defer t.Stop()
		for {
			select {
			case <-s.ctx.Done():
				return
			case now := <-t.C:
				if _, err := s.runs.sweep(s.ctx, now); err != nil && s.ctx.Err() == nil {
					s.log.Warn("runs: sweeping expired run records failed", "err", err)
				}
			}
		}
	}()
	return nil
}

// recoveredRun rebuilds a run from its record. Its event log is not durable, so it starts
// again with one event that says where the run stands: its terminal event, run.unknown for a
// run another process left executing, or run.queued.
func recoveredRun(rec runRecord, boot string) *run {
	var r *run
	switch {
	case rec.settled():
		r = newRun(rec, rec.Status)
		r.result = rec.Result
		fields := make(map[string]any, len(rec.Result))
		for k, v := range rec.Result {
			fields[k] = v
		}
		r.emitLocked("run."+rec.Status, "", fields)
		r.final = true
		r.updated = rec.SettledAt
		r.doneOnce.Do(func() { close(r.done) })
	case rec.Status == recRunning && rec.Process != boot:
		r = newRun(rec, runUnknown)
		r.emitLocked("run.unknown", "", map[string]any{"session_id": rec.SessionID, "admission_id": rec.AdmissionID,
			"execution_generation": rec.Generation, "restart_unknown": true, "error": msgUnknown})
	default:
		r = newRun(rec, runQueued)
		r.emitLocked("run.queued", "", map[string]any{"session_id": rec.SessionID, "recovered": true})
	}
	return r
}

// sweep drops the records of runs settled more than idempotencyRetention before now, and the
// Idempotency-Keys they held. It returns how many records it dropped.
func (rs *runs) sweep(ctx context.Context, now time.Time) (int, error) {
	rs.mu.Lock()
	for k, e := range rs.idem {
		if now.Sub(e.at) > idempotencyRetention {
			delete(rs.idem, k)
		}
	}
	rs.mu.Unlock()
	recs, err := rs.ledger.list(ctx, nil)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, rec := range recs {
		if !rec.expired(now) {
			continue
		}
		if err := rs.ledger.delete(ctx, rec.RunID); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// resolveUnknown settles a restart-unknown run as interrupted, so its session's FIFO moves
// on. The caller must name the run's admission_id and execution_generation exactly as GET
// /v1/runs/{id} reports them; the check and the write are one compare-and-set, so of two
// concurrent resolutions exactly one succeeds. The run is never put back in the queue: its
// turn may have done its work before the restart, and repeating it is the client's call.
func (s *Server) resolveUnknown(c *fiber.Ctx) error {
	r, err := s.getRunFor(c, c.Params("id"))
	if err != nil {
		return err
	}
	var req struct {
		AdmissionID *string `json:"admission_id"`
		Generation  *int64  `json:"execution_generation"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	if req.AdmissionID == nil || *req.AdmissionID == "" {
		return badRequest("admission_id", "missing_admission_id", "Missing required parameter: 'admission_id' (as GET /v1/runs/{run_id} reports it)")
	}
	if req.Generation == nil {
		return badRequest("execution_generation", "missing_execution_generation", "Missing required parameter: 'execution_generation' (an integer, as GET /v1/runs/{run_id} reports it)")
	}
	res := map[string]any{"completed": false, "partial": false, "interrupted": true,
		"turn_exit_reason": "interrupted_by_system(server_restart)", "error": msgRestarted}
	rec, err := s.runs.ledger.update(s.storeCtx(), r.id, func(rec *runRecord) error {
		if rec.Status != recRunning || rec.Process == s.runs.boot {
			return errNotUnknown
		}
		if rec.AdmissionID != *req.AdmissionID || rec.Generation != *req.Generation {
			return errAdmissionMismatch
		}
		rec.Status, rec.Result, rec.SettledAt = runInterrupted, res, time.Now().UTC()
		return nil
	})
	switch {
	case errors.Is(err, errNotUnknown):
		return &apiError{Status: fiber.StatusConflict, Message: "run " + r.id + " is " + r.getStatus() + ", not restart-unknown", Type: "invalid_request_error", Code: "run_not_unknown", NoRetry: true}
	case errors.Is(err, errAdmissionMismatch):
		return &apiError{Status: fiber.StatusConflict, Message: "admission_id and execution_generation must be exactly the run's (see GET /v1/runs/" + r.id + ")", Type: "invalid_request_error", Param: "execution_generation", Code: "admission_mismatch", NoRetry: true}
	case errors.Is(err, store.ErrNotFound):
		return runNotFound(r.id)
	case err != nil:
		return err
	}
	// Only the winner of the compare-and-set gets here: the run settles once.
	r.finish(rec, true, runInterrupted, res)
	return c.JSON(fiber.Map{"object": "hermes.run.unknown_resolution", "run_id": r.id, "status": runInterrupted, "session_id": rec.SessionID,
		"admission_id": rec.AdmissionID, "execution_generation": rec.Generation, "resolved": true})
}
