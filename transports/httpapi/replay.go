package httpapi

import (
	"context"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/engine"
)

// Client retries and Idempotency-Key on chat completions and responses.
//
// The SDKs retry some failures on their own, and the AI SDK and LangChain do so whatever the
// server says (they ignore x-should-retry). A turn that failed may already have run tools, so
// a retry must not start another turn. Two rules make sure it does not:
//
//   - A turn that started and failed is answered 409 turn_failed (interrupted turns keep 502),
//     with x-should-retry: false. LangChain does not retry a 409, and the OpenAI SDKs honour
//     the header; go-openai never retries.
//   - The answer of such a turn is remembered for replayWindow under the request's
//     fingerprint: the principal, the route, the session headers and the exact body. The same
//     request again within the window (the AI SDK retries a 409 twice) gets the same answer,
//     marked X-Hermes-Replayed: true, and starts nothing. A client that wants a new attempt
//     changes the request (any byte of the body) or waits out the window.
//
// With an Idempotency-Key the answer of every turn (completed or not, streamed or not) is
// kept for idempotencyRetention and replayed for the same key and body, also marked
// Idempotency-Replayed: true; the same key with another body is a 409, and a key whose first
// request is still running is a 409 idempotency_key_in_progress. These records live in the
// process's memory (at most maxReplays of each kind); the durable keys of /v1/runs are kept
// in the store.
const (
	replayWindow = 10 * time.Minute
	maxReplays   = 4096
)

// answer is what a finished request produced: enough to render the same reply again.
type answer struct {
	out engine.Outcome
	id  string // chat completion id
	// created is the chat completion's creation time.
	created int64
	model   string
	rb      *respBuilder // responses: the ids of the response
	// sessionID and sessionKey are the X-Hermes-Session-Id and -Key the reply carried; a
	// replay carries them again.
	sessionID, sessionKey string
}

type replayEntry struct {
	fp   string
	at   time.Time
	done bool
	ans  answer
}

// replayBook holds the remembered answers of one server.
type replayBook struct {
	mu     sync.Mutex
	failed map[string]*replayEntry // by fingerprint
	keyed  map[string]*replayEntry // by owner, route and Idempotency-Key
}

// attempt is one chat or responses request under the replay rules. Its handler calls finish
// with the turn's answer, or abandon when no turn started.
type attempt struct {
	book *replayBook
	fp   string
	key  string       // keyed entry's map key; "" without Idempotency-Key
	prev *replayEntry // a remembered answer to replay instead of running a turn
	// sessionID and sessionKey are the session headers of the reply, recorded with its answer.
	sessionID, sessionKey string
}

// begin looks the request up. With a remembered answer it returns an attempt whose prev is
// set; with a conflicting or running Idempotency-Key an error.
func (s *Server) begin(c *fiber.Ctx) (*attempt, error) {
	b := &s.replays
	fp := sha256Hex(principal(c) + "\n" + c.Path() + "\n" + c.Get(HeaderSessionID) + "\n" + c.Get(HeaderSessionKey) + "\n" + string(c.Body()))
	at := &attempt{book: b, fp: fp}
	ikey := c.Get("Idempotency-Key")
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failed == nil {
		b.failed, b.keyed = map[string]*replayEntry{}, map[string]*replayEntry{}
	}
	if ikey != "" {
		if err := validIdempotencyKey(ikey); err != nil {
			return nil, err
		}
		at.key = principal(c) + "\n" + c.Path() + "\n" + sha256Hex(ikey)
		e, ok := b.keyed[at.key]
		if ok && now.Sub(e.at) > idempotencyRetention && e.done {
			delete(b.keyed, at.key)
			ok = false
		}
		switch {
		case !ok:
			prune(b.keyed, idempotencyRetention, now)
			b.keyed[at.key] = &replayEntry{fp: fp, at: now}
		case e.fp != fp:
			return nil, &apiError{Status: fiber.StatusConflict, Message: "Idempotency-Key was used with a different request", Type: "invalid_request_error", Param: "Idempotency-Key", Code: "idempotency_key_conflict", NoRetry: true}
		case !e.done:
			return nil, &apiError{Status: fiber.StatusConflict, Message: "a request with this Idempotency-Key is still running; retry it once that one has answered", Type: "invalid_request_error", Param: "Idempotency-Key", Code: "idempotency_key_in_progress"}
		default:
			at.prev = e
		}
		return at, nil
	}
	if e, ok := b.failed[fp]; ok {
		if now.Sub(e.at) <= replayWindow {
			at.prev = e
		} else {
			delete(b.failed, fp)
		}
	}
	return at, nil
}

