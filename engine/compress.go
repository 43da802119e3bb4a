package engine

import (
	"context"
	"fmt"
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
	if len(rows) < 4 || lastUser <= 0 {
		res.Status, res.Reason = "aborted", "nothing to compress yet"
		return res, nil
	}
	s.j.append(Event{Type: EvStatus, Data: StatusInfo{Status: s.Status(), Kind: "compressing", Text: "compressing"}})
	defer s.j.append(Event{Type: EvStatus, Data: StatusInfo{Status: s.Status(), Kind: "status", Text: "ready"}})

	name, prov, err := s.e.ResolveModel(s.Record().Model)
	if err != nil {
		return CompressResult{}, err
	}
	msgs, err := s.loadMessages(ctx)
	if err != nil {
		return CompressResult{}, err
	}
	msgs = msgs[:1+lastUser] // system prompt + everything before the last user turn
	prompt := compressPrompt
	if f := strings.TrimSpace(focus); f != "" {
		prompt += " Focus on: " + f
	}
	msgs = append(msgs, model.Message{Role: "user", Content: prompt})
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
	for _, r := range rows[lastUser:] {
		r.ID, r.Active = 0, true
		extra = append(extra, r)
	}
	rr, err := s.e.cfg.Store.Rewind(ctx, s.id, store.Fence{}, rows[0].ID, extra)
	if err != nil {
		return CompressResult{}, fmt.Errorf("compress: %w", err)
	}
	if acc.HaveUsage {
		if _, err := s.e.cfg.Store.UpdateSession(ctx, s.id, 0, func(r *store.Session) error {
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
