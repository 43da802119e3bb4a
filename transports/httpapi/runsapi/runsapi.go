// Package runsapi serves /v1/runs: a run is one agent turn admitted by POST /v1/runs and
// followed by polling or an event stream; it outlives the request that admitted it, and its
// admission outlives the process. The ledger and the sessions' lanes (engine/runs) are the
// truth of admission order, claims and settlements; this package keeps each run's event log
// and its HTTP views, and mirrors the runs other processes on the store admit or execute.
//
// The HTTP server mounts the handlers and hands the package what only it knows (Host): who
// the caller is, how a prompt is parsed and a session opened, and how a turn is started and
// followed.
package runsapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/runs"
)

// Host is what the runs take from the HTTP server that mounts them.
type Host interface {
	// Principal is the key digest of the request's principal (a run belongs to it); Who is the
	// principal sessions are checked against.
	Principal(c *fiber.Ctx) string
	Who(c *fiber.Ctx) engine.Principal
	// Trace is the W3C trace context the request arrived with (the zero one without).
	Trace(c *fiber.Ctx) trace.SpanContext
	// PickModel resolves a model a request names.
	PickModel(name string) (string, error)
	// Input parses a run's input as /v1/responses does: the conversation before the prompt,
	// and the prompt. Text reads steer text (a string or text parts).
	Input(raw json.RawMessage, now time.Time) (history []engine.Row, prompt string, err error)
	Text(raw json.RawMessage) (string, error)
	// ToolLabel previews a tool call's arguments for tool.started.
	ToolLabel(args json.RawMessage) string
	// OpenOrSeed opens session id for p, or creates it with history; another principal's
	// session is not found.
	OpenOrSeed(ctx context.Context, p engine.Principal, id, model, key string, history []engine.Row) (*engine.Session, error)
	// StartTurn submits a run's prompt to sess (a durable admission: p.Claim claims the run
	// when its turn comes) and returns the turn. owner is the key digest of the run's
	// principal, which owns the turn's browser tool calls; sc is the admitting request's
	// trace context.
	StartTurn(ctx context.Context, sess *engine.Session, p engine.Prompt, owner string, sc trace.SpanContext) (Turn, error)
	// AdoptedTurn is the turn turnID this process adopted (engine.Adopter), followed by f.
	AdoptedTurn(sess *engine.Session, f *engine.Follow, turnID string) Turn
	// Streaming counts an event stream until the returned function is called; Rejected is
	// told of an admission refused by the concurrency cap.
	Streaming() (done func())
	Rejected(reason string)
}

// Turn is a run's turn, as the server follows it.
type Turn interface {
	ID() string
	// Follow hands each event of the turn to onEvent until the turn ends, and returns its
	// outcome; an error is what ended the follow first (the server stopping).
	Follow(onEvent func(engine.Event)) (engine.Outcome, error)
	Interrupt(reason string)
	// Close detaches from the turn, interrupting it when it still runs.
	Close(reason string)
}

// Config configures the runs of one server.
type Config struct {
	Engine *engine.Engine
	Host   Host
	Log    *slog.Logger
	// KeepAlive is how long a run's event stream may stay silent before a comment line is sent.
	KeepAlive time.Duration
	// Slots is the concurrency cap the server's turns share (nil: uncapped): a run takes a slot
	// when it starts and gives it back when its turn ends.
	Slots chan struct{}
}

// Runs is /v1/runs on one server: this process's view of the runs (the runs it admitted,
// executes or was asked about, each with its event log) over the ledger, and one lane per
// session with unsettled runs.
type Runs struct {
	ctx       context.Context
	eng       *engine.Engine
	host      Host
	log       *slog.Logger
	keepAlive time.Duration
	slots     chan struct{}
	ledger    *runs.Ledger
	lanes     *runs.Lanes // one worker per session with unsettled runs
	streams   sync.WaitGroup

	mu      sync.Mutex
	m       map[string]*run
	pruned  time.Time       // when addLocked last dropped expired runs
	adopted map[string]*run // by session: a run Adopt moved here, until Adopted follows it

	admit sync.Mutex // serialises keyed admissions here: look up, admit and remember as one step
}

// New opens the runs ledger on the engine's store and recovers it (see recovery.go); the runs
// stop when ctx ends, and Close waits for them.
func New(ctx context.Context, cfg Config) (*Runs, error) {
	rs := &Runs{ctx: ctx, eng: cfg.Engine, host: cfg.Host, log: cfg.Log, keepAlive: cfg.KeepAlive, slots: cfg.Slots, m: map[string]*run{}}
	if err := rs.init(); err != nil {
		return nil, err
	}
	return rs, nil
}

// Close waits, once ctx ended, for the runs' event streams and lanes, then closes the ledger:
// the runs this process left running are restart-unknown from then on.
func (rs *Runs) Close() {
	rs.eng.SetAdopter(nil)
	rs.streams.Wait()
	rs.lanes.Wait()
	rs.ledger.Close()
}

// Busy reports whether a session has unsettled runs in a lane here.
func (rs *Runs) Busy(sessionID string) bool { return rs.lanes.Busy(sessionID) }

// Hold marks a session's lane as busy until release is called; it is for tests of what a busy
// lane keeps.
func (rs *Runs) Hold(sessionID string) (release func()) { return rs.lanes.Hold(sessionID) }

// sees reports whether the request's principal may see a run admitted by the principal with
// key digest owner.
func (rs *Runs) sees(c *fiber.Ctx, owner string) bool {
	return rs.host.Who(c).Admin || owner == rs.host.Principal(c)
}

// release gives back the slot a run's turn took.
func (rs *Runs) release() {
	if rs.slots != nil {
		<-rs.slots
	}
}
