// Package acp serves Hermes sessions to editors over the Agent Client Protocol (newline
// delimited JSON-RPC 2.0 on stdio), built on the official Go SDK. SDK types stay inside this
// package: callers hand it an engine and two streams.
//
// What the editor lends a session is attached to that session only and given back when it
// closes or the connection ends: its file system, when it advertises fs/read_text_file or
// fs/write_text_file (the file tools then see unsaved buffers and the editor reviews edits),
// and the MCP servers it passes in session/new, load, resume and fork.
package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/tool/mcptool"
)

// Auth method ids advertised in initialize.
const (
	AuthAgent = "agent"        // succeeds when a model provider is configured
	AuthSetup = "hermes-setup" // a terminal method: the client runs `hermes acp --setup`
)

// Permission option ids offered with every approval.
const (
	OptAllowOnce    = "allow_once"
	OptAllowSession = "allow_session"
	OptAllowAlways  = "allow_always"
	OptDeny         = "deny"
)

// Source tags sessions this surface creates.
const Source = "acp"

// ErrNotReady is returned by authenticate when no model provider is configured.
var ErrNotReady = errors.New("no model provider configured")

// Options configure Serve. The zero value works.
type Options struct {
	Version string
	Logger  *slog.Logger
	// Ready reports whether a model provider is configured; nil means ready.
	Ready func() error
	// Models are offered in the model selector besides the session's current model.
	Models []string
	// PermissionTimeout bounds one session/request_permission round trip; a client that does
	// not answer in time is treated as a denial. Default 10 minutes.
	PermissionTimeout time.Duration
	// MaxMessageBytes bounds one incoming frame. Default 8 MiB.
	MaxMessageBytes int
	// MaxInFlight caps the client's requests running at once on the connection (default
	// DefaultMaxInFlight; negative means no cap). One over it is answered at once with
	// -32001 and error.data.retry_after_ms.
	MaxInFlight int
	// ImageDir holds image prompt blocks saved for the engine. Default: a temp directory.
	ImageDir string
	// FSTimeout bounds one fs/read_text_file or fs/write_text_file round trip; a client that
	// does not answer in time fails the tool call. Default 2 minutes.
	FSTimeout time.Duration
	// MCP tunes the connections to the MCP servers a client passes for a session.
	MCP mcptool.Options
	// QuestionTimeout bounds one clarify question shown to the client; unanswered, it is
	// withdrawn and the model proceeds without the answer. Default 2 minutes.
	QuestionTimeout time.Duration
	// EOFWait bounds how long the connection stays up after the client closes its input
	// while requests it sent are still being answered (a client that writes its requests
	// and closes stdin, `printf … | hermes acp`, still gets every answer). Turns still
	// running then are interrupted. Default 60 s.
	EOFWait time.Duration
}

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.PermissionTimeout <= 0 {
		o.PermissionTimeout = 10 * time.Minute
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = 8 << 20
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.ImageDir == "" {
		o.ImageDir = filepath.Join(os.TempDir(), "hermes-acp-images")
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.FSTimeout <= 0 {
		o.FSTimeout = 2 * time.Minute
	}
	if o.QuestionTimeout <= 0 {
		o.QuestionTimeout = 2 * time.Minute
	}
	if o.EOFWait <= 0 {
		o.EOFWait = 60 * time.Second
	}
	if o.MCP.Logger == nil {
		o.MCP.Logger = o.Logger
	}
	if o.MCP.ClientVersion == "" {
		o.MCP.ClientVersion = o.Version
	}
}

// Serve runs one ACP connection on in/out until the client disconnects or ctx ends. It
// interrupts the connection's running turns before returning. out carries protocol frames
// only.
func Serve(ctx context.Context, eng *engine.Engine, in io.Reader, out io.Writer, o Options) error {
	return ServeLazy(ctx, func() (*engine.Engine, error) { return eng, nil }, in, out, o)
}

// ServeLazy is Serve with an engine that open builds on demand: initialize and authenticate
// are answered without it, since opening a store takes longer than an editor's handshake.
// open starts as soon as initialize has been answered (or when a method needs the engine
// first) and runs while the client prepares its next request. Session methods wait for it;
// if it failed, each of them answers with a JSON-RPC internal error carrying open's error.
// ServeLazy returns only after open has returned (it is not called at all when the client
// leaves before initialize); closing the engine stays with the caller.
func ServeLazy(ctx context.Context, open func() (*engine.Engine, error), in io.Reader, out io.Writer, o Options) error {
	o.defaults()
	inf := newInflight(o.MaxInFlight)
	w := &lockedWriter{w: out, ids: inf}
	pr, pw := io.Pipe()
	live, endLive := context.WithCancel(context.WithoutCancel(ctx))
	defer endLive()
	inputOpen, inputClosed := context.WithCancel(context.Background())
	defer inputClosed()
	a := &agent{o: o, w: w, sessions: map[string]*session{}, closed: map[string]bool{}, live: live, endLive: endLive, engReady: make(chan struct{}), input: inputOpen}
	var opening sync.WaitGroup
	a.startOpen = func() {
		a.openOnce.Do(func() {
			opening.Go(func() {
				defer close(a.engReady)
				a.eng, a.engErr = open()
				if a.engErr == nil && a.eng == nil {
					a.engErr = errors.New("no engine")
				}
				if a.engErr != nil {
					o.Logger.Error("hermes could not start", "err", a.engErr)
				}
			})
		})
	}
	defer func() {
		// A client that left before initialize never needed the engine.
		a.openOnce.Do(func() {
			a.engErr = errors.New("the connection ended")
			close(a.engReady)
		})
		opening.Wait()
	}()
	conn := sdk.NewAgentSideConnection(safeAgent{a}, w, pr)
	conn.SetLogger(o.Logger)
	a.conn = conn
	// Frames flow only from here on: the SDK starts handling requests inside
	// NewAgentSideConnection, before it (and a.conn) are fully set up.
	guardDone := make(chan error, 1)
	go func() {
		err := guard(in, pw, w, o.MaxMessageBytes, inf, o.Logger)
		inputClosed()
		if err == nil {
			// End of input: the requests already read are answered before the connection
			// ends (bounded), so a client that closes stdin right after writing gets them.
			// Nothing it could answer is asked meanwhile (a.input is done).
			if !inf.waitIdle(o.EOFWait) {
				o.Logger.Warn("acp: input closed; requests still running are cut off", "running", inf.running())
			}
		}
		pw.CloseWithError(err)
		guardDone <- err
	}()
	stopped := false
	select {
	case <-conn.Done():
	case <-ctx.Done():
		stopped = true
	}
	pr.CloseWithError(io.ErrClosedPipe) // unblocks the guard if the SDK stopped reading first
	a.shutdown()
	if stopped {
		// The client is still connected: the guard is blocked reading in. Closing in releases
		// it where the reader allows (pipes, sockets); a terminal's stdin may not, so the wait
		// is bounded — the process is exiting anyway.
		if c, ok := in.(io.Closer); ok {
			c.Close()
		}
		select {
		case <-guardDone:
		case <-time.After(2 * time.Second):
		}
		return nil
	}
	err := <-guardDone
	if errors.Is(err, io.ErrClosedPipe) {
		err = nil
	}
	return err
}

// agent implements the SDK's Agent interfaces over the engine.
type agent struct {
	o    Options
	conn *sdk.AgentSideConnection
	w    *lockedWriter // the connection's output, under the SDK
	// startOpen starts building the engine, once: when initialize has been answered (so
	// the handshake does not share the CPU with it) or when a method needs it first. eng and
	// engErr are written once before engReady is closed and only read after it.
	startOpen func()
	openOnce  sync.Once
	engReady  chan struct{}
	eng       *engine.Engine
	engErr    error
	// fs is what the client said it can do with files (initialize).
	fsRead, fsWrite bool
	// forms: the client renders elicitation forms (clientCapabilities.elicitation.form).
	forms bool
	// input ends when the client's input does: no request to the client can be answered
	// after that, so none waits for an answer.
	input context.Context
	// live is the connection's lifetime as turns see it: it ends drainTimeout after the
	// client goes away, so a stuck turn cannot hold Serve forever.
	live    context.Context
	endLive context.CancelFunc

	mu       sync.Mutex
	sessions map[string]*session
	closed   map[string]bool
	stopping bool
	prompts  sync.WaitGroup // running Prompt handlers
	attaches sync.WaitGroup // MCP attach goroutines (mcp.go)
}

// engine waits for the engine ServeLazy is opening.
func (a *agent) engine(ctx context.Context) (*engine.Engine, error) {
	a.startOpen()
	select {
	case <-a.engReady:
	case <-ctx.Done():
		return nil, fmt.Errorf("hermes is still starting: %w", ctx.Err())
	}
	if a.engErr != nil {
		return nil, errorf("hermes could not start: %v", a.engErr)
	}
	return a.eng, nil
}

// enter registers a Prompt handler unless shutdown has begun.
func (a *agent) enter() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopping {
		return false
	}
	a.prompts.Add(1)
	return true
}

