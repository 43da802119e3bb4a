package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/hermes-go/hermes/engine/store"
)

// Managing sessions and their transcripts: every write a surface makes outside a turn goes
// through one of these verbs, never through the store (a layering test keeps transports off
// it). Edits that must not interleave with a turn (an undo, context rows before a prompt) hold
// the session's turn slot while they check and write, as a truncating submit does.

// MetaDeleted is the record's Meta key a deleted session carries (its value is the time of
// deletion, RFC 3339). A deleted session keeps its transcript in the store, and the engine
// treats it as gone: Open and Record refuse it, List leaves it out.
const MetaDeleted = "deleted_at"

// MetaDiscarded marks a deleted record that never became a usable session (a branch whose
// rows could not be copied, a session whose seeded history could not be written): its id is
// free for a new session, which takes the record over.
const MetaDiscarded = "discarded_at"

// MetaDeletedTitle keeps the title a session had when it was deleted; the title itself is
// cleared so that it is free for another session.
const MetaDeletedTitle = "deleted_title"

// ErrNothingToUndo: Undo found no user turn.
var ErrNothingToUndo = errors.New("no user turn to undo")

func deleted(rec store.Session) bool { return rec.Meta[MetaDeleted] != "" }

// Record returns the record of session id without making it live: the stored record, or the
// record of a live session not yet stored (a lazy one). A deleted or unknown session is
// ErrSessionNotFound.
func (e *Engine) Record(ctx context.Context, id string) (Record, error) {
	rec, err := e.cfg.Store.GetSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		if s, ok := e.Peek(id); ok && !s.Stored() {
			return s.Record(), nil
		}
		return Record{}, fmt.Errorf("%w: %q", ErrSessionNotFound, id)
	}
	if err != nil {
		return Record{}, err
	}
	if deleted(rec) {
		return Record{}, fmt.Errorf("%w: %q", ErrSessionNotFound, id)
	}
	return rec, nil
}

// List lists stored sessions, newest first; deleted sessions are left out.
func (e *Engine) List(ctx context.Context, o ListOptions) ([]Record, error) {
	limit := o.Limit
	o.Limit = 0 // the limit counts sessions that are not deleted
	all, err := e.cfg.Store.ListSessions(ctx, o)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, r := range all {
		if deleted(r) {
			continue
		}
		out = append(out, r)
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, nil
}

// History returns the active transcript of session id without making it live (nothing for a
// session not yet stored).
func (e *Engine) History(ctx context.Context, id string, q RowQuery) ([]Row, error) {
	if s, ok := e.Peek(id); ok {
		return s.History(ctx, q)
	}
	rows, err := e.cfg.Store.Rows(ctx, id, q)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: %q", ErrSessionNotFound, id)
	}
	return rows, err
}

// Delete ends session id (interrupting a running turn) and marks it deleted. The transcript
// stays in the store; every surface then treats the session as gone. A live session not yet
// stored is simply closed.
func (e *Engine) Delete(ctx context.Context, id string) error {
	if err := e.checkOpen(); err != nil {
		return err
	}
	if _, err := e.Record(ctx, id); err != nil {
		return err
	}
	lazy := false
	if s, ok := e.Peek(id); ok {
		lazy = !s.Stored()
		if err := s.Close(ctx, "deleted"); err != nil {
			return err
		}
	}
	if err := e.markDeleted(ctx, id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			if lazy { // never stored: closing it was all there was to do
				return nil
			}
			return fmt.Errorf("%w: %q", ErrSessionNotFound, id)
		}
		return err
	}
	// An Open that read the record before the mark may have made it live again meanwhile.
	if s, ok := e.Peek(id); ok {
		return s.Close(ctx, "deleted")
	}
	return nil
}

// markDeleted writes the deleted mark (and an end, if the session has none).
func (e *Engine) markDeleted(ctx context.Context, id string) error {
	return e.mark(ctx, id, false)
}

