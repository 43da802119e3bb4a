package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
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
// request is still running is a 409 idempotency_key_in_progress.
//
// Both memories are durable settings in the engine's store (kvReplayFailed + fingerprint,
// kvReplayKey + hash of principal, route and key), so a retry that reaches another `hermes
// serve` on the same home, or the same server after a restart, is answered the same way and
// never runs the turn again. A request with a key claims it with an atomic swap before its turn
// starts (one winner among processes racing on the key); while it runs its server renews the
// claim every replayBeat, and a claim not renewed for replayStale (its process is gone) may be
// taken over by a retry. Expired records are dropped at most once a minute by a server that
// records one, and each memory keeps at most maxReplays finished records (the oldest go first).
const (
	replayWindow = 10 * time.Minute
	maxReplays   = 4096
	replayBeat   = 30 * time.Second
	replayStale  = 2 * time.Minute

	kvReplayFailed = "httpapi/replay/failed/"
	kvReplayKey    = "httpapi/replay/key/"
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

// replayRecord is a replayEntry as it is stored.
type replayRecord struct {
	FP    string        `json:"fp"`
	At    time.Time     `json:"at"`              // claimed, or finished
	Beat  time.Time     `json:"beat,omitzero"`   // running: last renewal of the claim
	Claim string        `json:"claim,omitempty"` // running: the claiming request
	Done  bool          `json:"done"`
	Ans   *storedAnswer `json:"answer,omitempty"`
}

type storedAnswer struct {
	Out        engine.Outcome `json:"outcome"`
	ID         string         `json:"id,omitempty"`
	Created    int64          `json:"created,omitempty"`
	Model      string         `json:"model,omitempty"`
	Resp       *storedResp    `json:"response,omitempty"`
	SessionID  string         `json:"session_id,omitempty"`
	SessionKey string         `json:"session_key,omitempty"`
}

// storedResp is a respBuilder as it is stored.
type storedResp struct {
	ID           string  `json:"id"`
	MsgID        string  `json:"msg_id"`
	Model        string  `json:"model"`
	Prev         string  `json:"prev,omitempty"`
	Conv         string  `json:"conv,omitempty"`
	SessionID    string  `json:"session_id,omitempty"`
	Owner        string  `json:"owner,omitempty"`
	Created      int64   `json:"created"`
	Store        bool    `json:"store"`
	Instructions *string `json:"instructions,omitempty"`
}

func storeAnswer(a answer) *storedAnswer {
	out := &storedAnswer{Out: a.out, ID: a.id, Created: a.created, Model: a.model, SessionID: a.sessionID, SessionKey: a.sessionKey}
	if rb := a.rb; rb != nil {
		out.Resp = &storedResp{ID: rb.id, MsgID: rb.msgID, Model: rb.model, Prev: rb.prev, Conv: rb.conv, SessionID: rb.sessionID, Owner: rb.owner, Created: rb.created, Store: rb.store, Instructions: rb.instructions}
	}
	return out
}

func (r *replayRecord) entry() *replayEntry {
	e := &replayEntry{fp: r.FP, at: r.At, done: r.Done}
	if a := r.Ans; a != nil {
		e.ans = answer{out: a.Out, id: a.ID, created: a.Created, model: a.Model, sessionID: a.SessionID, sessionKey: a.SessionKey}
		if rb := a.Resp; rb != nil {
			e.ans.rb = &respBuilder{id: rb.ID, msgID: rb.MsgID, model: rb.Model, prev: rb.Prev, conv: rb.Conv, sessionID: rb.SessionID, owner: rb.Owner, created: rb.Created, store: rb.Store, instructions: rb.Instructions}
		}
	}
	return e
}

// replayBook is a server's bookkeeping of the durable memories: when it last dropped expired
// records.
type replayBook struct {
	mu     sync.Mutex
	pruned time.Time
}

// attempt is one chat or responses request under the replay rules. Its handler calls finish
// with the turn's answer, or abandon when no turn started.
type attempt struct {
	s    *Server
	fp   string
	key  string       // the keyed record's setting; "" without Idempotency-Key
	prev *replayEntry // a remembered answer to replay instead of running a turn
	// sessionID and sessionKey are the session headers of the reply, recorded with its answer.
	sessionID, sessionKey string

	// The claim on the key while the request runs: cur is the stored claim (renewed by the
	// beat goroutine), stop ends the renewals.
	mu      sync.Mutex
	cur     []byte
	rec     replayRecord
	stop    chan struct{}
	beats   sync.WaitGroup
	settled bool
}

var (
	errKeyConflict   = &wire.Error{Status: fiber.StatusConflict, Message: "Idempotency-Key was used with a different request", Type: "invalid_request_error", Param: "Idempotency-Key", Code: "idempotency_key_conflict", NoRetry: true}
	errKeyInProgress = &wire.Error{Status: fiber.StatusConflict, Message: "a request with this Idempotency-Key is still running; retry it once that one has answered", Type: "invalid_request_error", Param: "Idempotency-Key", Code: "idempotency_key_in_progress"}
)

// begin looks the request up. With a remembered answer it returns an attempt whose prev is
// set; with a conflicting or running Idempotency-Key an error. With a new key it claims it.
func (s *Server) begin(c *fiber.Ctx) (*attempt, error) {
	fp := sha256Hex(principal(c) + "\n" + c.Path() + "\n" + c.Get(HeaderSessionID) + "\n" + c.Get(HeaderSessionKey) + "\n" + string(c.Body()))
	at := &attempt{s: s, fp: fp}
	ikey := c.Get("Idempotency-Key")
	if ikey == "" {
		raw, err := s.eng.Setting(s.ctx, kvReplayFailed+fp)
		if errors.Is(err, engine.ErrNotFound) {
			return at, nil
		}
		if err != nil {
			return nil, err
		}
		var rec replayRecord
		if json.Unmarshal(raw, &rec) == nil && rec.Done && rec.FP == fp && time.Since(rec.At) <= replayWindow {
			at.prev = rec.entry()
		}
		return at, nil
	}
	if err := wire.ValidIdempotencyKey(ikey); err != nil {
		return nil, err
	}
	at.key = kvReplayKey + sha256Hex(principal(c)+"\n"+c.Path()+"\n"+ikey)
	for range 8 { // a lost swap means another request just wrote the key: look again
		raw, err := s.eng.Setting(s.ctx, at.key)
		if err != nil && !errors.Is(err, engine.ErrNotFound) {
			return nil, err
		}
		now := time.Now()
		var rec replayRecord
		if raw != nil && json.Unmarshal(raw, &rec) == nil {
			expired := rec.Done && now.Sub(rec.At) > idempotencyRetention || !rec.Done && now.Sub(rec.Beat) > replayStale
			switch {
			case expired:
			case rec.FP != fp:
				return nil, errKeyConflict
			case !rec.Done:
				return nil, errKeyInProgress
			default:
				at.prev = rec.entry()
				return at, nil
			}
		}
		claim := replayRecord{FP: fp, At: now, Beat: now, Claim: wire.NewHex(12)}
		b, err := json.Marshal(claim)
		if err != nil {
			return nil, err
		}
		won, err := s.eng.SwapSetting(s.ctx, at.key, raw, b)
		if err != nil {
			return nil, err
		}
		if won {
			at.cur, at.rec, at.stop = b, claim, make(chan struct{})
			at.beats.Add(1)
			go at.beat()
			return at, nil
		}
	}
	return nil, errKeyInProgress
}

// beat renews the claim on the key until the request settles (or the server stops), so other
// servers see it running rather than abandoned.
func (a *attempt) beat() {
	defer a.beats.Done()
	t := time.NewTicker(replayBeat)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-a.s.ctx.Done():
			return
		case <-t.C:
		}
		a.mu.Lock()
		next := a.rec
		next.Beat = time.Now()
		b, err := json.Marshal(next)
		if err == nil {
			var won bool
			if won, err = a.s.eng.SwapSetting(a.s.ctx, a.key, a.cur, b); err == nil && won {
				a.cur, a.rec = b, next
			} else if err == nil {
				a.mu.Unlock()
				return // taken over: the claim is no longer this request's
			}
		}
		a.mu.Unlock()
		if err != nil {
			a.s.log.Warn("httpapi: Idempotency-Key claim not renewed", "err", err)
		}
	}
}

