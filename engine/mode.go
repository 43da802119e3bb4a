package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

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
	// ModeAcceptEdits answers the policy's "ask" for file edits (write_file, patch) inside the
	// session's working directory or the temporary directory with allow; an edit of a
	// sensitive path (sensitivePath), commands and other tools are still asked.
	ModeAcceptEdits = "accept_edits"
	// ModeDontAsk answers the policy's "ask" for every file edit with allow, wherever the
	// file (the file tools' own confinement still applies), except a sensitive path; commands
	// and other tools are still asked.
	ModeDontAsk = "dont_ask"
	// ModeReadOnly denies every tool that can change something: only reading, searching,
	// asking the user and keeping the task list run.
	ModeReadOnly = "read_only"
)

// Modes lists the approval modes in the order surfaces offer them.
var Modes = []string{ModeDefault, ModeAcceptEdits, ModeDontAsk, ModeReadOnly}

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
	rec, err := s.wst().UpdateSession(ctx, s.id, 0, func(r *store.Session) error {
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

// applyMode layers the session's approval mode on the policy's decision for the call in.
func applyMode(mode string, in policy.ApprovalInput, d policy.ApprovalDecision) policy.ApprovalDecision {
	switch mode {
	case ModeReadOnly:
		if d.Decision != policy.Deny && !slices.Contains(readOnlyTools, in.Tool) {
			return policy.ApprovalDecision{Decision: policy.Deny, Reason: "the session is in read-only mode"}
		}
	case ModeAcceptEdits, ModeDontAsk:
		if d.Decision != policy.Ask || !slices.Contains(editTools, in.Tool) {
			return d
		}
		args := in.Args
		if len(d.Args) > 0 {
			args = d.Args
		}
		paths := editPaths(args)
		if len(paths) == 0 {
			return d
		}
		for _, p := range paths {
			if !filepath.IsAbs(p) {
				p = filepath.Join(in.Cwd, p)
			}
			p = filepath.Clean(p)
			if sensitivePath(p) {
				return d
			}
			if mode == ModeAcceptEdits && !within(in.Cwd, p) && !within(os.TempDir(), p) {
				return d
			}
		}
		return policy.ApprovalDecision{Decision: policy.Allow, Reason: "edits accepted for this session (" + mode + ")", Args: d.Args}
	}
	return d
}

// editPaths are the files an edit call names: write_file's and patch's path, and the files of
// a patch in the V4A format ("*** Update File: p", Add, Delete, "*** Move to: p").
func editPaths(args json.RawMessage) []string {
	var a struct {
		Path  string `json:"path"`
		Patch string `json:"patch"`
	}
	if json.Unmarshal(args, &a) != nil {
		return nil
	}
	var out []string
	if a.Path != "" {
		out = append(out, a.Path)
	}
	for line := range strings.Lines(a.Patch) {
		line = strings.TrimSpace(line)
		for _, pre := range []string{"*** Update File:", "*** Add File:", "*** Delete File:", "*** Move to:"} {
			if rest, ok := strings.CutPrefix(line, pre); ok && strings.TrimSpace(rest) != "" {
				out = append(out, strings.TrimSpace(rest))
			}
		}
	}
	return out
}

// within reports whether path p lies inside dir.
func within(dir, p string) bool {
	if dir == "" {
		return false
	}
	rel, err := filepath.Rel(filepath.Clean(dir), p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// sensitivePath reports whether an edit of p is always asked in the edit modes: secrets and
// credentials (.env files, keys, .netrc, .npmrc, .pypirc), version-control and credential
// directories (.git, .ssh, .gnupg, .aws, .kube, .docker) and shell start-up files.
func sensitivePath(p string) bool {
	for _, part := range strings.Split(filepath.ToSlash(p), "/") {
		switch part {
		case ".git", ".ssh", ".gnupg", ".aws", ".kube", ".docker":
			return true
		}
	}
	base := filepath.Base(p)
	switch base {
	case ".netrc", ".npmrc", ".pypirc", ".bashrc", ".bash_profile", ".zshrc", ".zprofile", ".profile", "id_rsa", "id_ed25519", "id_ecdsa":
		return true
	}
	return base == ".env" || strings.HasPrefix(base, ".env.") || strings.HasSuffix(base, ".pem") || strings.HasSuffix(base, ".key")
}
