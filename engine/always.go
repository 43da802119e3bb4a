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
	mu       sync.Mutex
	sub      *store.Subscription // nil until first used, and after it ended
	ver      uint64              // bumped by every hint taken and every change of the watch
	list     []string
	valid    bool
	closed   bool
	watching bool // a Watch call is under way (made without mu)
}

// always returns the patterns approved "always", from the cache when it is current. A listing
// is kept only when no hint was taken and the watch did not change while it was read (ver): a
// slower listing never replaces a newer one.
func (e *Engine) always(ctx context.Context) []string {
	c := &e.alwaysC
	c.mu.Lock()
	c.pollLocked()
	if c.valid {
		out := c.list
		c.mu.Unlock()
		return out
	}
	start := c.sub == nil && !c.closed && !c.watching
	if start {
		c.watching = true
	}
	c.mu.Unlock()
	if start {
		// Made without the lock: a store slow to answer a Watch delays this call only, and the
		// others (and Engine.Close) go on meanwhile, reading the approvals from the store.
		sub, err := e.cfg.Store.Watch(context.Background(), store.Interest{KeyPrefixes: []string{alwaysPrefix}})
		c.mu.Lock()
		c.watching = false
		if err == nil {
			if c.closed || c.sub != nil {
				sub.Close()
			} else {
				c.sub = sub
				c.ver++
			}
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	c.pollLocked()
	ver := c.ver
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
	c.pollLocked()
	if c.sub != nil && c.ver == ver { // a watch set up or dropped meanwhile bumped ver
		c.list, c.valid = out, true
	}
	c.mu.Unlock()
	return out
}

// pollLocked takes the watch's pending hints, if any: the cache is then emptied and ver
// bumped. A watch that ended is dropped (ver bumped too), to be started again on next use.
func (c *alwaysCache) pollLocked() {
	if c.sub == nil {
		return
	}
	select {
	case _, ok := <-c.sub.C():
		if !ok {
			c.sub = nil
		} else {
			c.sub.Take()
		}
		c.valid = false
		c.ver++
	default:
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