// session is one engine session as this connection sees it.
type session struct {
	s   *engine.Session
	cwd string
	// mcp is the session's MCP servers from the client; nil when it passed none. Guarded by
	// agent.mu (the attachment itself is safe to use without it).
	mcp *mcpAttachment
	// cancelled is closed by session/cancel (and replaced), for prompts that wait before
	// their turn starts. Guarded by agent.mu.
	cancelled chan struct{}
	// prompting counts this client's prompts in flight on the session. Guarded by agent.mu.
	prompting int
}

var (
	_ sdk.Agent       = (*agent)(nil)
	_ sdk.AgentLoader = (*agent)(nil)
)

func (a *agent) shutdown() {
	a.mu.Lock()
	a.stopping = true
	live := make([]*session, 0, len(a.sessions))
	for _, s := range a.sessions {
		live = append(live, s)
	}
	a.mu.Unlock()
	for _, s := range live {
		// A turn runs for this client while one of its prompts is in flight (wherever the
		// session's lease is held: the interrupt reaches that process). With none, only a
		// turn this process runs is interrupted: a session opened here may be running a turn
		// for another process's client, which this client's leaving does not stop.
		a.mu.Lock()
		mine := s.prompting > 0
		a.mu.Unlock()
		if st := s.s.Status(); mine || st == engine.StatusWorking || st == engine.StatusWaiting {
			s.s.Interrupt("client disconnected")
		}
	}
	timer := time.AfterFunc(drainTimeout, a.endLive)
	defer timer.Stop()
	a.prompts.Wait()
	// No turn runs any more: the client's file system and MCP servers can go.
	for _, s := range live {
		a.detach(s)
	}
	a.attaches.Wait()
}