// mark writes the deleted mark; discarded marks too a record that never became a usable
// session, whose id a new session may take over (see createRecord).
func (e *Engine) mark(ctx context.Context, id string, discarded bool) error {
	now := time.Now().UTC()
	_, err := e.cfg.Store.UpdateSession(ctx, id, 0, func(r *store.Session) error {
		r.Meta = maps.Clone(r.Meta)
		if r.Meta == nil {
			r.Meta = map[string]string{}
		}
		if discarded {
			r.Meta[MetaDiscarded] = now.Format(time.RFC3339)
		}
		if r.Meta[MetaDeleted] == "" {
			r.Meta[MetaDeleted] = now.Format(time.RFC3339)
		}
		if r.Title != "" { // a deleted session is gone on every surface: its title is free again
			r.Meta[MetaDeletedTitle], r.Title = r.Title, ""
		}
		if r.EndedAt.IsZero() {
			r.EndedAt, r.EndReason = now, "deleted"
		}
		return nil
	})
	return err
}

// discard takes back a session Create or Branch made but could not finish (its seeded or
// copied transcript was not written): it is closed and marked deleted, so nothing half-made
// stays visible. The returned error joins cause with any failure of the cleanup.
func (e *Engine) discard(ctx context.Context, s *Session, cause error) error {
	ctx = context.WithoutCancel(ctx) // the cleanup runs even when the caller gave up
	s.shutdown("discarded")
	if err := e.mark(ctx, s.id, true); err != nil {
		return errors.Join(cause, fmt.Errorf("mark the incomplete session %s deleted: %w", s.id, err))
	}
	return cause
}

// seed writes a new session's seeded history (CreateOptions.History).
func (s *Session) seed(ctx context.Context, rows []Row) error {
	now := time.Now().UTC()
	rows = append([]Row(nil), rows...)
	for i := range rows {
		if rows[i].Time.IsZero() {
			rows[i].Time = now
		}
	}
	if _, err := s.wst().AppendRows(ctx, s.id, store.Fence{}, rows); err != nil {
		return fmt.Errorf("seed session %s: %w", s.id, err)
	}
	return s.reload(ctx)
}

// BranchOptions configures a branch (fork).
type BranchOptions struct {
	// ID is the branch's id; generated when empty. A taken id is ErrSessionExists.
	ID        string
	UptoRowID uint64 // copy rows up to and including this row id; 0 = all
	Title     string // default "<parent title> #n"
	Source    string
}

