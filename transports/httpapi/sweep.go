package httpapi

import (
	"time"

	"github.com/hermes-go/hermes/engine"
)

// DefaultSessionIdleRelease is how long a session this server created may sit unused before
// the engine lets go of it (Options.SessionIdleRelease).
const DefaultSessionIdleRelease = 10 * time.Minute

// Sweep period bounds: a sweep walks every live session, so it runs at most once a second and
// at least once a minute (sooner than the idle period itself, when that is shorter).
const (
	minSweepEvery = time.Second
	maxSweepEvery = time.Minute
)

// startSweeper starts the goroutine that releases idle sessions; Shutdown stops it (s.ctx) and
// waits for it (s.sweepDone).
func (s *Server) startSweeper() {
	s.sweepDone = make(chan struct{})
	if s.opts.SessionIdleRelease < 0 {
		close(s.sweepDone)
		return
	}
	every := min(max(s.opts.SessionIdleRelease, minSweepEvery), maxSweepEvery)
	go func() {
		defer close(s.sweepDone)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-t.C:
				s.sweep()
			}
		}
	}()
}

// sweep releases the sessions of this server that were idle for SessionIdleRelease and
// returns how many it released. A released session is loaded again from the store by the next
// request that names it, so a server that serves many conversations holds only those in use.
func (s *Server) sweep() int {
	if s.opts.SessionIdleRelease < 0 {
		return 0
	}
	return s.eng.ReleaseIdle(s.opts.SessionIdleRelease, s.keepSession)
}

// keepSession is the keep filter of sweep: only sessions created through this API (chat,
// responses, runs and the sessions routes create them with Source Surface), or sub-agents
// working for one, are released. Sessions of the WebSocket gateway and other surfaces are
// theirs to manage, and so is an API session a gateway client resumed (the gateway keeps its
// entry for a reconnect). A session with runs in its queue is kept too: the queue's worker is
// about to start the next one on it.
func (s *Server) keepSession(sess *engine.Session) bool {
	if sess.Root().Record().Source != Surface {
		return true
	}
	if s.gw != nil && s.gw.Holds(sess.Root().ID()) {
		return true
	}
	return s.runs.Busy(sess.ID())
}
