package gateway

import (
	"errors"
	"fmt"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/transports/jsonrpc"
)

// Gateway error codes (the reference's per-method codes).
const (
	codeUnknownParam   = 4000
	codeNoSession      = 4001
	codeInvalidArg     = 4002
	codeArgv           = 4003
	codeRewindInvalid  = 4004
	codeIDRequired     = 4006
	codeStoredNotFound = 4007
	codeNothingBranch  = 4008
	codeBusy           = 4009
	codeTextRequired   = 4012
	codePathRequired   = 4015
	codeBadImage       = 4016
	codeRewindStale    = 4018
	codeTitleRequired  = 4021
	codeTitleInvalid   = 4022
	codeRewindEmpty    = 4028
	codeRewindConsent  = 4029
	codeRewindMismatch = 4030
	codeNoProcess      = 4044
	codeFailed         = 5000
	codeStore          = 5006
	codeTitleStore     = 5007
	codeBranchFailed   = 5008
)

func rpcErr(code int, format string, a ...any) *jsonrpc.Error {
	return &jsonrpc.Error{Code: code, Message: fmt.Sprintf(format, a...)}
}

// toWire maps an engine error to the wire, in one place. method decides codes that differ per
// method.
func toWire(method string, err error) error {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return we
	}
	msg := err.Error()
	var mm *engine.ModelMismatchError
	var mn *engine.ModelNameError
	switch {
	case errors.As(err, &mm): // a refused model name carries {model, provider, suggestions}
		return modelErr(mm.Model, mm.Provider, mm.Mismatch.Error(), mm.Suggestions)
	case errors.As(err, &mn):
		return modelErr(mn.Model, mn.Provider, mn.Error(), mn.Suggestions)
	case errors.Is(err, engine.ErrSessionNotFound):
		if method == "session.resume" {
			return rpcErr(codeStoredNotFound, "session not found")
		}
		return rpcErr(codeNoSession, "session not found")
	case errors.Is(err, engine.ErrBusy):
		return rpcErr(codeBusy, "session busy — interrupt the current turn first")
	case errors.Is(err, engine.ErrTruncateConsent):
		return rpcErr(codeRewindConsent, "%s", msg)
	case errors.Is(err, engine.ErrTruncateNoTarget), errors.Is(err, engine.ErrTruncateOrdinal):
		return rpcErr(codeRewindInvalid, "%s", msg)
	case errors.Is(err, engine.ErrTruncateStale):
		return rpcErr(codeRewindStale, "%s", msg)
	case errors.Is(err, engine.ErrTruncateMismatch):
		return rpcErr(codeRewindMismatch, "%s", msg)
	case errors.Is(err, engine.ErrTruncateEmpty):
		return rpcErr(codeRewindEmpty, "%s", msg)
	case errors.Is(err, engine.ErrEmptyPrompt):
		return rpcErr(codeInvalidArg, "text is required")
	case errors.Is(err, engine.ErrEmptySteer):
		return rpcErr(codeInvalidArg, "text is required")
	case errors.Is(err, engine.ErrNothingToBranch):
		return rpcErr(codeNothingBranch, "nothing to branch — send a message first")
	case errors.Is(err, engine.ErrSessionClosed):
		return rpcErr(codeNoSession, "session closed")
	case errors.Is(err, model.ErrUnknownProvider), errors.Is(err, engine.ErrInvalidModel), errors.Is(err, engine.ErrInvalidCwd):
		return rpcErr(jsonrpc.CodeInvalidParams, "%s", msg)
	case errors.Is(err, engine.ErrTitleTaken):
		return rpcErr(codeTitleInvalid, "%s", msg)
	case errors.Is(err, engine.ErrUnknownRequest):
		return rpcErr(codeInvalidArg, "%s", msg)
	case errors.Is(err, engine.ErrStoreUnavailable):
		// Not the store's own error: it names the database's address and user (the operator
		// reads those in the log and `hermes doctor`).
		return rpcErr(codeStore, "session store unavailable, retry: the session store cannot be reached for now")
	case errors.Is(err, engine.ErrSessionMoved), errors.Is(err, engine.ErrSessionLeaseLost):
		return rpcErr(codeStore, "the session moved to another process while this call was served; retry: %s", msg)
	}
	switch method {
	case "session.title":
		return rpcErr(codeTitleStore, "%s", msg)
	case "session.branch":
		return rpcErr(codeBranchFailed, "branch failed: %s", msg)
	case "session.list":
		return rpcErr(codeStore, "%s", msg)
	}
	return rpcErr(codeFailed, "%s", msg)
}