// detach returns a session to the disk and stops the MCP servers the client gave it.
func (a *agent) detach(ss *session) {
	ss.s.SetFS(nil)
	a.mu.Lock()
	m := ss.mcp
	ss.mcp = nil
	a.mu.Unlock()
	m.close()
}

func (a *agent) Initialize(_ context.Context, p sdk.InitializeRequest) (sdk.InitializeResponse, error) {
	defer a.startOpen()
	a.mu.Lock()
	a.fsRead, a.fsWrite = p.ClientCapabilities.Fs.ReadTextFile, p.ClientCapabilities.Fs.WriteTextFile
	a.forms = p.ClientCapabilities.Elicitation != nil && p.ClientCapabilities.Elicitation.Form != nil
	a.mu.Unlock()
	setupDesc := "Configure a model provider in the terminal"
	agentDesc := "Use the provider configured for Hermes"
	auth := []sdk.AuthMethod{{Agent: &sdk.AuthMethodAgent{Id: AuthAgent, Name: "Hermes configuration", Description: &agentDesc}}}
	// The spec allows terminal methods only for a client that says it can run them.
	if p.ClientCapabilities.Auth.Terminal {
		auth = append(auth, sdk.AuthMethod{Terminal: &sdk.AuthMethodTerminalInline{Id: AuthSetup, Name: "Set up Hermes", Description: &setupDesc, Args: []string{"--setup"}, Type: "terminal"}})
	}
	return sdk.InitializeResponse{
		ProtocolVersion: sdk.ProtocolVersionNumber,
		AgentInfo:       &sdk.Implementation{Name: "hermes", Title: sdk.Ptr("Hermes"), Version: a.o.Version},
		AgentCapabilities: sdk.AgentCapabilities{
			LoadSession:        true,
			PromptCapabilities: sdk.PromptCapabilities{Image: true, EmbeddedContext: true},
			// stdio is implied; SSE, the deprecated transport, is not spoken.
			McpCapabilities: sdk.McpCapabilities{Http: true},
			SessionCapabilities: sdk.SessionCapabilities{
				List: &sdk.SessionListCapabilities{}, Fork: &sdk.SessionForkCapabilities{},
				Resume: &sdk.SessionResumeCapabilities{}, Close: &sdk.SessionCloseCapabilities{},
			},
		},
		AuthMethods: auth,
	}, nil
}

