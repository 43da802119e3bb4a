package runsapi

import (
	"errors"
	"fmt"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/engine/runs"
	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
)

// init opens the runs ledger when the server is built: its change hints are followed from
// then on (another process's admissions, claims and settlements reach this one's mirrors and
// workers), then the ledger is recovered: expired records are dropped, a run a process that is
// gone left executing is restart-unknown and blocks its session's FIFO, and a run that was
// admitted but never started still runs. It also starts the sweeper.
func (rs *Runs) init() error {
	l, err := runs.Open(rs.ctx, rs.eng.Store())
	if err != nil {
		return fmt.Errorf("httpapi: opening the runs ledger: %w", err)
	}
	rs.ledger = l
	l.SetAdopt(rs.adoptRun)
	rs.eng.SetAdopter(rs)
	rs.lanes = runs.NewLanes(rs.ctx, l, rs.log, rs.laneFuncs())
	if err := rs.lanes.Follow(); err != nil {
		l.Close()
		return fmt.Errorf("httpapi: following the runs ledger: %w", err)
	}
	recs, err := l.Recover(rs.ctx, func(key string, err error) {
		rs.log.Warn("runs: skipping an unreadable run record", "key", key, "err", err)
	})
	if err != nil {
		l.Close()
		return fmt.Errorf("httpapi: reading run records: %w", err)
	}
	now := time.Now()
	for _, rec := range recs {
		if !rec.Settled() || now.Sub(rec.SettledAt) <= runRetention {
			rs.mirror(rec)
		}
	}
	rs.streams.Add(1)
	go func() {
		defer rs.streams.Done()
		t := time.NewTicker(sweepEvery)
		defer t.Stop()
		for {
			select {
			case <-rs.ctx.Done():
				return
			case now := <-t.C:
				if _, err := l.Sweep(rs.ctx, now); err != nil && rs.ctx.Err() == nil {
					rs.log.Warn("runs: sweeping expired run records failed", "err", err)
				}
			}
		}
	}()
	return nil
}

// recoveredRun rebuilds a run from its record, with its status; its log is derived from the
// record and the session's stored events when a client reads it (derive.go).
func (rs *Runs) recoveredRun(rec runRecord) *run {
	var r *run
	unknown := false
	if rec.Status == recRunning {
		rec, unknown = rs.ledger.Lapse(rs.ctx, rec) // lapsed just now: the record says when (unknownAt)
	}
	switch {
	case rec.Settled():
		r = newRun(rec, rec.Status)
		r.result = rec.Result
		r.updated = rec.SettledAt
	case unknown:
		r = newRun(rec, runUnknown)
		rs.log.Warn("runs: a run was executing when its process stopped; it is restart-unknown until resolved",
			"run_id", rec.RunID, "session_id", rec.SessionID, "admission_id", rec.AdmissionID, "execution_generation", rec.Generation)
	case rec.Status == recRunning:
		r = newRun(rec, runRunning)
	default:
		r = newRun(rec, runQueued)
	}
	return r
}

// resolvedReason is the exit reason of a restart-unknown run resolved as interrupted.
const resolvedReason = "interrupted_by_system(server_restart)"

// ResolveUnknown settles a restart-unknown run as interrupted, so its session's FIFO moves
// on. The caller must name the run's admission_id and execution_generation exactly as GET
// /v1/runs/{id} reports them; the check and the write are one compare-and-set, so of two
// concurrent resolutions exactly one succeeds. The run is never put back in the queue: its
// turn may have done its work before the restart, and repeating it is the client's call.
func (rs *Runs) ResolveUnknown(c *fiber.Ctx) error {
	r, err := rs.getRunFor(c, c.Params("id"))
	if err != nil {
		return err
	}
	var req struct {
		AdmissionID *string `json:"admission_id"`
		Generation  *int64  `json:"execution_generation"`
	}
	if err := wire.DecodeJSON(c.Body(), &req); err != nil {
		return err
	}
	if req.AdmissionID == nil || *req.AdmissionID == "" {
		return wire.BadRequest("admission_id", "missing_admission_id", "Missing required parameter: 'admission_id' (as GET /v1/runs/{run_id} reports it)")
	}
	if req.Generation == nil {
		return wire.BadRequest("execution_generation", "missing_execution_generation", "Missing required parameter: 'execution_generation' (an integer, as GET /v1/runs/{run_id} reports it)")
	}
	res := map[string]any{"completed": false, "partial": false, "interrupted": true,
		"turn_exit_reason": resolvedReason, "error": msgRestarted}
	rec, err := rs.ledger.ResolveUnknown(rs.storeCtx(), r.id, *req.AdmissionID, *req.Generation, res)
	switch {
	case errors.Is(err, runs.ErrNotUnknown):
		return &wire.Error{Status: fiber.StatusConflict, Message: "run " + r.id + " is " + r.getStatus() + ", not restart-unknown", Type: "invalid_request_error", Code: "run_not_unknown", NoRetry: true}
	case errors.Is(err, runs.ErrAdmissionMismatch):
		return &wire.Error{Status: fiber.StatusConflict, Message: "admission_id and execution_generation must be exactly the run's (see GET /v1/runs/" + r.id + ")", Type: "invalid_request_error", Param: "execution_generation", Code: "admission_mismatch", NoRetry: true}
	case errors.Is(err, runs.ErrNotFound):
		return runNotFound(r.id)
	case err != nil:
		return err
	}
	// Only the winner of the compare-and-set gets here: the run settles once, its log after
	// what its turn stored (derive.go).
	rs.refresh(r, rec)
	rs.derive(r)
	return c.JSON(fiber.Map{"object": "hermes.run.unknown_resolution", "run_id": r.id, "status": runInterrupted, "session_id": rec.SessionID,
		"admission_id": rec.AdmissionID, "execution_generation": rec.Generation, "resolved": true})
}
