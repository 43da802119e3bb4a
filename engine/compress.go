package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/store"
)

const compressPrompt = "Summarise the conversation so far for your own future reference: the user's goals, decisions made, facts learned (file names, commands, results), and what is still open. Be concise but complete; this summary replaces the earlier messages."

// CompressResult reports a compression.
type CompressResult struct {
	Status string `json:"status"` // compressed | aborted
	Before int    `json:"before_messages"`
	After  int    `json:"after_messages"`
	// Removed counts the rows archived (kept out of the active transcript, never deleted).
	Removed int    `json:"removed"`
	Summary string `json:"summary,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// Compress summarises everything before the last user turn through the model and replaces it
// with that summary, in one store transaction: the old rows are archived (lineage kept), the
// last turn is kept verbatim. It refuses while a turn runs (ErrBusy).
func (s *Session) Compress(ctx context.Context, focus string) (CompressResult, error) {
	s.mu.Lock()
	busy := s.turn != nil
	s.mu.Unlock()
	if busy {
		return CompressResult{}, ErrBusy
	}
	return s.compact(ctx, compaction{focus: focus, kind: "compressing"})
}

// compaction describes one compression: asked for (kind "compressing") or made by a turn
// (kind "compacting", with the turn's id on its status events and the policy's prompt).
type compaction struct {
	focus  string
	hard   bool
	kind   string
	turnID string
	text   string // the status text; "" the kind
	prompt string // the summarisation prompt; "" compressPrompt
	ctx    *ContextInfo
}

// compact is a compression, asked for (Compress) or made by a turn (kind "compacting"). The
// gentle form summarises the rows before the last user row and keeps that turn verbatim; the
// hard form also summarises the last turn's own work, keeping only its user row and its
// newest tool exchange. The summarisation request is clipped to fit the model's window.
func (s *Session) compact(ctx context.Context, c compaction) (CompressResult, error) {
	focus, hard, kind := c.focus, c.hard, c.kind
	rows, err := s.History(ctx, store.RowQuery{})
	if err != nil {
		return CompressResult{}, err
	}
	lastUser := -1
	for i, r := range rows {
		if r.Role == "user" {
			lastUser = i
		}
	}
	res := CompressResult{Before: len(rows), After: len(rows)}
	// keep are the indexes of rows kept verbatim after the summary; the rest is summarised.
	var keep []int
	switch {
	case lastUser < 0:
	case !hard:
		for i := lastUser; i < len(rows); i++ {
			keep = append(keep, i)
		}
	default:
		keep = append(keep, lastUser)
		if tail := lastExchange(rows, lastUser); tail >= 0 {
			for i := tail; i < len(rows); i++ {
				keep = append(keep, i)
			}
		}
	}
	summarised := 0 // rows to summarise that are not already a summary
	for i, r := range rows {
		if !slices.Contains(keep, i) && r.DisplayKind != "summary" {
			summarised++
		}
	}
	if lastUser < 0 || (!hard && (len(rows) < 4 || lastUser <= 0)) || summarised <= 0 {
		res.Status, res.Reason = "aborted", "nothing to compress yet"
		return res, nil
	}
	text := c.text
	if text == "" {
		text = kind
	}
	s.j.append(Event{Type: EvStatus, TurnID: c.turnID, Data: StatusInfo{Status: s.Status(), Kind: kind, Text: text, Context: c.ctx}})
	if kind == "compressing" {
		defer s.j.append(Event{Type: EvStatus, Data: StatusInfo{Status: s.Status(), Kind: "status", Text: "ready"}})
	}

	name, prov, err := s.e.ResolveModel(s.Record().Model)
	if err != nil {
		return CompressResult{}, err
	}
	msgs := []model.Message{{Role: "system", Content: s.e.cfg.SystemPrompt}}
	kept := map[int]bool{}
	for _, i := range keep {
		kept[i] = true
	}
	for i, r := range rows {
		if kept[i] {
			continue
		}
		m, err := s.rowMessage(r)
		if err != nil {
			return CompressResult{}, fmt.Errorf("compress: %w", err)
		}
		msgs = append(msgs, m)
	}
	if hard { // the summarised part may end in the middle of a turn; the model needs its task
		msgs = append(msgs, model.Message{Role: "user", Content: "(The request being worked on: " + clip(rows[lastUser].Content, 4000) + ")"})
	}
	prompt := compressPrompt
	if c.prompt != "" {
		prompt = c.prompt
	}
	if f := strings.TrimSpace(focus); f != "" {
		prompt += " Focus on: " + f
	}
	msgs = append(msgs, model.Message{Role: "user", Content: prompt})
	msgs = fitMessages(msgs, s.e.contextWindow(name)*3/4)
	_, m := model.ParseName(name)
	var acc model.Accumulator
	for c, err := range prov.Stream(ctx, model.Request{Model: m, Messages: msgs}) {
		if err != nil {
			return CompressResult{}, fmt.Errorf("compress: %w", err)
		}
		acc.Add(c)
	}
	summary := strings.TrimSpace(acc.Text.String())
	if summary == "" {
		res.Status, res.Reason = "aborted", "the model returned an empty summary"
		return res, nil
	}
	extra := []store.Row{{Role: "system", DisplayKind: "summary", Content: "Summary of the earlier conversation:\n" + summary, Time: time.Now().UTC()}}
	for _, i := range keep {
		r := rows[i]
		r.ID, r.Active = 0, true
		extra = append(extra, r)
	}
	rr, err := s.wst().Rewind(ctx, s.id, store.Fence{}, rows[0].ID, extra)
	if err != nil {
		return CompressResult{}, fmt.Errorf("compress: %w", err)
	}
	s.uncalibrate()
	s.mu.Lock()
	s.meter.compressions++
	s.mu.Unlock()
	if acc.HaveUsage {
		if _, err := s.wst().UpdateSession(ctx, s.id, 0, func(r *store.Session) error {
			r.Usage.Add(store.Usage{InputTokens: int64(acc.Usage.PromptTokens), OutputTokens: int64(acc.Usage.CompletionTokens), APICalls: 1,
				CachedTokens: int64(acc.Usage.CachedTokens), CacheWriteTokens: int64(acc.Usage.CacheWriteTokens), CostUSD: acc.Usage.CostUSD})
			return nil
		}); err != nil {
			return CompressResult{}, fmt.Errorf("compress: save usage: %w", err)
		}
	}
	if err := s.reload(ctx); err != nil {
		return CompressResult{}, fmt.Errorf("compress: %w", err)
	}
	s.j.append(Event{Type: EvSessionInfo, Data: s.Info()})
	return CompressResult{Status: "compressed", Before: len(rows), After: len(rr.Appended), Removed: rr.Archived, Summary: summary}, nil
}

// lastExchange is the index of the newest assistant row after rows[user] that called tools,
// when only its tool results follow it; -1 otherwise.
func lastExchange(rows []store.Row, user int) int {
	for i := len(rows) - 1; i > user; i-- {
		switch {
		case rows[i].Role == "tool":
			continue
		case rows[i].Role == "assistant" && len(rows[i].ToolCalls) > 0:
			return i
		default:
			return -1
		}
	}
	return -1
}