func (a *agent) ready() error {
	if a.o.Ready == nil {
		return nil
	}
	return a.o.Ready()
}

func (a *agent) Authenticate(_ context.Context, p sdk.AuthenticateRequest) (sdk.AuthenticateResponse, error) {
	switch p.MethodId {
	case AuthAgent, AuthSetup:
		if err := a.ready(); err != nil {
			return sdk.AuthenticateResponse{}, sdk.NewAuthRequired(map[string]any{"error": err.Error(), "hint": "run `hermes acp --setup`"})
		}
		return sdk.AuthenticateResponse{}, nil
	}
	return sdk.AuthenticateResponse{}, invalidParams("unknown auth method " + strconv.Quote(p.MethodId))
}

func errUnknownSession(id sdk.SessionId) error {
	return invalidParams("unknown session " + strconv.Quote(string(id)))
}

// get returns a session this connection opened.
func (a *agent) get(id sdk.SessionId) (*session, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[string(id)]
	if !ok {
		if a.closed[string(id)] {
			return nil, invalidParams("session " + strconv.Quote(string(id)) + " is closed")
		}
		return nil, errUnknownSession(id)
	}
	return s, nil
}

func (a *agent) add(s *engine.Session, cwd string) *session {
	a.mu.Lock()
	ss, ok := a.sessions[s.ID()]
	if !ok {
		ss = &session{s: s, cwd: cwd, cancelled: make(chan struct{})}
		a.sessions[s.ID()] = ss
		delete(a.closed, s.ID())
	}
	fs := &clientFS{a: a, id: s.ID(), read: a.fsRead, write: a.fsWrite}
	// Every ACP client answers session/request_permission: in the default mode the person
	// sees each edit as a diff and approves it before it is written.
	s.SetEditReview(true)
	stopping := a.stopping
	a.mu.Unlock()
	// A session added while the connection ends keeps the disk: nobody would take the
	// client's file system back from it.
	if (fs.read || fs.write) && !stopping {
		s.SetFS(fs)
	}
	return ss
}

// open attaches a stored session by id.
func (a *agent) open(ctx context.Context, id sdk.SessionId, cwd string) (*session, error) {
	if s, err := a.get(id); err == nil {
		return s, nil
	}
	eng, err := a.engine(ctx)
	if err != nil {
		return nil, err
	}
	s, err := eng.Open(ctx, string(id))
	if err != nil {
		if errors.Is(err, engine.ErrSessionNotFound) {
			return nil, errUnknownSession(id)
		}
		return nil, err
	}
	// ACP acts for the local owner: a session an API key of `hermes serve` made is another
	// principal's, and unknown here.
	if !engine.LocalOwner.Sees(s.Record().Principal) {
		return nil, errUnknownSession(id)
	}
	if cwd == "" {
		cwd = s.Record().Cwd
	}
	return a.add(s, cwd), nil
}

func (a *agent) NewSession(ctx context.Context, p sdk.NewSessionRequest) (sdk.NewSessionResponse, error) {
	if !filepath.IsAbs(p.Cwd) {
		return sdk.NewSessionResponse{}, invalidParams("cwd must be an absolute path")
	}
	// A session's tools run in cwd: a folder that is not there is a typo to report now, not
	// a failure of the first tool call.
	if fi, err := os.Stat(p.Cwd); err != nil || !fi.IsDir() {
		return sdk.NewSessionResponse{}, invalidParams("cwd " + strconv.Quote(p.Cwd) + " is not a directory")
	}
	eng, err := a.engine(ctx)
	if err != nil {
		return sdk.NewSessionResponse{}, err
	}
	// Stored before the answer: a client may resume it from another process (one process per
	// command), which finds only what the store holds.
	s, err := eng.Create(ctx, engine.CreateOptions{Cwd: p.Cwd, Source: Source})
	if err != nil {
		return sdk.NewSessionResponse{}, err
	}
	ss := a.add(s, p.Cwd)
	a.attachMCP(ss, p.McpServers)
	a.announceAfter(ss)
	return sdk.NewSessionResponse{SessionId: sdk.SessionId(s.ID()), ConfigOptions: a.configOptions(ss), Modes: modeState(ss)}, nil
}