// prune drops entries older than ttl (finished ones only) and, past maxReplays, the oldest
// finished ones.
func prune(m map[string]*replayEntry, ttl time.Duration, now time.Time) {
	if len(m) < maxReplays {
		return
	}
	var oldestKey string
	var oldest time.Time
	for k, e := range m {
		if !e.done {
			continue
		}
		if now.Sub(e.at) > ttl {
			delete(m, k)
			continue
		}
		if oldestKey == "" || e.at.Before(oldest) {
			oldestKey, oldest = k, e.at
		}
	}
	if len(m) >= maxReplays && oldestKey != "" {
		delete(m, oldestKey)
	}
}

// session sets the session headers of the reply (c) and records them for a replay.
func (a *attempt) session(c *fiber.Ctx, id, key string) {
	a.sessionID, a.sessionKey = id, key
	c.Set(HeaderSessionID, id)
	if key != "" {
		c.Set(HeaderSessionKey, key)
	}
}

// abandon is called when no turn started (the request was refused): a retry may run.
func (a *attempt) abandon() {
	if a == nil || a.key == "" || a.prev != nil {
		return
	}
	a.book.mu.Lock()
	defer a.book.mu.Unlock()
	if e, ok := a.book.keyed[a.key]; ok && !e.done {
		delete(a.book.keyed, a.key)
	}
}

// finish records the answer of a turn that ran.
func (a *attempt) finish(ans answer) {
	if a == nil || a.prev != nil {
		return
	}
	ans.sessionID, ans.sessionKey = a.sessionID, a.sessionKey
	now := time.Now()
	a.book.mu.Lock()
	defer a.book.mu.Unlock()
	if a.key != "" {
		if e, ok := a.book.keyed[a.key]; ok {
			e.done, e.ans, e.at = true, ans, now
		}
		return
	}
	if !failedTurn(ans.out) {
		return // completed, or interrupted (by a client that left or a stopping server): a new request may run
	}
	prune(a.book.failed, replayWindow, now)
	a.book.failed[a.fp] = &replayEntry{fp: a.fp, at: now, done: true, ans: ans}
}

// replayed marks a response that repeats a remembered answer, sets the session headers the
// first reply carried, and returns a finished turn to render it with.
func (a *attempt) replayed(c *fiber.Ctx) *turnRun {
	c.Set("X-Hermes-Replayed", "true")
	if a.key != "" {
		c.Set("Idempotency-Replayed", "true")
	}
	if ans := a.prev.ans; ans.sessionID != "" {
		a.session(c, ans.sessionID, ans.sessionKey)
	}
	return finishedRun(a.prev.ans.out)
}

// finishedRun is a turn that is already over with outcome o (a replay, or a slash command
// answered without a turn): the renderers read it like a live one.
func finishedRun(o engine.Outcome) *turnRun {
	return &turnRun{closed: true, done: true, out: o}
}

// outcomeOf waits for the outcome of a turn its follower left before the end (the client went
// away), so the attempt records what the turn really did.
func (s *Server) outcomeOf(run *turnRun) engine.Outcome {
	if run.done || run.sess == nil {
		return run.out
	}
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	out, err := run.sess.Wait(ctx, run.turnID)
	if err != nil {
		return engine.Outcome{TurnID: run.turnID, Status: engine.StatusCancelled, Interrupted: true, ExitReason: "client disconnected"}
	}
	return out
}

// failedTurn reports whether o is a turn that failed (not one that was interrupted): the turn
// answered 409 turn_failed and replayed for replayWindow.
func failedTurn(o engine.Outcome) bool {
	return o.Status == engine.StatusFailed && !o.Interrupted
}
