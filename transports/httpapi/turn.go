package httpapi

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
)

// Surface is the origin the OpenAI-compatible routes submit prompts with; approval and busy
// policies see it as ApprovalInput.Surface / BusyInput.Surface.
const Surface = "api"

// turnRun follows one turn of a session (engine.Session.Run).
type turnRun struct {
	sess    *engine.Session
	f       *engine.Follow
	quiet   time.Duration // silence after which next returns errSilent
	checked time.Time     // when follow last asked whether the client left
	keep    bool          // leave requests open for a client to answer (runs)
	release func()        // gives back the concurrency slot
	closed  bool
	turnID  string
	done    bool
	out     engine.Outcome
}

// errSilent is returned by next when the turn was quiet for turnRun.quiet.
var errSilent = errors.New("turn silent")

// peerCheck is how often follow asks a stream whether its client left.
const peerCheck = time.Second

// startTurn takes a slot of the concurrency cap and starts the turn. The slot is given back
// by turnRun.close.
func (s *Server) startTurn(ctx context.Context, sess *engine.Session, text string) (*turnRun, error) {
	if err := s.takeSlot(); err != nil {
		return nil, err
	}
	return s.startTurnHeld(ctx, sess, text)
}

// takeSlot takes a slot of the concurrency cap without waiting (429 when none is free).
func (s *Server) takeSlot() error {
	if s.slots != nil {
		select {
		case s.slots <- struct{}{}:
		default:
			s.rejected("turn_cap")
			return &wire.Error{Status: fiber.StatusTooManyRequests, Message: "too many agent turns in flight; retry shortly", Type: "rate_limit_error", Code: "rate_limit_exceeded", RetryAfter: 1}
		}
	}
	return nil
}

// startTurnHeld is startTurn for a caller that took the slot already (takeSlot); the slot is
// given back when the start fails.
func (s *Server) startTurnHeld(ctx context.Context, sess *engine.Session, text string) (*turnRun, error) {
	// The browser broker records whose request started the turn, so the turn's browser
	// tool calls reach that principal's controller only.
	r, err := s.browser.bind(ctx, sess, func() (*turnRun, error) {
		return startTurn(ctx, sess, engine.Prompt{Text: text, Origin: Surface}, s.opts.KeepAlive)
	})
	if err != nil {
		s.release()
		return nil, err
	}
	r.release = func() { s.browser.unbind(r.sess.ID(), r.turnID); s.release() }
	return r, nil
}

func (s *Server) release() {
	if s.slots != nil {
		<-s.slots
	}
}

// startTurn submits p to sess and follows the turn it starts. These routes answer one prompt
// with one turn: a session busy with another turn, in this process or in the one running the
// session, is a 409 and the prompt is dropped (engine.Prompt.IfIdle), also when the busy
// policy would have queued or steered it. A run's prompt (a durable admission,
// engine.Prompt.Claim) waits in the session's line for the turns before it instead.
func startTurn(ctx context.Context, sess *engine.Session, p engine.Prompt, quiet time.Duration) (*turnRun, error) {
	p.IfIdle = !p.InLine && p.Claim == nil
	adm, f, err := sess.Run(ctx, p)
	if errors.Is(err, engine.ErrBusy) && p.IfIdle {
		return nil, &wire.Error{Status: 409, Message: "session " + sess.ID() + " is busy with another turn", Type: "invalid_request_error", Code: "session_busy", NoRetry: true}
	}
	if err != nil {
		return nil, err
	}
	if adm.Status != engine.AdmitStarted {
		// A prompt the engine answered without a turn (a /model command).
		f.Close()
		return nil, &wire.Error{Status: 409, Message: "session " + sess.ID() + " is busy; the prompt was " + adm.Status, Type: "invalid_request_error", Code: "session_busy", NoRetry: true}
	}
	return &turnRun{sess: sess, f: f, turnID: adm.TurnID, quiet: quiet}, nil
}

// next returns the next event of the turn. A request the turn opens (approval, clarify,
// secret) is settled at once: these clients cannot answer one, and an approval left open
// would only time out. Approvals are denied, never granted; the run's approval policy is
// what allows commands on this surface. After message.complete, r.done is set and r.out holds
// the outcome.
func (r *turnRun) next(ctx context.Context) (engine.Event, error) { return r.follow(ctx, nil) }

// follow is next for a stream: when gone is not nil, it is asked about once every peerCheck,
// while the turn is quiet as well as while events come, whether the client closed the
// connection, and errClientGone is returned when it did. Without it a stream notices only a
// failed write, two or three writes after the client left: with a tool running, as many
// keep-alives.
func (r *turnRun) follow(ctx context.Context, gone func() bool) (engine.Event, error) {
	for {
		ev, err := r.wait(ctx, gone)
		if err != nil {
			return engine.Event{}, err
		}
		if ev.TurnID != r.turnID {
			continue // the session's own events, and requests of other turns, are not shown here
		}
		switch d := ev.Data.(type) {
		case engine.Request:
			if !r.keep {
				if d.Kind == engine.KindApproval {
					_ = r.sess.Answer(d.ID, map[string]any{"choice": engine.ChoiceDeny})
				} else {
					_ = r.sess.Withdraw(d.ID, wire.NoClient)
				}
			}
		case engine.Outcome:
			r.done, r.out = true, d
		}
		return ev, nil
	}
}