func (a *agent) LoadSession(ctx context.Context, p sdk.LoadSessionRequest) (sdk.LoadSessionResponse, error) {
	ss, err := a.open(ctx, p.SessionId, p.Cwd)
	if err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	a.attachMCP(ss, p.McpServers)
	if err := a.replay(ctx, ss); err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	a.announce(ss)
	return sdk.LoadSessionResponse{ConfigOptions: a.configOptions(ss), Modes: modeState(ss)}, nil
}

func (a *agent) ResumeSession(ctx context.Context, p sdk.ResumeSessionRequest) (sdk.ResumeSessionResponse, error) {
	ss, err := a.open(ctx, p.SessionId, p.Cwd)
	if err != nil {
		return sdk.ResumeSessionResponse{}, err
	}
	a.attachMCP(ss, p.McpServers)
	a.announce(ss)
	return sdk.ResumeSessionResponse{ConfigOptions: a.configOptions(ss), Modes: modeState(ss)}, nil
}

func (a *agent) UnstableForkSession(ctx context.Context, p sdk.UnstableForkSessionRequest) (sdk.UnstableForkSessionResponse, error) {
	if _, err := a.open(ctx, p.SessionId, ""); err != nil {
		return sdk.UnstableForkSessionResponse{}, err
	}
	s, err := a.eng.Branch(ctx, string(p.SessionId), engine.BranchOptions{Source: Source}) // open waited for the engine
	if err != nil {
		if errors.Is(err, engine.ErrNothingToBranch) {
			return sdk.UnstableForkSessionResponse{}, invalidParams(err.Error())
		}
		return sdk.UnstableForkSessionResponse{}, err
	}
	cwd := p.Cwd
	if cwd == "" {
		cwd = s.Record().Cwd
	}
	ss := a.add(s, cwd)
	a.attachMCP(ss, forkServers(p.McpServers))
	a.announceAfter(ss)
	return sdk.UnstableForkSessionResponse{SessionId: sdk.SessionId(s.ID()), ConfigOptions: unstableOptions(a.configOptions(ss)), Modes: modeState(ss)}, nil
}

// listPage is the session/list page size.
const listPage = 50

func (a *agent) ListSessions(ctx context.Context, p sdk.ListSessionsRequest) (sdk.ListSessionsResponse, error) {
	offset := 0
	if p.Cursor != nil && *p.Cursor != "" {
		n, err := strconv.Atoi(*p.Cursor)
		if err != nil || n < 0 {
			return sdk.ListSessionsResponse{}, invalidParams("bad cursor")
		}
		offset = n
	}
	eng, err := a.engine(ctx)
	if err != nil {
		return sdk.ListSessionsResponse{}, err
	}
	all, err := eng.List(ctx, engine.ListOptions{})
	if err != nil {
		return sdk.ListSessionsResponse{}, err
	}
	out := sdk.ListSessionsResponse{Sessions: []sdk.SessionInfo{}}
	n := 0
	for _, r := range all {
		// Sub-agent sessions and empty threads are not conversations an editor can resume.
		if r.ParentKind == "delegate" || r.RowCount == 0 || (p.Cwd != nil && *p.Cwd != "" && r.Cwd != *p.Cwd) || !engine.LocalOwner.Sees(r.Principal) {
			continue
		}
		n++
		if n <= offset {
			continue
		}
		if len(out.Sessions) == listPage {
			out.NextCursor = sdk.Ptr(strconv.Itoa(offset + listPage))
			break
		}
		info := sdk.SessionInfo{SessionId: sdk.SessionId(r.ID), Cwd: r.Cwd, UpdatedAt: sdk.Ptr(r.UpdatedAt.UTC().Format(time.RFC3339))}
		if r.Title != "" {
			info.Title = sdk.Ptr(r.Title)
		} else if p := preview(ctx, eng, r.ID); p != "" {
			info.Title = sdk.Ptr(p) // a session not titled yet shows its first message
		}
		out.Sessions = append(out.Sessions, info)
	}
	return out, nil
}

