package engine

import (
	"errors"
	"fmt"
)

// Sentinel errors. Transports map them to wire codes in exactly one function each.
var (
	ErrSessionNotFound = errors.New("session not found")
	ErrSessionClosed   = errors.New("session closed")
	ErrEmptyPrompt     = errors.New("prompt text is empty")
	ErrBusy            = errors.New("session busy") // a truncating or IfIdle submit while a turn runs (never queued)
	ErrNotRunning      = errors.New("no turn is running")
	ErrEmptySteer      = errors.New("steer text is empty")
	ErrUnknownRequest  = errors.New("no open request with that id")
	ErrInvalidAnswer   = errors.New("invalid answer for request")
	ErrUnknownTurn     = errors.New("unknown turn")
	ErrInvalidModel    = errors.New("invalid model name")
	ErrEngineClosed    = errors.New("engine closed")
	ErrNothingToBranch = errors.New("nothing to branch — send a message first")
	ErrInvalidCwd      = errors.New("invalid cwd")

	// Rewind (truncating submit) refusals; nothing is written when one is returned.
	ErrTruncateNoTarget  = errors.New("confirm_truncate requires truncate_before_user_ordinal or truncate_before_row_id")
	ErrTruncateConsent   = errors.New("truncation parameters require confirm_truncate=true; an ordinary prompt must not drop session history")
	ErrTruncateStale     = errors.New("target user message is no longer in session history")
	ErrTruncateMismatch  = errors.New("truncate_before_user_ordinal does not match the truncate_before_row_id target turn")
	ErrTruncateEmpty     = errors.New("truncation would erase the entire session transcript; resubmit with confirm_empty_truncate=true if this is intended")
	ErrTruncateOrdinal   = errors.New("ordinal-only truncation is unsafe for durable session history; include truncate_before_row_id")
	ErrRequestTimeout    = errors.New("request timed out")
	ErrRequestWithdrawn  = errors.New("request withdrawn")
	ErrDelegateLimit     = errors.New("delegation limit reached")
	ErrNoInteractiveUser = errors.New("no client can answer requests")
)

// ErrSessionReleased is returned by a session object the engine released while it was idle
// (Engine.ReleaseIdle). The session itself is not closed: Engine.Open loads it again. It
// matches ErrSessionClosed too, so a surface that does not know about releases treats the
// stale object as closed.
var ErrSessionReleased = fmt.Errorf("%w: released while idle; open it again", ErrSessionClosed)
