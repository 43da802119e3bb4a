package badgerstore

import (
	"context"

	"github.com/dgraph-io/badger/v4"

	"github.com/hermes-go/hermes/engine/store"
)

// lastEvent returns the seq of sid's last stored event (0: none). Inside an update transaction
// it sees the writes of earlier ops of the batch.
func lastEvent(txn *badger.Txn, sid string) (uint64, error) {
	prefix := eventPrefix(sid)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true})
	defer it.Close()
	// Past every key of the prefix: the prefix followed by the largest seq.
	it.Seek(eventKey(sid, ^uint64(0)))
	if !it.Valid() {
		return 0, nil
	}
	return rowIDFromKey(prefix, it.Item().Key())
}

// AppendEvents appends to the session's event log; see store.Store.
func (s *Store) AppendEvents(ctx context.Context, sessionID string, f store.Fence, evs []store.StoredEvent) error {
	gen := store.WriterGeneration(ctx, sessionID, f)
	encoded := make([][]byte, len(evs))
	for i, e := range evs {
		e.Generation = gen
		v, err := encodeEvent(e)
		if err != nil {
			return err
		}
		encoded[i] = v
	}
	return s.do(ctx, func(b *batchTxn, w *writes) error {
		if _, err := fencedSession(b, sessionID, f); err != nil {
			return err
		}
		last, err := lastEvent(b.txn, sessionID)
		if err != nil {
			return err
		}
		if err := store.CheckEvents(sessionID, last, gen, evs); err != nil {
			return err
		}
		for i, e := range evs {
			w.set(eventKey(sessionID, e.Seq), encoded[i])
		}
		return nil
	})
}

// EventsSince returns the session's events after afterSeq; see store.Store.
func (s *Store) EventsSince(ctx context.Context, sessionID string, afterSeq uint64, limit int) ([]store.StoredEvent, error) {
	out := []store.StoredEvent{}
	err := s.view(ctx, func(txn *badger.Txn) error {
		if _, err := getSession(txn, sessionID); err != nil {
			return err
		}
		prefix := eventPrefix(sessionID)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		for it.Seek(eventKey(sessionID, afterSeq+1)); it.Valid(); it.Next() {
			if limit > 0 && len(out) >= limit {
				break
			}
			item := it.Item()
			var e store.StoredEvent
			if err := item.Value(func(v []byte) error {
				var err error
				e, err = decodeEvent(prefix, item.Key(), v)
				return err
			}); err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// LastEventSeq returns the seq of the session's last event; see store.Store.
func (s *Store) LastEventSeq(ctx context.Context, sessionID string) (uint64, error) {
	var last uint64
	err := s.view(ctx, func(txn *badger.Txn) error {
		if _, err := getSession(txn, sessionID); err != nil {
			return err
		}
		var err error
		last, err = lastEvent(txn, sessionID)
		return err
	})
	return last, err
}
