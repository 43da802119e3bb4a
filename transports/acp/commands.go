package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
)

// slashCommands are answered by the agent itself, without a model turn, and advertised to the
// client with available_commands_update. /model is the engine's own (it also switches the model
// on other surfaces). A slash word not listed here is sent to the model as text.
var slashCommands = []struct{ name, desc, hint string }{
	{"help", "List the commands", ""},
	{"model", "Show the model, or switch to provider:model", "provider:model"},
	{"tools", "List the tools the model can call", ""},
	{"context", "Show how much of the context window the conversation uses", ""},
	{"reset", "Clear the conversation (the transcript is archived, not deleted)", ""},
	{"compact", "Summarize the conversation to free context", "focus (optional)"},
	{"steer", "Send guidance to the running turn (or run it as a prompt when idle)", "guidance"},
	{"queue", "Queue a prompt for after the running turn", "prompt"},
	{"version", "Show the Hermes version", ""},
}

func availableCommands() sdk.SessionUpdate {
	cmds := make([]sdk.AvailableCommand, 0, len(slashCommands))
	for _, c := range slashCommands {
		ac := sdk.AvailableCommand{Name: c.name, Description: c.desc}
		if c.hint != "" {
			ac.Input = &sdk.AvailableCommandInput{Unstructured: &sdk.UnstructuredCommandInput{Hint: c.hint}}
		}
		cmds = append(cmds, ac)
	}
	return sdk.SessionUpdate{AvailableCommandsUpdate: &sdk.SessionAvailableCommandsUpdate{AvailableCommands: cmds, SessionUpdate: "available_commands_update"}}
}

// sessionUpdates is what a client is told about a session it just opened: the commands and the
// context meter.
func (a *agent) sessionUpdates(ss *session) []sdk.SessionUpdate {
	return []sdk.SessionUpdate{availableCommands(), a.usageUpdate(ss, model.Usage{})}
}

// announce sends sessionUpdates before the response of a method on a session the client
// already knows (load, resume).
func (a *agent) announce(ss *session) {
	for _, u := range a.sessionUpdates(ss) {
		a.update(a.live, ss.s.ID(), u)
	}
}

// announceAfter sends sessionUpdates right behind the response that gives the client the new
// session's id (session/new, session/fork): before it, the client could not place them.
func (a *agent) announceAfter(ss *session) {
	var frames [][]byte
	for _, u := range a.sessionUpdates(ss) {
		b, err := json.Marshal(struct {
			JSONRPC string                  `json:"jsonrpc"`
			Method  string                  `json:"method"`
			Params  sdk.SessionNotification `json:"params"`
		}{"2.0", "session/update", sdk.SessionNotification{SessionId: sdk.SessionId(ss.s.ID()), Update: u}})
		if err == nil {
			frames = append(frames, append(b, '\n'))
		}
	}
	a.w.after(ss.s.ID(), frames)
}

// usageUpdate is the session's context meter (contextMeter: the tokens in the context, the
// model's window, the cumulative cost when the model has catalogue prices).
func (a *agent) usageUpdate(ss *session, _ model.Usage) sdk.SessionUpdate {
	return a.contextMeter(ss)
}

