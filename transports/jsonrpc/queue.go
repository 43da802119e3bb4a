package jsonrpc

import (
	"context"
	"sync"
)

// The reader may run this far ahead of the dispatcher: so many messages, of at most so many
// bytes together (a single larger message is still taken when nothing waits). Within it a
// $/cancelRequest, or a response to our request, is read while the work ahead of it runs.
const (
	queueMaxJobs  = 64
	queueMaxBytes = 1 << 20
)

// queue hands the reader's messages to the dispatcher in arrival order. When it is full the
// reader stops reading, so a peer that does not read its answers stops being read.
type queue struct {
	mu     sync.Mutex
	cond   sync.Cond
	jobs   []queued
	bytes  int
	closed bool // no more pushes; pop drains what is left
	ended  bool // the connection ended: push gives up
}

type queued struct {
	run  func()
	size int
}

func newQueue(ctx context.Context) *queue {
	q := &queue{}
	q.cond.L = &q.mu
	context.AfterFunc(ctx, func() {
		q.mu.Lock()
		q.ended = true
		q.cond.Broadcast()
		q.mu.Unlock()
	})
	return q
}

// push waits for room; false when the connection ended first.
func (q *queue) push(run func(), size int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for !q.ended && len(q.jobs) > 0 && (len(q.jobs) >= queueMaxJobs || q.bytes+size > queueMaxBytes) {
		q.cond.Wait()
	}
	if q.ended {
		return false
	}
	q.jobs = append(q.jobs, queued{run, size})
	q.bytes += size
	q.cond.Broadcast()
	return true
}

// close tells pop that nothing more comes.
func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

// pop waits for the next job; false once the queue is closed and empty.
func (q *queue) pop() (func(), bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.jobs) == 0 && !q.closed {
		q.cond.Wait()
	}
	if len(q.jobs) == 0 {
		return nil, false
	}
	j := q.jobs[0]
	q.jobs[0] = queued{}
	q.jobs = q.jobs[1:]
	q.bytes -= j.size
	q.cond.Broadcast()
	return j.run, true
}
