package engine

import (
	"encoding/json"
	"time"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/tool"
)

// EventType names an event. The names match the TUI gateway's event catalogue, so the gateway
// renders them without a table; other surfaces map them.
type EventType string

// Event types.
const (
	EvSessionInfo     EventType = "session.info"
	EvSessionTitle    EventType = "session.title"
	EvSessionClosed   EventType = "session.closed"
	EvStatus          EventType = "status.update"
	EvMessageStart    EventType = "message.start"
	EvMessageDelta    EventType = "message.delta"
	EvReasoningDelta  EventType = "reasoning.delta"
	EvMessageComplete EventType = "message.complete"
	EvToolGenerating  EventType = "tool.generating"
	EvToolStart       EventType = "tool.start"
	EvToolProgress    EventType = "tool.progress"
	EvToolComplete    EventType = "tool.complete"
	EvRequestOpen     EventType = "request.open"
	EvRequestCancel   EventType = "request.cancel"
	EvRequestResolved EventType = "request.resolved"
	EvSteerDelivered  EventType = "steer.delivered"
	EvQueueUpdated    EventType = "queue.updated"
	EvPolicyDecision  EventType = "policy.decision"
	EvModelChanged    EventType = "model.changed"
	EvSubagentStart   EventType = "subagent.start"
	EvSubagentDone    EventType = "subagent.complete"
	EvUsage           EventType = "session.usage"
	EvError           EventType = "error"
	// Sub-agent lifecycle beside subagent.start / subagent.complete (payload SubagentInfo).
	EvSubagentSpawn    EventType = "subagent.spawn_requested"
	EvSubagentProgress EventType = "subagent.progress"
	EvSubagentTool     EventType = "subagent.tool"
	// Output of a background process the terminal tool started, and its exit (payload
	// TerminalOutput).
	EvTerminalOutput EventType = "agent.terminal.output"
	EvTerminalClose  EventType = "terminal.close"
)

// Event is one entry of a session journal. Deltas carry their text in Text (no payload boxing:
// deltas are the hot path) and a nil Data; every other event carries a typed payload in Data.
type Event struct {
	Seq       uint64    `json:"seq"`
	Type      EventType `json:"type"`
	SessionID string    `json:"session_id"`
	TurnID    string    `json:"turn_id,omitempty"`
	Time      time.Time `json:"time"`
	Text      string    `json:"text,omitempty"`
	Data      EventData `json:"data,omitempty"`
}

// EventData is the payload of an event: one of the types in this file, [Info] or [Request].
// The set is closed (the method is unexported), so a surface switches on the concrete type and
// a payload it does not handle is one it chose to skip, never one it cannot know. Events raised
// by surfaces and scripts carry a [SurfaceEvent].
type EventData interface{ eventData() }

func (TurnStart) eventData()       {}
func (ToolGenerating) eventData()  {}
func (ToolStart) eventData()       {}
func (ToolProgress) eventData()    {}
func (ToolComplete) eventData()    {}
func (RequestCancel) eventData()   {}
func (RequestResolved) eventData() {}
func (SteerDelivered) eventData()  {}
func (PolicyDecision) eventData()  {}
func (StatusInfo) eventData()      {}
func (QueueInfo) eventData()       {}
func (SubagentInfo) eventData()    {}
func (UsageInfo) eventData()       {}
func (TerminalOutput) eventData()  {}
func (ErrorInfo) eventData()       {}
func (Outcome) eventData()         {}
func (SessionClosed) eventData()   {}
func (SurfaceEvent) eventData()    {}
func (Info) eventData()            {}
func (Request) eventData()         {}

// SessionClosed is the payload of session.closed.
type SessionClosed struct {
	Reason string `json:"reason"`
}

// SurfaceEvent is the payload of an event a surface or a script raises through [Session.Emit]
// (background.complete and the like): the event's name is its Type, its fields are here, and it
// encodes as those fields.
type SurfaceEvent map[string]any

// TurnStart is the payload of message.start.
type TurnStart struct {
	Prompt string `json:"prompt"`
	Origin string `json:"origin,omitempty"`
	Model  string `json:"model"`
	RowID  uint64 `json:"user_row_id,omitempty"`
}

// ToolGenerating is the payload of tool.generating; Text carries the argument fragment.
type ToolGenerating struct {
	Index  int    `json:"index"`
	CallID string `json:"call_id,omitempty"`
	Name   string `json:"name,omitempty"`
}

// ToolStart is the payload of tool.start.
type ToolStart struct {
	CallID string          `json:"call_id"`
	Name   string          `json:"name"`
	Args   json.RawMessage `json:"args"`
}

// ToolProgress is the payload of tool.progress; Text carries the interim output.
type ToolProgress struct {
	CallID string `json:"call_id"`
	Name   string `json:"name"`
}

