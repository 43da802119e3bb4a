package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/engine/store"
)

// Approval modes: a person's standing answer for one session, layered on the policy. The
// policy decides first; a mode can only make its decision stricter (read_only) or answer its
// questions about edits (accept_edits). The mode is stored with the session, so it survives
// reloads and restarts.
const (
	// ModeDefault leaves every decision to the policy.
	ModeDefault = "default"
	// ModeAcceptEdits answers the policy's "ask" for file edits (write_file, patch) with allow;
	// commands and other tools are still asked.
	ModeAcceptEdits = "accept_edits"
	// ModeReadOnly denies every tool that can change something: only reading, searching,
	// asking the user and keeping the task list run.
	ModeReadOnly = "read_only"
)

// Modes lists the approval modes in the order surfaces offer them.
var Modes = []string{ModeDefault, ModeAcceptEdits, ModeReadOnly}

// ErrUnknownMode is returned by SetApprovalMode for a name not in Modes.
var ErrUnknownMode = errors.New("unknown approval mode")

// metaMode is the session meta key holding the approval mode.
const metaMode = "approval_mode"

// editTools are the tools accept_edits approves; readOnlyTools the ones read_only lets run.
var (
	editTools     = []string{"write_file", "patch"}
	readOnlyTools = []string{"read_file", "search_files", "clarify", "todo"}
)

// ApprovalMode is the session's approval mode (ModeDefault unless one was set).
func (s *Session) ApprovalMode() string {
	if m := s.Record().Meta[metaMode]; slices.Contains(Modes, m) {
		return m
	}
	return ModeDefault
}

// SetApprovalMode changes the session's approval mode; it applies from the next tool call.
func (s *Session) SetApprovalMode(ctx context.Context, mode string) error {
	if !slices.Contains(Modes, mode) {
		return fmt.Errorf("%w %q (one of %v)", ErrUnknownMode, mode, Modes)
	}
	s.mu.Lock()
	if !s.stored {
		// In memory only: the first prompt stores it (ensureStored also picks up a mode set
		// while it writes the record). The map is copied, not changed in place: Record hands
		// out copies of the record that share it.
		meta := maps.Clone(s.rec.Meta)
		if meta == nil {
			meta = map[string]string{}
		}
		meta[metaMode] = mode
		s.rec.Meta = meta
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	rec, err := s.e.cfg.Store.UpdateSession(ctx, s.id, 0, func(r *store.Session) error {
		if r.Meta == nil {
			r.Meta = map[string]string{}
		}
		r.Meta[metaMode] = mode
		return nil
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.rec = rec
	s.mu.Unlock()
	return nil
}

// applyMode layers the session's approval mode on the policy's decision for tool.
func applyMode(mode, tool string, d policy.ApprovalDecision) policy.ApprovalDecision {
	switch mode {
	case ModeReadOnly:
		if d.Decision != policy.Deny && !slices.Contains(readOnlyTools, tool) {
			return policy.ApprovalDecision{Decision: policy.Deny, Reason: "the session is in read-only mode"}
		}
	case ModeAcceptEdits:
		if d.Decision == policy.Ask && slices.Contains(editTools, tool) {
			return policy.ApprovalDecision{Decision: policy.Allow, Reason: "edits accepted for this session", Args: d.Args}
		}
	}
	return d
}