// Branch forks a session: a new live session whose parent is id, holding a copy of its
// transcript (up to UptoRowID, which must be an active row: ErrStaleRow). The branch belongs
// to the parent's principal. A branch whose transcript could not be copied is discarded.
func (e *Engine) Branch(ctx context.Context, id string, o BranchOptions) (*Session, error) {
	parent, err := e.Open(ctx, id)
	if err != nil {
		return nil, err
	}
	if !parent.Stored() {
		return nil, ErrNothingToBranch
	}
	if o.UptoRowID != 0 { // refused before anything is created: a refused branch leaves nothing
		rows, err := e.cfg.Store.Rows(ctx, id, store.RowQuery{AfterID: o.UptoRowID - 1, Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(rows) == 0 || rows[0].ID != o.UptoRowID {
			return nil, fmt.Errorf("branch %s: row id %d: %w", id, o.UptoRowID, store.ErrStaleRow)
		}
	}
	prec := parent.Record()
	title := o.Title
	if title == "" && prec.Title != "" {
		title = e.nextLineageTitle(ctx, prec.Title)
	}
	if err := e.checkTitle(ctx, o.ID, title); err != nil { // pending titles of lazy sessions too
		return nil, err
	}
	child, err := e.Create(ctx, CreateOptions{ID: o.ID, Title: title, Model: prec.Model, Cwd: prec.Cwd, inherited: true, Source: o.Source, Principal: prec.Principal, parentID: id, parentKind: "branch"})
	if err != nil {
		return nil, err
	}
	if _, err := e.cfg.Store.CopyRows(ctx, id, child.id, o.UptoRowID); err != nil {
		return nil, e.discard(ctx, child, fmt.Errorf("branch %s: copy transcript: %w", id, err))
	}
	if err := child.reload(ctx); err != nil {
		return nil, err
	}
	return child, nil
}

// Undone reports an undo.
type Undone struct {
	Text     string // the undone user prompt
	RowID    uint64 // its row id
	Archived int    // rows moved out of the active transcript
}

// Undo archives the last user turn (its prompt and everything after it). It holds the turn slot
// while it finds the turn and rewinds, so a prompt cannot start in between: a running turn is
// ErrBusy, and a prompt arriving during the undo waits for it as for a turn.
func (s *Session) Undo(ctx context.Context) (Undone, error) {
	t, err := s.claim(ctx) // a handle released while idle is live again
	if err != nil {
		return Undone{}, err
	}
	defer s.unclaim(t)
	rows, err := s.History(ctx, RowQuery{})
	if err != nil {
		return Undone{}, err
	}
	var last *Row
	for i := range rows {
		if rows[i].Role == "user" {
			last = &rows[i]
		}
	}
	if last == nil {
		return Undone{}, ErrNothingToUndo
	}
	res, err := s.wst().Rewind(ctx, s.id, store.Fence{}, last.ID, nil)
	if errors.Is(err, store.ErrStaleRow) { // another process changed the transcript
		return Undone{}, fmt.Errorf("%w (row id %d)", ErrTruncateStale, last.ID)
	}
	if err != nil {
		return Undone{}, err
	}
	if err := s.reload(ctx); err != nil {
		return Undone{}, err
	}
	return Undone{Text: last.Content, RowID: last.ID, Archived: res.Archived}, nil
}

// Append writes rows at the end of the transcript of an idle session: context a surface adds
// before a prompt (per-request instructions as a system row). It holds the turn slot while it
// writes (ErrBusy while a turn runs). A session not yet stored is stored first.
func (s *Session) Append(ctx context.Context, rows ...Row) error {
	t, err := s.claim(ctx) // a handle released while idle is live again
	if err != nil {
		return err
	}
	defer s.unclaim(t)
	if err := s.ensureStored(ctx); err != nil {
		return err
	}
	return s.seed(ctx, rows)
}

// claim takes the session's turn slot for a transcript edit that is not a turn. While it is
// held, a prompt meets a busy session (the busy-input policy queues or interrupts it — there is
// nothing to steer — and a truncating submit is ErrBusy) and another edit is ErrBusy, so what
// the edit checked still holds when it writes. The claim emits no events: to its watchers the
// session stays idle.
func (s *Session) claim(ctx context.Context) (*turnState, error) {
	var h *heldLease
	if s.Stored() { // the edit writes as the session's lease holder; busy while another process holds it
		var err error
		if h, err = s.hold(ctx); err != nil {
			if elsewhere := (*heldElsewhere)(nil); errors.As(err, &elsewhere) {
				return nil, fmt.Errorf("%w: another process is running this session", ErrBusy)
			}
			return nil, err
		}
	}
	if err := s.lockLive(ctx); err != nil {
		h.unpin()
		return nil, err
	}
	defer s.mu.Unlock()
	if s.closed {
		h.unpin()
		return nil, s.closedErrLocked()
	}
	if s.turn != nil {
		h.unpin()
		return nil, ErrBusy
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	t := &turnState{s: s, id: newID("edit_"), started: time.Now(), ctx: ctx, cancel: cancel, done: make(chan struct{}), finishing: true, lease: h}
	s.turn = t
	return t, nil
}

// unclaim gives the turn slot back and starts what waited for it: a prompt admitted in line
// (Prompt.InLine) or the follow-up queued meanwhile, as the end of a turn does.
func (s *Session) unclaim(t *turnState) {
	t.cancel(nil)
	defer t.lease.unpin() // after the slot is given back: the lease goes once the session is idle
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed && (s.queued != nil || len(s.line) > 0) {
		s.endTurnLocked(t, nil)
		return
	}
	if s.turn == t {
		s.turn = nil
	}
	s.j.touch()
	close(t.done)
}

// Setting returns the durable setting key (ErrNotFound when unset). Settings are a small
// key/value space for surfaces (saved spawn trees, stored responses); keys are namespaced by
// the caller.
func (e *Engine) Setting(ctx context.Context, key string) ([]byte, error) {
	b, err := e.cfg.Store.GetKV(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("setting %q: %w", key, ErrNotFound)
	}
	return b, err
}

// PutSetting writes a durable setting; it is durable when PutSetting returns nil.
func (e *Engine) PutSetting(ctx context.Context, key string, value []byte) error {
	return e.cfg.Store.PutKV(ctx, key, value)
}

// Settings returns the settings whose keys start with prefix.
func (e *Engine) Settings(ctx context.Context, prefix string) (map[string][]byte, error) {
	return e.cfg.Store.ListKV(ctx, prefix)
}

// DeleteSetting removes a setting (removing an unset one is not an error).
func (e *Engine) DeleteSetting(ctx context.Context, key string) error {
	return e.cfg.Store.DeleteKV(ctx, key)
}