// command answers a slash command typed as a prompt. handled is false for anything that is not
// one of slashCommands (and for /model, the engine's): the prompt then goes to the engine.
// A command that turns into a prompt (/steer or /queue while idle) returns the prompt's text.
func (a *agent) command(ctx context.Context, ss *session, text string) (handled bool, prompt string, err error) {
	name, arg, _ := strings.Cut(strings.TrimSpace(text), " ")
	name = strings.TrimPrefix(name, "/")
	arg = strings.TrimSpace(arg)
	if !strings.HasPrefix(strings.TrimSpace(text), "/") || name == "model" || !slices.ContainsFunc(slashCommands, func(c struct{ name, desc, hint string }) bool { return c.name == name }) {
		return false, "", nil
	}
	s, id := ss.s, ss.s.ID()
	say := func(format string, args ...any) {
		a.update(a.live, id, sdk.UpdateAgentMessageText(fmt.Sprintf(format, args...)))
	}
	switch name {
	case "help":
		var b strings.Builder
		b.WriteString("Commands:\n")
		for _, c := range slashCommands {
			arg := ""
			if c.hint != "" {
				arg = " <" + c.hint + ">"
			}
			fmt.Fprintf(&b, "  /%s%s — %s\n", c.name, arg, c.desc)
		}
		say("%s", strings.TrimRight(b.String(), "\n"))
	case "tools":
		names := s.ToolNames()
		say("Tools (%d): %s", len(names), strings.Join(names, ", "))
	case "context":
		c := s.Context()
		say("Context: %d of %d tokens (%d%%)%s; model %s", c.Used, c.Max, c.Percent, map[bool]string{true: ", estimated"}[c.Estimated], s.Record().Model)
	case "reset":
		n := 0
		for {
			_, err := s.Undo(ctx)
			if errors.Is(err, engine.ErrNothingToUndo) {
				break
			}
			if err != nil {
				return true, "", commandError(err)
			}
			n++
		}
		say("Conversation cleared (%d turns archived).", n)
	case "compact":
		r, err := s.Compress(ctx, arg)
		if err != nil {
			return true, "", commandError(err)
		}
		if r.Status != "compressed" {
			say("Nothing compacted: %s", r.Reason)
			break
		}
		say("Compacted: %d messages → %d.", r.Before, r.After)
	case "steer":
		if arg == "" {
			say("Usage: /steer <guidance>")
			break
		}
		if _, err := s.Steer(arg); err == nil {
			say("⏩ Steer queued for the active turn: %s", arg)
			break
		}
		return false, arg, nil // idle: the guidance is the next prompt
	case "queue":
		if arg == "" {
			say("Usage: /queue <prompt>")
			break
		}
		adm, ok := s.Enqueue(ctx, arg, Source)
		if !ok {
			return false, arg, nil
		}
		say("Queued for the next turn. (%d queued)", max(adm.QueuedCount, 1))
	case "version":
		say("Hermes %s (ACP protocol v%d)", a.o.Version, sdk.ProtocolVersionNumber)
	}
	return true, "", nil
}

// commandError maps an engine refusal of a command: a busy session is the client's timing
// (-32602 with the reason), anything else the agent's, which answerError words.
func commandError(err error) error {
	if errors.Is(err, engine.ErrBusy) {
		return invalidParams("a turn is running: " + err.Error())
	}
	return err
}

// maxTitle bounds an automatic title, in runes.
const maxTitle = 60

// titleFrom makes a title of a first prompt: its first line, spaces collapsed, cut at a word
// boundary.
func titleFrom(prompt string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(prompt), "\n")
	line = strings.Join(strings.FieldsFunc(line, unicode.IsSpace), " ")
	r := []rune(line)
	if len(r) <= maxTitle {
		return line
	}
	cut := maxTitle
	for i := maxTitle; i > maxTitle/2; i-- {
		if r[i] == ' ' {
			cut = i
			break
		}
	}
	return strings.TrimSpace(string(r[:cut])) + "…"
}

// autoTitle names a session without a title after its first answered turn, from its first
// prompt, and tells the client with session_info_update. Titles are unique: a taken one gets
// " #2", " #3"….
func (a *agent) autoTitle(ctx context.Context, ss *session) {
	s := ss.s
	if s.Record().Title != "" {
		return
	}
	first := firstPrompt(ctx, s)
	if first == "" {
		return
	}
	base := titleFrom(first)
	title := base
	for i := 2; ; i++ {
		err := s.SetTitle(ctx, title)
		if err == nil {
			break
		}
		if !errors.Is(err, engine.ErrTitleTaken) || i > 50 {
			a.o.Logger.Debug("acp: no automatic title", "session", s.ID(), "err", err)
			return
		}
		title = fmt.Sprintf("%s #%d", base, i)
	}
	a.update(ctx, s.ID(), sdk.SessionUpdate{SessionInfoUpdate: &sdk.SessionSessionInfoUpdate{
		SessionUpdate: "session_info_update", Title: sdk.Ptr(title), UpdatedAt: sdk.Ptr(time.Now().UTC().Format(time.RFC3339)),
	}})
}

// firstPrompt is the text of a session's first user message, "" when it has none.
func firstPrompt(ctx context.Context, s *engine.Session) string {
	rows, err := s.History(ctx, engine.RowQuery{})
	if err != nil {
		return ""
	}
	for _, r := range rows {
		if r.Role == "user" && r.Active && r.DisplayKind != "hidden" {
			return r.Content
		}
	}
	return ""
}

// preview is the start of a stored session's first user message, for session/list.
func preview(ctx context.Context, eng *engine.Engine, id string) string {
	rows, err := eng.History(ctx, id, engine.RowQuery{Limit: 32})
	if err != nil {
		return ""
	}
	for _, r := range rows {
		if r.Role == "user" && r.DisplayKind != "hidden" {
			return titleFrom(r.Content)
		}
	}
	return ""
}