// wait returns the next event of the Follow, errSilent after r.quiet without one, or
// errClientGone once gone reports it (see follow).
func (r *turnRun) wait(ctx context.Context, gone func() bool) (engine.Event, error) {
	silent := time.Now().Add(r.quiet)
	for {
		d, check := time.Until(silent), false
		if gone != nil {
			if time.Since(r.checked) >= peerCheck {
				if gone() {
					return engine.Event{}, errClientGone
				}
				r.checked = time.Now()
			}
			if c := time.Until(r.checked.Add(peerCheck)); c < d {
				d, check = c, true
			}
		}
		nctx, cancel := context.WithTimeout(ctx, d)
		ev, err := r.f.Next(nctx)
		cancel()
		switch {
		case err == nil:
			return ev, nil
		case ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded):
			return engine.Event{}, err
		case !check:
			return engine.Event{}, errSilent
		}
	}
}

// close detaches (once; later calls do nothing); when the turn is still running (the client
// left, the server stops) it is interrupted first, because nobody will read its answer.
func (r *turnRun) close(reason string) {
	if r.closed {
		return
	}
	r.closed = true
	if !r.done {
		r.f.Interrupt(reason)
	}
	r.f.Close()
	if r.release != nil {
		r.release()
	}
}

// finish maps an outcome to a chat finish_reason. ok is false when the turn failed or was
// interrupted: the caller reports an error instead of (or after) the partial text. A turn the
// model ended by refusing (the engine records finish_reason=content_filter, e.g. Anthropic's
// "refusal") is content_filter.
func finish(o engine.Outcome) (reason string, ok bool) {
	switch {
	case o.Status == engine.StatusCompleted && o.Completed && !o.Partial:
		if strings.Contains(o.ExitReason, "finish_reason=content_filter") {
			return "content_filter", true
		}
		return "stop", true
	case o.Status != engine.StatusCancelled && (strings.Contains(o.ExitReason, "finish_reason=length") || strings.HasPrefix(o.ExitReason, "max_iterations_reached")):
		return "length", true
	}
	return "error", false
}

// derivedSessionID maps a stateless conversation (every request resends the history) to one
// session: the same system prompt and first user message give the same id. The id is keyed
// with the API key of the request (an HMAC), so only that key's holder can compute it: two
// principals sending the same conversation never meet in one session, and another principal
// can neither probe for a conversation by its content (a 409 on create, a 404 on chat) nor take
// its id first.
func derivedSessionID(key []byte, system, firstUser string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(system + "\n" + firstUser))
	return "api-" + hex.EncodeToString(m.Sum(nil)[:8])
}

// heldByOther reports whether session id exists (live or stored) and a principal other than p
// owns it. It loads nothing: another principal must not be able to keep a session in memory.
func (s *Server) heldByOther(p engine.Principal, id string) bool {
	if sess, ok := s.eng.Peek(id); ok {
		return !p.Sees(sess.Record().Principal)
	}
	rec, err := s.eng.Record(s.ctx, id)
	return err == nil && !p.Sees(rec.Principal)
}

// openOrSeed opens session id, or creates it for principal p and writes history (the
// conversation before the new prompt) into it, so the model sees what the client showed its
// user. A session of another principal is not found.
func (s *Server) openOrSeed(ctx context.Context, p engine.Principal, id, modelName, key string, history []engine.Row) (*engine.Session, error) {
	for attempt := 0; ; attempt++ {
		if s.heldByOther(p, id) { // refused before it is loaded
			return nil, sessionNotFound(id)
		}
		sess, err := s.eng.Open(ctx, id)
		if err == nil && !p.Sees(sess.Record().Principal) {
			return nil, sessionNotFound(id)
		}
		if err == nil || !errors.Is(err, engine.ErrSessionNotFound) {
			return sess, err
		}
		var meta map[string]string
		if key != "" {
			meta = map[string]string{"session_key": key}
		}
		sess, err = s.eng.Create(ctx, engine.CreateOptions{ID: id, Model: modelName, Source: Surface, Meta: meta, Principal: p.ID, History: history})
		if errors.Is(err, engine.ErrSessionExists) {
			if attempt == 0 {
				continue // created concurrently by an identical request
			}
			// Not openable yet taken: a deleted session keeps its id, and is gone.
			return nil, sessionNotFound(id)
		}
		if err != nil {
			return nil, err
		}
		return sess, nil
	}
}