func (a *agent) CloseSession(ctx context.Context, p sdk.CloseSessionRequest) (sdk.CloseSessionResponse, error) {
	a.mu.Lock()
	ss, ok := a.sessions[string(p.SessionId)]
	if ok {
		delete(a.sessions, string(p.SessionId))
		a.closed[string(p.SessionId)] = true
	}
	a.mu.Unlock()
	if !ok {
		return sdk.CloseSessionResponse{}, errUnknownSession(p.SessionId)
	}
	// Interrupt, not Close: the session stays in the store and loadable; the engine only
	// stops its work for this client, whose file system and MCP servers it gives back.
	ss.s.Interrupt("session closed by client")
	a.detach(ss)
	return sdk.CloseSessionResponse{}, nil
}

func (a *agent) Cancel(_ context.Context, p sdk.CancelNotification) error {
	ss, err := a.get(p.SessionId)
	if err != nil {
		return nil // a late cancel for a session already gone is not an error
	}
	a.mu.Lock()
	close(ss.cancelled)
	ss.cancelled = make(chan struct{})
	a.mu.Unlock()
	ss.s.Interrupt("cancelled by client")
	return nil
}

// SetSessionMode switches the session's approval mode (the legacy modes API; the same choice
// is the "mode" config option). The client is told with current_mode_update and
// config_option_update, as a change made by the agent would be.
func (a *agent) SetSessionMode(ctx context.Context, p sdk.SetSessionModeRequest) (sdk.SetSessionModeResponse, error) {
	ss, err := a.get(p.SessionId)
	if err != nil {
		return sdk.SetSessionModeResponse{}, err
	}
	if err := a.setMode(ctx, ss, string(p.ModeId)); err != nil {
		return sdk.SetSessionModeResponse{}, err
	}
	// The response has no config options: the client learns the new mode option this way.
	a.sendConfigOptions(ss)
	return sdk.SetSessionModeResponse{}, nil
}

// setMode changes the session's approval mode and tells the client with current_mode_update,
// which keeps clients of the legacy modes API in step whichever way the mode was changed.
func (a *agent) setMode(ctx context.Context, ss *session, mode string) error {
	if err := ss.s.SetApprovalMode(ctx, mode); err != nil {
		return settingError(err)
	}
	a.update(a.live, ss.s.ID(), sdk.SessionUpdate{CurrentModeUpdate: &sdk.SessionCurrentModeUpdate{CurrentModeId: sdk.SessionModeId(mode), SessionUpdate: "current_mode_update"}})
	return nil
}

// sendConfigOptions sends the session's config options as a config_option_update.
func (a *agent) sendConfigOptions(ss *session) {
	a.update(a.live, ss.s.ID(), sdk.SessionUpdate{ConfigOptionUpdate: &sdk.SessionConfigOptionUpdate{ConfigOptions: a.configOptions(ss), SessionUpdate: "config_option_update"}})
}

// modeInfo names and describes the approval modes for the client.
var modeInfo = map[string][2]string{
	engine.ModeDefault:     {"Ask", "The policy decides; commands it flags and anything it asks about need your permission"},
	engine.ModeAcceptEdits: {"Accept edits", "File edits in the workspace run without asking; sensitive files and commands are still asked"},
	engine.ModeDontAsk:     {"Don't ask", "Every file edit runs without asking, except sensitive files (.env, keys, .git, shell start-up files); commands are still asked"},
	engine.ModeReadOnly:    {"Read only", "The agent reads and searches but cannot edit files or run commands"},
}

func modeState(ss *session) *sdk.SessionModeState {
	st := &sdk.SessionModeState{CurrentModeId: sdk.SessionModeId(ss.s.ApprovalMode())}
	for _, m := range engine.Modes {
		st.AvailableModes = append(st.AvailableModes, sdk.SessionMode{Id: sdk.SessionModeId(m), Name: modeInfo[m][0], Description: sdk.Ptr(modeInfo[m][1])})
	}
	return st
}

// Config option ids: the model selector and the approval mode.
const (
	configModel = "model"
	configMode  = "mode"
)

