// Package browser is the agent's `browser` tool. The tool does not drive a browser itself:
// each call is one action (navigate, click, type, screenshot, ...) handed to a Controller,
// which in `hermes serve` is a browser extension connected over a WebSocket by the principal
// whose request started the turn. The Controller decides who may carry out a call; this
// package validates the call and turns the controller's answer, or its refusal, into the
// tool result the model sees.
package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/tool"
)

// Name is the tool name the model calls.
const Name = "browser"

// Actions are the actions the tool offers, in the order the schema lists them. A controller
// registers the subset it is allowed to perform (its capability allow-list).
var Actions = []string{"navigate", "snapshot", "click", "type", "press", "scroll", "back", "screenshot", "get_images", "console"}

// KnownAction reports whether a is one of Actions.
func KnownAction(a string) bool { return slices.Contains(Actions, a) }

// Sentinel errors a Controller returns; the tool reports each to the model as a failed call.
var (
	// ErrNoController: nobody can carry out browser actions for this session's turn.
	ErrNoController = errors.New("no browser controller is connected for this session")
	// ErrNotAllowed: the action is outside the controller's capability allow-list; the
	// controller was not contacted.
	ErrNotAllowed = errors.New("browser action not allowed")
	// ErrTimeout: the controller did not answer in time (the command was cancelled).
	ErrTimeout = errors.New("browser controller did not answer in time")
	// ErrControllerGone: the controller disconnected before answering.
	ErrControllerGone = errors.New("browser controller disconnected")
)

// Command is one action for a controller.
type Command struct {
	Action    string          `json:"action"`
	Arguments json.RawMessage `json:"arguments"` // a JSON object: the call's arguments without "action"
}

// Reply is a controller's answer: Content is what the model reads; IsError marks an action
// the browser could not perform (a selector that matched nothing, a page that failed to load).
type Reply struct {
	Content string
	IsError bool
}

// Controller carries out browser commands on behalf of a session's current turn.
type Controller interface {
	Do(ctx context.Context, sessionID string, c Command) (Reply, error)
}

// Options configure the tool.
type Options struct {
	// Timeout bounds one call, controller round trip included (default 30s).
	Timeout time.Duration
}

// Tool is the browser tool.
type Tool struct {
	ctl     Controller
	timeout time.Duration
}

// New returns the tool forwarding to ctl.
func New(ctl Controller, o Options) *Tool {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	return &Tool{ctl: ctl, timeout: o.Timeout}
}

// schema is built on first use, not at package init (every command links this package).
var schema = sync.OnceValue(func() json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"type":     "object",
		"required": []string{"action"},
		"properties": map[string]any{
			"action":    map[string]any{"type": "string", "enum": Actions, "description": "What to do in the user's browser."},
			"url":       map[string]any{"type": "string", "description": "navigate: the absolute http(s) URL to open."},
			"ref":       map[string]any{"type": "string", "description": "click, type: the element reference from the latest snapshot (e.g. \"e12\")."},
			"text":      map[string]any{"type": "string", "description": "type: the text to enter."},
			"key":       map[string]any{"type": "string", "description": "press: a key name such as Enter, Escape or Tab."},
			"direction": map[string]any{"type": "string", "enum": []string{"up", "down"}, "description": "scroll: which way."},
		},
		"additionalProperties": false,
	})
	return b
})

// Spec describes the tool to the model.
func (t *Tool) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name: Name,
		Description: "Act in the user's own browser through the browser extension they connected: navigate to a URL, " +
			"take a text snapshot of the page (element references for click/type), click, type, press a key, " +
			"scroll, go back, take a screenshot, list images or read the console. Only the actions the user allowed " +
			"are carried out; a refused action says so.",
		Parameters: schema(),
	}
}

// ParseCall validates a call's arguments and splits them into a Command. Errors are meant
// for the model (they say what to fix).
func ParseCall(args json.RawMessage) (Command, error) {
	var m map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader(args))
	d.UseNumber()
	if err := d.Decode(&m); err != nil || m == nil {
		return Command{}, errors.New("arguments must be a JSON object with an \"action\"")
	}
	if d.More() {
		return Command{}, errors.New("arguments must be one JSON object")
	}
	var action string
	if raw, ok := m["action"]; !ok || json.Unmarshal(raw, &action) != nil || action == "" {
		return Command{}, fmt.Errorf("\"action\" is required: one of %s", strings.Join(Actions, ", "))
	}
	if !KnownAction(action) {
		return Command{}, fmt.Errorf("unknown action %q: use one of %s", action, strings.Join(Actions, ", "))
	}
	delete(m, "action")
	for k, v := range m {
		if !slices.Contains([]string{"url", "ref", "text", "key", "direction"}, k) {
			return Command{}, fmt.Errorf("unknown argument %q", k)
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			return Command{}, fmt.Errorf("%q must be a string", k)
		}
	}
	need := map[string]string{"navigate": "url", "click": "ref", "type": "text", "press": "key"}
	if k, ok := need[action]; ok {
		var s string
		if raw, ok := m[k]; !ok || json.Unmarshal(raw, &s) != nil || strings.TrimSpace(s) == "" {
			return Command{}, fmt.Errorf("%s needs %q", action, k)
		}
		if action == "navigate" && !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
			return Command{}, errors.New("navigate needs an absolute http(s) url")
		}
	}
	rest, _ := json.Marshal(m) // map keys are sorted: the controller sees a stable object
	return Command{Action: action, Arguments: rest}, nil
}

// Call validates the arguments and forwards them to the controller.
func (t *Tool) Call(ctx context.Context, c tool.Call, env *tool.Env) (tool.Result, error) {
	cmd, err := ParseCall(c.Args)
	if err != nil {
		return tool.Errorf("browser: %v", err), nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	rep, err := t.ctl.Do(ctx, env.SessionID, cmd)
	switch {
	case err == nil:
		return tool.Result{Content: rep.Content, IsError: rep.IsError, Meta: map[string]any{"action": cmd.Action}}, nil
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		err = fmt.Errorf("%w (%s)", ErrTimeout, t.timeout)
	case errors.Is(err, context.Canceled):
		return tool.Result{}, err // the turn is being interrupted
	}
	return tool.Errorf("browser %s: %v", cmd.Action, err), nil
}