// ToolComplete is the payload of tool.complete.
type ToolComplete struct {
	CallID   string          `json:"call_id"`
	Name     string          `json:"name"`
	Args     json.RawMessage `json:"args"`
	Result   tool.Result     `json:"result"`
	Duration time.Duration   `json:"duration_ns"`
	Blocked  bool            `json:"blocked,omitempty"` // hard-blocked or denied; never ran
}

// RequestCancel is the payload of request.cancel: an open request was withdrawn.
type RequestCancel struct {
	ID     string `json:"id"`
	Kind   string `json:"method"`
	Reason string `json:"reason"`
}

// RequestResolved is the payload of request.resolved.
type RequestResolved struct {
	ID     string         `json:"id"`
	Kind   string         `json:"method"`
	Answer map[string]any `json:"answer"`
}

// SteerDelivered is the payload of steer.delivered.
type SteerDelivered struct {
	IDs       []string `json:"steer_ids"`
	Text      string   `json:"text"`
	Iteration int      `json:"iteration"`
	CallID    string   `json:"call_id"`
}

// PolicyDecision records a hook decision for audit.
type PolicyDecision struct {
	Hook string `json:"hook"`
	// CallID is the tool call an approval decision is about (calls may run in parallel).
	CallID   string `json:"call_id,omitempty"`
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
	Error    string `json:"error,omitempty"`
}

// StatusInfo is the payload of status.update.
type StatusInfo struct {
	Status SessionStatus `json:"status"`
	Kind   string        `json:"kind,omitempty"`
	Text   string        `json:"text,omitempty"`
	// Context is the session's context use when the status was raised (compacting: the
	// request that crossed the threshold; compacted: the estimate the compaction left).
	Context *ContextInfo `json:"context,omitempty"`
}

// QueueInfo is the payload of queue.updated.
type QueueInfo struct {
	Queued string `json:"queued"` // the merged slot text; "" when empty
}

// SubagentInfo is the payload of the subagent.* events. Depth is the child's depth (1 for a
// sub-agent of a top-level session). subagent.tool carries the child's ToolName (and its
// one-line Preview), subagent.progress the child's usage after each of its model calls.
type SubagentInfo struct {
	ChildID  string        `json:"child_session_id"`
	ParentID string        `json:"parent_id,omitempty"`
	Goal     string        `json:"goal"`
	Depth    int           `json:"depth,omitempty"`
	Model    string        `json:"model,omitempty"`
	ToolName string        `json:"tool_name,omitempty"`
	Preview  string        `json:"tool_preview,omitempty"`
	Usage    *UsageInfo    `json:"usage,omitempty"`
	Outcome  *Outcome      `json:"outcome,omitempty"`
	Duration time.Duration `json:"duration_ns,omitempty"`
}

// UsageInfo is the payload of session.usage: the running turn's usage so far, emitted when
// one of its model calls completes and the turn goes on (the last call's usage is in the
// outcome). ToolCalls counts the turn's tool calls so far.
type UsageInfo struct {
	Model     string      `json:"model"`
	Usage     model.Usage `json:"usage"`
	APICalls  int         `json:"api_calls"`
	ToolCalls int64       `json:"tool_calls"`
}

// TerminalOutput is the payload of agent.terminal.output (Chunk: whole lines the process
// wrote since the last event) and terminal.close (the process exited with ExitCode).
type TerminalOutput struct {
	ProcessID string `json:"process_id"`
	Chunk     string `json:"chunk,omitempty"`
	ExitCode  *int   `json:"exit_code,omitempty"`
}

// ErrorInfo is the payload of error.
type ErrorInfo struct {
	Message string `json:"message"`
	Code    string `json:"code,omitempty"`
}

// Outcome is the one record a turn ends with. Every surface derives its terminal signal from it
// and nothing else.
type Outcome struct {
	TurnID       string      `json:"turn_id"`
	Status       string      `json:"status"` // completed | failed | cancelled
	ExitReason   string      `json:"turn_exit_reason"`
	Completed    bool        `json:"completed"`
	Partial      bool        `json:"partial"`
	Interrupted  bool        `json:"interrupted"`
	Text         string      `json:"text"`
	Reasoning    string      `json:"reasoning,omitempty"`
	PendingSteer string      `json:"pending_steer,omitempty"`
	Error        string      `json:"error,omitempty"`
	Usage        model.Usage `json:"usage"`
	APICalls     int         `json:"api_calls"`
	Model        string      `json:"model"`
	// Duration (from the turn's start to its outcome) and Context (the session's context use
	// as the turn ended) are for metrics; they stay off the wire.
	Duration time.Duration `json:"-"`
	Context  ContextInfo   `json:"-"`
}

// Outcome statuses.
const (
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
)