func (a *agent) configOptions(ss *session) []sdk.SessionConfigOption {
	cur := ss.s.Record().Model
	if cur == "" {
		cur = a.eng.DefaultModel()
	}
	models := []string{cur}
	for _, m := range append([]string{a.eng.DefaultModel()}, a.o.Models...) {
		if m != "" && !slices.Contains(models, m) {
			models = append(models, m)
		}
	}
	opts := make(sdk.SessionConfigSelectOptionsUngrouped, 0, len(models))
	for _, m := range models {
		opts = append(opts, sdk.SessionConfigSelectOption{Name: m, Value: sdk.SessionConfigValueId(m)})
	}
	cat, modeCat := sdk.SessionConfigOptionCategoryModel, sdk.SessionConfigOptionCategoryMode
	modes := make(sdk.SessionConfigSelectOptionsUngrouped, 0, len(engine.Modes))
	for _, m := range engine.Modes {
		modes = append(modes, sdk.SessionConfigSelectOption{Name: modeInfo[m][0], Value: sdk.SessionConfigValueId(m), Description: sdk.Ptr(modeInfo[m][1])})
	}
	return []sdk.SessionConfigOption{{Select: &sdk.SessionConfigOptionSelect{
		Id: configModel, Name: "Model", Category: &cat, CurrentValue: sdk.SessionConfigValueId(cur),
		Options: sdk.SessionConfigSelectOptions{Ungrouped: &opts}, Type: "select",
	}}, {Select: &sdk.SessionConfigOptionSelect{
		Id: configMode, Name: "Approval mode", Category: &modeCat, CurrentValue: sdk.SessionConfigValueId(ss.s.ApprovalMode()),
		Options: sdk.SessionConfigSelectOptions{Ungrouped: &modes}, Type: "select",
	}}}
}

// unstableOptions converts config options for the unstable fork response, whose generated
// type differs from the stable one while the wire shape is the same.
func unstableOptions(in []sdk.SessionConfigOption) []sdk.UnstableSessionConfigOption {
	b, err := json.Marshal(in)
	if err != nil {
		return nil
	}
	var out []sdk.UnstableSessionConfigOption
	if json.Unmarshal(b, &out) != nil {
		return nil
	}
	return out
}

func (a *agent) SetSessionConfigOption(ctx context.Context, p sdk.SetSessionConfigOptionRequest) (sdk.SetSessionConfigOptionResponse, error) {
	v := p.ValueId
	if v == nil {
		return sdk.SetSessionConfigOptionResponse{}, invalidParams("unsupported config option")
	}
	ss, err := a.get(v.SessionId)
	if err != nil {
		return sdk.SetSessionConfigOptionResponse{}, err
	}
	if v.ConfigId == configMode {
		if err := a.setMode(ctx, ss, string(v.Value)); err != nil {
			return sdk.SetSessionConfigOptionResponse{}, err
		}
		return sdk.SetSessionConfigOptionResponse{ConfigOptions: a.configOptions(ss)}, nil
	}
	if v.ConfigId != configModel {
		return sdk.SetSessionConfigOptionResponse{}, invalidParams("unknown config option " + strconv.Quote(string(v.ConfigId)))
	}
	if _, err := ss.s.SetModel(ctx, string(v.Value)); err != nil {
		return sdk.SetSessionConfigOptionResponse{}, settingError(err)
	}
	return sdk.SetSessionConfigOptionResponse{ConfigOptions: a.configOptions(ss)}, nil
}

// settingError maps a failed model or mode change: a value the agent does not know is the
// client's error (-32602); anything else (the store failed) is the agent's, which answerError
// words.
func settingError(err error) error {
	if errors.Is(err, engine.ErrInvalidModel) || errors.Is(err, model.ErrUnknownProvider) || errors.Is(err, engine.ErrUnknownMode) {
		return invalidParams(err.Error())
	}
	return err
}

// UnstableSetSessionModel serves session/set_model, which some clients still send instead of
// the model config option.
func (a *agent) UnstableSetSessionModel(ctx context.Context, p sdk.UnstableSetSessionModelRequest) (sdk.UnstableSetSessionModelResponse, error) {
	ss, err := a.get(p.SessionId)
	if err != nil {
		return sdk.UnstableSetSessionModelResponse{}, err
	}
	if _, err := ss.s.SetModel(ctx, string(p.ModelId)); err != nil {
		return sdk.UnstableSetSessionModelResponse{}, settingError(err)
	}
	return sdk.UnstableSetSessionModelResponse{}, nil
}

