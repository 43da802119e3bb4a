package httpapi

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/store/memstore"
)

var (
	errCopy = errors.New("copy failed")
	errMark = errors.New("mark failed")
)

// brokenBranchStore cannot copy rows nor update a record.
type brokenBranchStore struct{ store.Store }

func (brokenBranchStore) CopyRows(context.Context, string, string, uint64) (int, error) {
	return 0, errCopy
}

func (brokenBranchStore) UpdateSession(context.Context, string, uint64, func(*store.Session) error) (store.Session, error) {
	return store.Session{}, errMark
}

// A branch whose rows could not be copied is marked deleted; when that write fails too, the
// caller hears of both failures.
func TestForkAsReportsAFailedCleanup(t *testing.T) {
	st := brokenBranchStore{memstore.New()}
	s := newInternal(t, st)
	now := time.Now().UTC()
	parent, err := st.CreateSession(context.Background(), store.Session{ID: "parent", Source: "test", CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.forkAs(parent, "child", "", 0)
	if !errors.Is(err, errCopy) || !errors.Is(err, errMark) {
		t.Fatalf("forkAs: %v, want the copy's and the cleanup's failures", err)
	}
}
