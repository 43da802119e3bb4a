package badgerstore

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hermes-go/hermes/engine/store"
)

// nsQuarantine holds records moved aside by Doctor: q/<unix nanos>/<original key>. No
// listing or lookup reads it; the nanoseconds keep a second quarantine of the same key from
// overwriting the first.
const nsQuarantine = "q/"

var _ store.Doctor = (*Store)(nil)

// Doctor implements store.Doctor. It checks session records (decodable, and holding the id of
// their key), transcript rows (active and archived), leases and logged events.
func (s *Store) Doctor(ctx context.Context, quarantine bool) ([]store.Problem, error) {
	var found []store.Problem
	err := s.view(ctx, func(txn *badger.Txn) error {
		for _, ns := range []string{nsSession, nsActive, nsArchive, nsLease, nsEvent} {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(ns)})
			for it.Rewind(); it.Valid(); it.Next() {
				if err := ctx.Err(); err != nil {
					it.Close()
					return err
				}
				item := it.Item()
				key := item.KeyCopy(nil)
				var p *store.Problem
				if err := item.Value(func(v []byte) error { p = checkRecord(key, v); return nil }); err != nil {
					it.Close()
					return err
				}
				if p != nil {
					found = append(found, *p)
				}
			}
			it.Close()
		}
		return nil
	})
	if err != nil || !quarantine || len(found) == 0 {
		return found, err
	}
	stamp := strconv.FormatInt(time.Now().UnixNano(), 10) + "/"
	err = s.do(ctx, func(b *batchTxn, w *writes) error {
		for i := range found {
			found[i].MovedTo = ""
			key := []byte(found[i].Key)
			val, err := getCopy(b.txn, key)
			if err != nil {
				return err
			}
			if val == nil || checkRecord(key, val) == nil {
				continue // gone or repaired since the scan
			}
			moved := nsQuarantine + stamp + found[i].Key
			w.set([]byte(moved), val)
			w.del(key)
			found[i].MovedTo = moved
			if found[i].Kind == "session" {
				id := found[i].Key[len(nsSession):]
				// The committer may hold the record decoded under its key's id; a later write
				// must not resurrect it.
				delete(b.s.sessionCache, id)
				delete(b.sessions, id)
				if err := moveTitle(b, w, id, nsQuarantine+stamp); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		for i := range found {
			found[i].MovedTo = ""
		}
		return found, err
	}
	for _, p := range found {
		if p.MovedTo != "" {
			s.skipped.Delete(p.Key)
		}
	}
	return found, nil
}

// moveTitle moves the title index entry that names session id, if any, along with it: left in
// place it would hold the title for a session nobody can see.
func moveTitle(b *batchTxn, w *writes, id, dest string) error {
	it := b.txn.NewIterator(badger.IteratorOptions{Prefix: []byte(nsTitle)})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		val, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		if string(val) == id {
			key := item.KeyCopy(nil)
			w.set(append([]byte(dest), key...), val)
			w.del(key)
		}
	}
	return nil
}

// checkRecord decodes one record the way the store's readers will; nil means it is sound.
func checkRecord(key, val []byte) *store.Problem {
	problem := func(kind string, err error) *store.Problem {
		return &store.Problem{Kind: kind, Key: string(key), Reason: err.Error()}
	}
	switch {
	case bytes.HasPrefix(key, []byte(nsSession)):
		if _, err := decodeSession(key, val); err != nil {
			return problem("session", err)
		}
	case bytes.HasPrefix(key, []byte(nsActive)), bytes.HasPrefix(key, []byte(nsArchive)):
		archived := bytes.HasPrefix(key, []byte(nsArchive))
		ns := len(nsActive)
		if archived {
			ns = len(nsArchive)
		}
		if len(key) < ns+1+8 || key[len(key)-9] != '/' {
			return problem("row", fmt.Errorf("%w: row key %q is malformed", store.ErrCorrupt, key))
		}
		prefix := key[:len(key)-8]
		sid := string(key[ns : len(key)-9])
		if _, err := decodeRow(prefix, key, val, sid, archived); err != nil {
			return problem("row", err)
		}
	case bytes.HasPrefix(key, []byte(nsEvent)):
		if len(key) < len(nsEvent)+1+8 || key[len(key)-9] != '/' {
			return problem("event", fmt.Errorf("%w: event key %q is malformed", store.ErrCorrupt, key))
		}
		if _, err := decodeEvent(key[:len(key)-8], key, val); err != nil {
			return problem("event", err)
		}
	case bytes.HasPrefix(key, []byte(nsLease)):
		if _, err := decodeLease(key, val); err != nil {
			return problem("lease", err)
		}
	}
	return nil
}
