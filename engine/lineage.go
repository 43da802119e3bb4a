package engine

import (
	"context"

	"github.com/hermes-go/hermes/engine/store"
)

// lineageBefore finds the transcript as it stood just before the archived user row id was
// written, for a rewind to a row a compaction replaced: walking back from the row through the
// stored history (archived rows included) to the summary that began its transcript, or to the
// start. ok is false when id is not an archived user row of the session, or when the walk
// crosses an earlier rewind (a turn's rows appear in two separate runs), where the rows before
// it are not one transcript.
func (s *Session) lineageBefore(ctx context.Context, id uint64) (seg []store.Row, ok bool, err error) {
	all, err := s.History(ctx, store.RowQuery{IncludeArchived: true})
	if err != nil {
		return nil, false, err
	}
	at := -1
	for i, r := range all {
		if r.ID == id {
			at = i
		}
	}
	if at < 0 || all[at].Active || all[at].Role != "user" {
		return nil, false, nil
	}
	start := 0
	for i := at - 1; i >= 0; i-- {
		if all[i].Active {
			return nil, false, nil
		}
		if all[i].DisplayKind == "summary" {
			start = i
			break
		}
	}
	seg = all[start:at]
	seen := map[string]bool{}
	for i, r := range seg {
		if r.TurnID == "" || (i > 0 && seg[i-1].TurnID == r.TurnID) {
			continue
		}
		if seen[r.TurnID] {
			return nil, false, nil
		}
		seen[r.TurnID] = true
	}
	return seg, true, nil
}

// rewindLineage makes seg (copies, under fresh ids) and the new user row the whole active
// transcript, in one store transaction; everything active before is archived.
func (s *Session) rewindLineage(ctx context.Context, seg []store.Row, userRow store.Row) (Admission, error) {
	extra := make([]store.Row, 0, len(seg)+1)
	for _, r := range seg {
		r.ID, r.Active = 0, true
		extra = append(extra, r)
	}
	extra = append(extra, userRow)
	res, err := s.wst().Rewind(ctx, s.id, store.Fence{}, 0, extra)
	if err != nil {
		return Admission{}, err
	}
	adm := Admission{Survivors: []uint64{}}
	for _, r := range res.Appended[:len(res.Appended)-1] {
		if r.Role == "user" {
			adm.Survivors = append(adm.Survivors, r.ID)
		}
	}
	adm.UserRowID = res.Appended[len(res.Appended)-1].ID
	if err := s.reload(ctx); err != nil {
		return Admission{}, err
	}
	return adm, nil
}
