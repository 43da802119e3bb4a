package httpapi

import (
	"errors"

	"github.com/hermes-go/hermes/engine"
)

// errClientGone ends a pump whose stream could not be flushed: the client left.
var errClientGone = errors.New("client gone")

// pump follows run to the end of its turn; it is the one loop of every route that answers
// with a turn, and of a run's worker. Each event of the turn goes to onEvent, which reports
// whether it wrote to sse; a quiet spell (Options.KeepAlive) goes to onQuiet, which writes a
// keep-alive. sse is flushed after each write, and a failed flush ends the pump with
// errClientGone, as does a client seen to have closed the connection meanwhile (sseWriter.gone,
// asked about once a second). pump returns nil once the turn ended (run.done is set and
// run.out holds the outcome), or the error that ended the follow first (the server shutting
// down). A route that answers only when the turn is over passes a nil sse and nil callbacks; a
// run, which writes its own event log, a nil sse and onEvent.
func (s *Server) pump(run *turnRun, sse *sseWriter, onEvent func(engine.Event) bool, onQuiet func()) error {
	var gone func() bool
	if sse != nil {
		gone = sse.gone
	}
	for !run.done {
		ev, err := run.follow(s.ctx, gone)
		switch {
		case errors.Is(err, errSilent):
			if onQuiet == nil {
				continue
			}
			onQuiet()
		case err != nil:
			return err
		case onEvent == nil || !onEvent(ev):
			continue
		}
		if sse != nil && sse.Flush() != nil {
			return errClientGone
		}
	}
	return nil
}