func (a *agent) update(ctx context.Context, id string, u sdk.SessionUpdate) {
	if err := a.conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: sdk.SessionId(id), Update: u}); err != nil {
		a.o.Logger.Debug("session/update not sent", "session", id, "err", err)
	}
}

// replay sends a stored transcript as session/update notifications. Every replayed tool call
// ends in a terminal status, even one whose result row is missing.
func (a *agent) replay(ctx context.Context, ss *session) error {
	rows, err := ss.s.History(ctx, engine.RowQuery{})
	if err != nil {
		return err
	}
	id := ss.s.ID()
	open := map[string]bool{}
	var order []string
	for _, r := range rows {
		if !r.Active {
			continue
		}
		switch r.Role {
		case "user":
			a.update(ctx, id, sdk.UpdateUserMessageText(r.Content))
		case "assistant":
			if r.Reasoning != "" {
				a.update(ctx, id, sdk.UpdateAgentThoughtText(r.Reasoning))
			}
			if r.Content != "" {
				a.update(ctx, id, sdk.UpdateAgentMessageText(r.Content))
			}
			var calls []struct {
				ID, Name, Arguments string
			}
			_ = json.Unmarshal(r.ToolCalls, &calls)
			for _, c := range calls {
				args := argMap(json.RawMessage(c.Arguments))
				a.update(ctx, id, sdk.StartToolCall(sdk.ToolCallId(c.ID), toolTitle(c.Name, args),
					sdk.WithStartKind(toolKind(c.Name)), sdk.WithStartStatus(sdk.ToolCallStatusPending), sdk.WithStartRawInput(args)))
				open[c.ID] = true
				order = append(order, c.ID)
			}
		case "tool":
			if !open[r.ToolCallID] {
				continue
			}
			delete(open, r.ToolCallID)
			status := sdk.ToolCallStatusCompleted
			if strings.HasPrefix(r.Content, "BLOCKED") || toolFailed(r.ToolName, false, r.Content, nil) {
				status = sdk.ToolCallStatusFailed
			}
			a.update(ctx, id, sdk.UpdateToolCall(sdk.ToolCallId(r.ToolCallID), sdk.WithUpdateStatus(status),
				sdk.WithUpdateContent(resultContent(r.ToolName, ss.cwd, nil, r.Content, nil))))
			if r.ToolName == "todo" {
				if u, ok := planUpdate(r.Content); ok {
					a.update(ctx, id, u)
				}
			}
		}
	}
	for _, c := range order {
		if open[c] {
			a.update(ctx, id, sdk.UpdateToolCall(sdk.ToolCallId(c), sdk.WithUpdateStatus(sdk.ToolCallStatusFailed)))
		}
	}
	return nil
}

// errorf builds an internal error with a message the client can show.
func errorf(format string, args ...any) error {
	return internalError(fmt.Sprintf(format, args...))
}

// answerError is the one mapping from a handler's failure to the error its request is
// answered with (safeAgent applies it to every handler): an answer the handler chose
// (*sdk.RequestError) stands, except that a request its client cancelled ($/cancel_request)
// is answered -32800 whatever failed, as ACP's cancellation requires; a context cancellation
// anywhere in the chain is -32800 too; anything else is the agent's -32603 with the error's
// text.
func answerError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(context.Cause(ctx), context.Canceled) {
		return requestCancelled()
	}
	var re *sdk.RequestError
	if errors.As(err, &re) {
		return re
	}
	return internalError(err.Error())
}

// requestCancelled answers a cancelled request (ACP's -32800, the SDK's wording).
func requestCancelled() error {
	return &sdk.RequestError{Code: codeRequestCancelled, Message: "Request cancelled"}
}

// codeRequestCancelled is ACP's code for a request its client cancelled.
const codeRequestCancelled = -32800

// invalidParams and internalError are the agent's error answers: the JSON-RPC code, the
// reason in the message (what a client shows its user: "Invalid params" alone says nothing)
// and again as data.error, where the SDK's own errors carry it.
func invalidParams(msg string) error {
	return &sdk.RequestError{Code: -32602, Message: "Invalid params: " + msg, Data: map[string]any{"error": msg}}
}

func internalError(msg string) error {
	return &sdk.RequestError{Code: -32603, Message: "Internal error: " + msg, Data: map[string]any{"error": msg}}
}
