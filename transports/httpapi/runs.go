package httpapi

import (
	"context"
	"encoding/json"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/runs"
	"github.com/hermes-go/hermes/transports/httpapi/runsapi"
)

// runsHost is what /v1/runs (package runsapi) takes from this server.
type runsHost struct{ s *Server }

func (runsHost) Principal(c *fiber.Ctx) string            { return principal(c) }
func (runsHost) Who(c *fiber.Ctx) engine.Principal        { return who(c) }
func (runsHost) Trace(c *fiber.Ctx) trace.SpanContext     { return requestTrace(c) }
func (h runsHost) PickModel(name string) (string, error)  { return h.s.pickModel(name) }
func (runsHost) Text(raw json.RawMessage) (string, error) { return flatten(raw, 0) }
func (runsHost) ToolLabel(args json.RawMessage) string    { return toolLabel(args) }
func (h runsHost) Streaming() func()                      { return h.s.streaming() }
func (h runsHost) Rejected(reason string)                 { h.s.rejected(reason) }
func (runsHost) Input(raw json.RawMessage, now time.Time) ([]engine.Row, string, error) {
	return parseInput(raw, now)
}

func (h runsHost) OpenOrSeed(ctx context.Context, p engine.Principal, id, model, key string, history []engine.Row) (*engine.Session, error) {
	return h.s.openOrSeed(ctx, p, id, model, key, history)
}

// StartTurn starts a run's turn on this surface. Once the run is claimed, its owner owns the
// turn's browser tool calls (until the turn ends), even after a restart; requests the turn
// opens stay open for the run's clients to answer.
func (h runsHost) StartTurn(ctx context.Context, sess *engine.Session, p engine.Prompt, owner string, sc trace.SpanContext) (runsapi.Turn, error) {
	s := h.s
	claim := p.Claim
	p.Origin = Surface
	p.Claim = func(ctx context.Context, turnID string) error {
		if err := claim(ctx, turnID); err != nil {
			return err
		}
		s.browser.own(withPrincipal(s.ctx, owner), sess.ID(), turnID)
		return nil
	}
	tr, err := startTurn(withTrace(ctx, sc), sess, p, s.opts.KeepAlive)
	if err != nil {
		return nil, err
	}
	turnID := tr.turnID
	tr.keep, tr.release = true, func() { s.browser.unbind(sess.ID(), turnID) }
	return runTurn{s: s, tr: tr}, nil
}

// AdoptedTurn is a run's turn this process adopted from one that went away while it waited for
// an approval; requests stay open for the run's clients to answer.
func (h runsHost) AdoptedTurn(sess *engine.Session, f *engine.Follow, turnID string) runsapi.Turn {
	return runTurn{s: h.s, tr: &turnRun{sess: sess, f: f, turnID: turnID, quiet: h.s.opts.KeepAlive, keep: true}}
}

// runTurn is a run's turn, followed by the server's one pump.
type runTurn struct {
	s  *Server
	tr *turnRun
}

func (t runTurn) ID() string              { return t.tr.turnID }
func (t runTurn) Interrupt(reason string) { t.tr.f.Interrupt(reason) }
func (t runTurn) Close(reason string)     { t.tr.close(reason) }

func (t runTurn) Follow(onEvent func(engine.Event)) (engine.Outcome, error) {
	err := t.s.pump(t.tr, nil, func(ev engine.Event) bool {
		onEvent(ev)
		return false // the run's log is its own: nothing to flush
	}, nil)
	return t.tr.out, err
}

// idempotencyRetention is how long a keyed chat completion or response is replayed: as long as
// a settled run's record (and so its Idempotency-Key) is kept.
const idempotencyRetention = runs.Retention

func sha256Hex(s string) string { return runs.SHA256Hex(s) }
