package store

import (
	"context"
	"slices"
	"strings"
	"sync"
)

// Change is one wake-up hint: a session's record, rows or lease changed (SessionID set), or a KV
// key was written or deleted (Key set). A hint says where to look, never what is there: a
// reader catches up by its own cursor (row id, event seq) on every hint.
type Change struct {
	SessionID string `json:"s,omitempty"`
	Key       string `json:"k,omitempty"`
}

// Interest selects the changes a subscription receives.
type Interest struct {
	Sessions    []string `json:"sessions,omitempty"`     // these sessions' record, rows and lease
	AllSessions bool     `json:"all_sessions,omitempty"` // every session's
	KeyPrefixes []string `json:"key_prefixes,omitempty"` // KV keys under any of these ("" = every key)
}

// Matches reports whether c is selected by in.
func (in Interest) Matches(c Change) bool {
	if c.SessionID != "" && (in.AllSessions || slices.Contains(in.Sessions, c.SessionID)) {
		return true
	}
	if c.Key != "" {
		for _, p := range in.KeyPrefixes {
			if strings.HasPrefix(c.Key, p) {
				return true
			}
		}
	}
	return false
}

// maxPending bounds the distinct changes a subscription holds between two Takes; beyond it the
// subscription forgets them and reports Lost instead, so a watcher that stops reading costs
// bounded memory.
const maxPending = 4096

// Subscription receives change hints. C is signalled (coalesced: one pending signal however many
// changes arrived) when Take has something; C is closed when the subscription ends. Hints may be
// coalesced or, with Lost, dropped, but a change made after Watch returned is never missed
// without either a hint naming it or Lost: a remote store reports Lost after reconnecting, since
// hints sent while it was away are gone. A watcher that sees Lost re-reads everything it follows.
type Subscription struct {
	in  Interest
	hub *Hub
	c   chan struct{}

	mu      sync.Mutex
	pending map[Change]struct{}
	lost    bool
	closed  bool
	stop    func() bool // detaches the context watch
	onClose func()
}

// C is signalled when changes are pending, and closed when the subscription ends.
func (s *Subscription) C() <-chan struct{} { return s.c }

// Take returns the pending changes (in no particular order) and whether some were lost, and
// clears them.
func (s *Subscription) Take() (changes []Change, lost bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.pending {
		changes = append(changes, c)
	}
	clear(s.pending)
	lost, s.lost = s.lost, false
	return changes, lost
}

// Close ends the subscription; it is idempotent.
func (s *Subscription) Close() {
	if s.hub != nil {
		s.hub.remove(s)
	}
	s.end()
}

func (s *Subscription) end() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	if s.stop != nil {
		s.stop()
	}
	close(s.c)
	onClose := s.onClose
	s.mu.Unlock()
	if onClose != nil {
		onClose()
	}
}

// Interest returns what the subscription selects.
func (s *Subscription) Interest() Interest { return s.in }

// Deliver adds changes that match the subscription's interest and signals C. Stores feed their
// subscriptions through a Hub; a remote store's client delivers what its server pushed.
func (s *Subscription) Deliver(changes []Change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	added := false
	for _, c := range changes {
		if !s.in.Matches(c) {
			continue
		}
		added = true
		if s.lost {
			continue // the watcher re-reads everything anyway
		}
		if len(s.pending) >= maxPending {
			s.lost = true
			clear(s.pending)
			continue
		}
		s.pending[c] = struct{}{}
	}
	if added {
		s.signal()
	}
}

// MarkLost tells the watcher that hints may have been missed (a remote store reconnected).
func (s *Subscription) MarkLost() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.lost = true
	clear(s.pending)
	s.signal()
}

// signal leaves one pending signal on C; s.mu is held.
func (s *Subscription) signal() {
	select {
	case s.c <- struct{}{}:
	default:
	}
}

// NewSubscription returns a subscription fed by the caller through Deliver and MarkLost (a remote
// store's client), ended by Close or when ctx ends; onClose, if not nil, runs once when it ends.
// Stores with local writers use a Hub.
func NewSubscription(ctx context.Context, in Interest, onClose func()) *Subscription {
	s := &Subscription{in: in, c: make(chan struct{}, 1), pending: map[Change]struct{}{}, onClose: onClose}
	s.watch(ctx)
	return s
}

// watch ends s when ctx ends.
func (s *Subscription) watch(ctx context.Context) {
	stop := context.AfterFunc(ctx, s.Close)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		stop()
	} else {
		s.stop = stop
	}
}

// Hub fans change hints out to subscriptions; the in-process stores embed one. The zero value is
// ready to use.
type Hub struct {
	mu     sync.RWMutex
	subs   map[*Subscription]struct{}
	closed bool
}

// Subscribe returns a subscription to in, ended by ctx, Close, or Hub.Close (ErrClosed after it).
func (h *Hub) Subscribe(ctx context.Context, in Interest) (*Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := &Subscription{in: in, hub: h, c: make(chan struct{}, 1), pending: map[Change]struct{}{}}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	if h.subs == nil {
		h.subs = map[*Subscription]struct{}{}
	}
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	// Registered before the context watch, so a context that ends now still finds it to remove.
	s.watch(ctx)
	return s, nil
}

// Publish delivers changes to every subscription that wants them. It never blocks on a watcher.
func (h *Hub) Publish(changes ...Change) {
	if len(changes) == 0 {
		return
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	for s := range h.subs {
		s.Deliver(changes)
	}
}

// MarkLost tells every subscription that hints may have been missed (a store whose source of
// hints from other processes was cut off and is back).
func (h *Hub) MarkLost() {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for s := range h.subs {
		s.MarkLost()
	}
}

// Close ends every subscription; later Subscribe calls fail with ErrClosed.
func (h *Hub) Close() {
	h.mu.Lock()
	subs := h.subs
	h.subs, h.closed = nil, true
	h.mu.Unlock()
	for s := range subs {
		s.end()
	}
}

// Watchers returns the number of live subscriptions.
func (h *Hub) Watchers() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.subs)
}

func (h *Hub) remove(s *Subscription) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}
