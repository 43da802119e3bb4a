package engine

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/hermes-go/hermes/engine/store"
)

// alwaysPrefix is where the patterns a person approved "always" are kept (one KV key each).
const alwaysPrefix = "approval/always/"

// alwaysKey is the KV key of a pattern the user approved "always".
func alwaysKey(pattern string) string { return alwaysPrefix + pattern }

// alwaysCache holds the "always" approvals as last listed, for the approval policy's input of
// every tool call. It is trusted only while a store watch on their prefix is live and has
// brought no hint since the listing: any process that approves "always" (or a person who
// removes a key) writes through the store, whose hint empties the cache, and a watch that
// ended or lost hints (a store process reconnected) does too. The watch is looked at on each
// use, with no goroutine: an in-process store's hint is there as soon as its write returned.
// What a remote hint still in flight leaves stale is a pattern approved a moment ago elsewhere,
// which is then asked about again. Without the cache a tool call read the prefix from the
// store.
type alwaysCache struct {
	mu     sync.Mutex
	sub    *store.Subscription // nil until first used, and after it ended
	list   []string
	valid  bool
	closed bool
}

// always returns the patterns approved "always", from the cache when it is current.
func (e *Engine) always(ctx context.Context) []string {
	c := &e.alwaysC
	c.mu.Lock()
	c.pollLocked()
	if c.valid {
		out := c.list
		c.mu.Unlock()
		return out
	}
	if c.sub == nil && !c.closed {
		if sub, err := e.cfg.Store.Watch(context.Background(), store.Interest{KeyPrefixes: []string{alwaysPrefix}}); err == nil {
			c.sub = sub // when the store cannot watch now, the cache stays off until it can
		}
	}
	c.mu.Unlock()
	kv, err := e.cfg.Store.ListKV(ctx, alwaysPrefix)
	if err != nil {
		return nil // fails closed: nothing counts as approved, the policy asks
	}
	out := make([]string, 0, len(kv))
	for k := range kv {
		out = append(out, strings.TrimPrefix(k, alwaysPrefix))
	}
	slices.Sort(out)
	c.mu.Lock()
	if c.sub != nil && !c.pollLocked() {
		c.list, c.valid = out, true
	}
	c.mu.Unlock()
	return out
}

// pollLocked takes the watch's pending hints, if any, and reports whether there were (the
// cache is then emptied); a watch that ended is dropped, to be started again on next use.
func (c *alwaysCache) pollLocked() (changed bool) {
	if c.sub == nil {
		return true
	}
	select {
	case _, ok := <-c.sub.C():
		if !ok {
			c.sub = nil
		} else {
			c.sub.Take()
		}
		c.valid = false
		return true
	default:
		return false
	}
}

// close ends the watch (Engine.Close).
func (c *alwaysCache) close() {
	c.mu.Lock()
	c.closed, c.valid = true, false
	sub := c.sub
	c.sub = nil
	c.mu.Unlock()
	if sub != nil {
		sub.Close()
	}
}
