package acp

import (
	"context"
	"fmt"
	"runtime/debug"

	sdk "github.com/coder/acp-go-sdk"
)

// safeAgent is the agent as the SDK sees it. The SDK calls each handler on a goroutine of its
// own and does not recover, so a panic in one would end the process: here it is recovered,
// logged with its stack, and answered with a bare internal error (-32603, nothing of the
// panic sent to the client). The connection carries on. Every handler's error is mapped to
// its answer here too (answerError).
type safeAgent struct{ a *agent }

var (
	_ sdk.Agent       = safeAgent{}
	_ sdk.AgentLoader = safeAgent{}
)

// finish turns a panic into err, and err into the request's answer (answerError). It must be
// deferred directly.
func (s safeAgent) finish(ctx context.Context, method string, err *error) {
	if p := recover(); p != nil {
		s.a.o.Logger.Error("acp: handler panicked", "method", method, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		*err = sdk.NewInternalError(nil)
		return
	}
	*err = answerError(ctx, *err)
}

func (s safeAgent) Initialize(ctx context.Context, p sdk.InitializeRequest) (r sdk.InitializeResponse, err error) {
	defer s.finish(ctx, sdk.AgentMethodInitialize, &err)
	return s.a.Initialize(ctx, p)
}

func (s safeAgent) Authenticate(ctx context.Context, p sdk.AuthenticateRequest) (r sdk.AuthenticateResponse, err error) {
	defer s.finish(ctx, sdk.AgentMethodAuthenticate, &err)
	return s.a.Authenticate(ctx, p)
}

func (s safeAgent) NewSession(ctx context.Context, p sdk.NewSessionRequest) (r sdk.NewSessionResponse, err error) {
	defer s.finish(ctx, sdk.AgentMethodSessionNew, &err)
	return s.a.NewSession(ctx, p)
}

func (s safeAgent) LoadSession(ctx context.Context, p sdk.LoadSessionRequest) (r sdk.LoadSessionResponse, err error) {
	defer s.finish(ctx, sdk.AgentMethodSessionLoad, &err)
	return s.a.LoadSession(ctx, p)
}

func (s safeAgent) ResumeSession(ctx context.Context, p sdk.ResumeSessionRequest) (r sdk.ResumeSessionResponse, err error) {
	defer s.finish(ctx, sdk.AgentMethodSessionResume, &err)
	return s.a.ResumeSession(ctx, p)
}

func (s safeAgent) UnstableForkSession(ctx context.Context, p sdk.UnstableForkSessionRequest) (r sdk.UnstableForkSessionResponse, err error) {
	defer s.finish(ctx, sdk.AgentMethodSessionFork, &err)
	return s.a.UnstableForkSession(ctx, p)
}

func (s safeAgent) ListSessions(ctx context.Context, p sdk.ListSessionsRequest) (r sdk.ListSessionsResponse, err error) {
	defer s.finish(ctx, sdk.AgentMethodSessionList, &err)
	return s.a.ListSessions(ctx, p)
}

func (s safeAgent) CloseSession(ctx context.Context, p sdk.CloseSessionRequest) (r sdk.CloseSessionResponse, err error) {
	defer s.finish(ctx, sdk.AgentMethodSessionClose, &err)
	return s.a.CloseSession(ctx, p)
}

func (s safeAgent) Cancel(ctx context.Context, p sdk.CancelNotification) (err error) {
	defer s.finish(ctx, sdk.AgentMethodSessionCancel, &err)
	return s.a.Cancel(ctx, p)
}

func (s safeAgent) SetSessionMode(ctx context.Context, p sdk.SetSessionModeRequest) (r sdk.SetSessionModeResponse, err error) {
	defer s.finish(ctx, sdk.AgentMethodSessionSetMode, &err)
	return s.a.SetSessionMode(ctx, p)
}

func (s safeAgent) SetSessionConfigOption(ctx context.Context, p sdk.SetSessionConfigOptionRequest) (r sdk.SetSessionConfigOptionResponse, err error) {
	defer s.finish(ctx, sdk.AgentMethodSessionSetConfigOption, &err)
	return s.a.SetSessionConfigOption(ctx, p)
}

func (s safeAgent) UnstableSetSessionModel(ctx context.Context, p sdk.UnstableSetSessionModelRequest) (r sdk.UnstableSetSessionModelResponse, err error) {
	defer s.finish(ctx, sdk.AgentMethodSessionSetModel, &err)
	return s.a.UnstableSetSessionModel(ctx, p)
}

func (s safeAgent) Prompt(ctx context.Context, p sdk.PromptRequest) (r sdk.PromptResponse, err error) {
	defer s.finish(ctx, sdk.AgentMethodSessionPrompt, &err)
	return s.a.Prompt(ctx, p)
}