// settle stops the renewals and swaps the claim for next (nil removes it), once.
func (a *attempt) settle(next []byte) {
	a.mu.Lock()
	if a.settled {
		a.mu.Unlock()
		return
	}
	a.settled = true
	a.mu.Unlock()
	close(a.stop)
	a.beats.Wait()
	a.mu.Lock()
	defer a.mu.Unlock()
	won, err := a.s.eng.SwapSetting(context.WithoutCancel(a.s.ctx), a.key, a.cur, next)
	if err != nil || !won {
		a.s.log.Warn("httpapi: Idempotency-Key record not settled", "won", won, "err", err)
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
	a.settle(nil)
}

// finish records the answer of a turn that ran.
func (a *attempt) finish(ans answer) {
	if a == nil || a.prev != nil {
		return
	}
	ans.sessionID, ans.sessionKey = a.sessionID, a.sessionKey
	now := time.Now().UTC()
	rec := replayRecord{FP: a.fp, At: now, Done: true, Ans: storeAnswer(ans)}
	b, err := json.Marshal(rec)
	if err != nil {
		a.s.log.Warn("httpapi: answer not remembered", "err", err)
		return
	}
	switch {
	case a.key != "" && wire.StoreOutage(ans.out):
		a.settle(nil) // answered 503: a retry with the key runs again
	case a.key != "":
		a.settle(b)
	case failedTurn(ans.out):
		if err := a.s.eng.PutSetting(context.WithoutCancel(a.s.ctx), kvReplayFailed+a.fp, b); err != nil {
			a.s.log.Warn("httpapi: failed turn not remembered", "err", err)
		}
	default:
		return // completed, or interrupted (by a client that left or a stopping server): a new request may run
	}
	a.s.pruneReplays(now)
}

// pruneReplays drops expired records of both memories, and the oldest finished ones past
// maxReplays, at most once a minute.
func (s *Server) pruneReplays(now time.Time) {
	s.replays.mu.Lock()
	if now.Sub(s.replays.pruned) < time.Minute {
		s.replays.mu.Unlock()
		return
	}
	s.replays.pruned = now
	s.replays.mu.Unlock()
	ctx := context.WithoutCancel(s.ctx)
	for _, m := range []struct {
		prefix string
		ttl    time.Duration
	}{{kvReplayFailed, replayWindow}, {kvReplayKey, idempotencyRetention}} {
		all, err := s.eng.Settings(ctx, m.prefix)
		if err != nil {
			s.log.Warn("httpapi: replay records not pruned", "err", err)
			continue
		}
		type kept struct {
			key string
			raw []byte
			at  time.Time
		}
		var done []kept
		for k, raw := range all {
			var rec replayRecord
			if json.Unmarshal(raw, &rec) != nil {
				continue
			}
			switch {
			case rec.Done && now.Sub(rec.At) > m.ttl, !rec.Done && now.Sub(rec.Beat) > m.ttl+replayStale:
				_, _ = s.eng.SwapSetting(ctx, k, raw, nil)
			case rec.Done:
				done = append(done, kept{k, raw, rec.At})
			}
		}
		if len(done) > maxReplays {
			slices.SortFunc(done, func(x, y kept) int { return x.at.Compare(y.at) })
			for _, d := range done[:len(done)-maxReplays] {
				_, _ = s.eng.SwapSetting(ctx, d.key, d.raw, nil)
			}
		}
	}
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

// failedTurn reports whether o is a turn that failed (not one that was interrupted, nor one a
// store outage ended: that is a 503 to retry): the turn answered 409 turn_failed and replayed
// for replayWindow.
func failedTurn(o engine.Outcome) bool {
	return o.Status == engine.StatusFailed && !o.Interrupted && !wire.StoreOutage(o)
}
