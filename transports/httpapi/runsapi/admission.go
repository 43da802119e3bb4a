package runsapi

import (
	"time"

	"github.com/hermes-go/hermes/engine/runs"
)

// Durable admission lives in the engine's runs ledger (engine/runs): every run is recorded
// before it is acknowledged and on every change of its durable status, in its session's FIFO,
// with its Idempotency-Key claim, all compare-and-set in the store, so the processes sharing a
// store agree on them and a process that comes back after a crash knows where each run stands.
// This package keeps what it streams: a run's event log and its HTTP views.

// runRecord is the durable state of one run.
type runRecord = runs.Record

// sweepEvery is how often expired records and keys are dropped.
const sweepEvery = time.Hour

// Durable statuses. running also covers waiting_for_approval and stopping, which only the
// process executing the run can observe.
const (
	recQueued  = runs.Queued
	recRunning = runs.Running
)

func sha256Hex(s string) string { return runs.SHA256Hex(s) }
