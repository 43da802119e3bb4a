package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine/tool/mcptool"
)

// mcpAttachment is the MCP servers a client passed for one session: a Manager of their
// connections, whose tools are attached to that engine session only. Servers start in the
// background so session/new, load and resume answer at once; the session's next prompt waits
// for them, so the model's first turn already sees their tools.
type mcpAttachment struct {
	mgr    *mcptool.Manager
	cancel context.CancelFunc
	done   chan struct{} // closed when the start finished; detach and problems are set then

	detach   func()
	problems []string // servers that did not start, for the notice

	mu       sync.Mutex
	reported bool
}

// attachMCP replaces the session's MCP servers with servers (none when empty). A server that
// cannot start never fails the session: its tools are left out and the user is told with an
// agent_message_chunk at the start of the session's next prompt, before the turn's output.
//
// Why that notice and that moment: ACP v1 as the SDK speaks it has no general notice update
// (`notice` exists only in newer schemas, behind a client opt-in) and session_info_update
// carries only a title and a timestamp, so a message chunk is what every client shows. And an
// update sent while session/new is being answered would name a session the client does not
// know yet; the next prompt is the first moment the notice is both deliverable and relevant.
func (a *agent) attachMCP(ss *session, servers []sdk.McpServer) {
	cfgs, problems := mcpConfigs(servers)
	var m *mcpAttachment
	a.mu.Lock()
	if a.stopping { // the connection is ending; shutdown will not wait for a new start
		a.mu.Unlock()
		return
	}
	if len(cfgs) > 0 || len(problems) > 0 {
		ctx, cancel := context.WithCancel(a.live)
		m = &mcpAttachment{mgr: mcptool.New(cfgs, a.o.MCP), cancel: cancel, done: make(chan struct{})}
		a.attaches.Add(1)
		go func() {
			defer a.attaches.Done()
			defer close(m.done)
			m.problems = problems
			tools := m.mgr.Tools(ctx)
			detach, err := ss.s.AttachTools(tools...)
			if err != nil {
				m.problems = append(m.problems, "tools not attached: "+err.Error())
			} else {
				m.detach = detach
			}
			for _, st := range m.mgr.Status() {
				if st.Error != "" || !st.Connected {
					msg := st.Error
					if msg == "" {
						msg = "not connected"
					}
					m.problems = append(m.problems, fmt.Sprintf("%s: %s", st.Name, msg))
				}
			}
			for _, p := range m.problems {
				a.o.Logger.Warn("mcp server not attached", "session", ss.s.ID(), "problem", p)
			}
		}()
	}
	old := ss.mcp
	ss.mcp = m
	a.mu.Unlock()
	old.close()
}

// errCancelledWaiting: session/cancel arrived while a prompt waited for the servers.
var errCancelledWaiting = errors.New("cancelled while MCP servers were starting")

// ready waits until the servers have started (or failed to) and returns, once, the notice
// for those that did not; "" when all started or it was reported already. A close of
// cancel (session/cancel) or the end of ctx stops the wait.
func (m *mcpAttachment) ready(ctx context.Context, cancel <-chan struct{}) (string, error) {
	if m == nil {
		return "", nil
	}
	select {
	case <-m.done:
	case <-cancel:
		return "", errCancelledWaiting
	case <-ctx.Done():
		return "", ctx.Err()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.reported || len(m.problems) == 0 {
		return "", nil
	}
	m.reported = true
	return "⚠ Some MCP servers are not available in this session; their tools are missing:\n" +
		"- " + strings.Join(m.problems, "\n- ") + "\n\n", nil
}

// close stops the start, detaches the tools and stops the servers (reaping stdio children).
func (m *mcpAttachment) close() {
	if m == nil {
		return
	}
	m.cancel()
	<-m.done
	if m.detach != nil {
		m.detach()
	}
	m.mgr.Close()
}

// mcpConfigs converts the client's server list. Entries the agent cannot use (SSE, MCP over
// ACP, a relative stdio command) are returned as problems rather than failing the request.
// Names are made unique, since they prefix the tool names.
func mcpConfigs(servers []sdk.McpServer) (map[string]mcptool.ServerConfig, []string) {
	cfgs := map[string]mcptool.ServerConfig{}
	var problems []string
	name := func(n string) string {
		n = strings.TrimSpace(n)
		if n == "" {
			n = "mcp"
		}
		base := n
		for i := 2; ; i++ {
			if _, taken := cfgs[n]; !taken {
				return n
			}
			n = base + "-" + strconv.Itoa(i)
		}
	}
	for _, s := range servers {
		switch {
		case s.Stdio != nil:
			env := map[string]string{}
			for _, e := range s.Stdio.Env {
				env[e.Name] = e.Value
			}
			cfgs[name(s.Stdio.Name)] = mcptool.ServerConfig{Command: s.Stdio.Command, Args: s.Stdio.Args, Env: env}
		case s.Http != nil:
			h := map[string]string{}
			for _, e := range s.Http.Headers {
				h[e.Name] = e.Value
			}
			cfgs[name(s.Http.Name)] = mcptool.ServerConfig{URL: s.Http.Url, Headers: h}
		case s.Sse != nil:
			problems = append(problems, s.Sse.Name+": the SSE transport is not supported (use streamable HTTP)")
		case s.Acp != nil:
			problems = append(problems, s.Acp.Name+": MCP over ACP is not supported")
		}
	}
	return cfgs, problems
}

// forkServers converts session/fork's server list, which the SDK types separately, to the
// stable form: the wire shapes are the same.
func forkServers(in []sdk.UnstableMcpServer) []sdk.McpServer {
	if len(in) == 0 {
		return nil
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil
	}
	var out []sdk.McpServer
	if json.Unmarshal(b, &out) != nil {
		return nil
	}
	return out
}
