package runsapi

import (
	"bufio"
	"strconv"
	"time"

	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
)

// finishWithin bounds how long the stream of a run whose server is stopping waits for the run's
// terminal event.
const finishWithin = 5 * time.Second

// streamRun is the one loop of a run's event stream: it writes the run's events after `after`,
// each with its id, as they come, until the log is over (then "stream closed") or the client
// left. A quiet spell of keepAlive gets a comment, which is also how the stream notices a gone
// client. When the server stops, the run's worker settles it as interrupted: the stream waits
// (at most finishWithin, without keep-alives) to deliver that, so it ends with the terminal
// event rather than a cut.
func (rs *Runs) streamRun(w *bufio.Writer, r *run, after int) {
	defer r.attach()()
	out := &wire.Frames{W: w}
	out.Put([]byte("retry: 3000\n\n"))
	quiet := time.NewTimer(rs.keepAlive)
	defer quiet.Stop()
	keepAlive, stopping := quiet.C, rs.ctx.Done()
	var finish *time.Timer // started when the server stops
	defer func() {
		if finish != nil {
			finish.Stop()
		}
	}()
	var deadline <-chan time.Time
	for {
		evs, done, changed := r.since(after)
		for _, ev := range evs {
			out.Put([]byte("id: "+strconv.Itoa(ev.seq)+"\n"), []byte("data: "), ev.data, []byte("\n\n"))
			after = ev.seq
		}
		if done {
			out.Put([]byte(": stream closed\n\n"))
			_ = out.Flush()
			return
		}
		if out.Flush() != nil {
			return
		}
		quiet.Reset(rs.keepAlive)
		select {
		case <-changed:
		case <-keepAlive:
			out.Put([]byte(": keepalive\n\n"))
		case <-stopping:
			finish = time.NewTimer(finishWithin)
			keepAlive, stopping, deadline = nil, nil, finish.C
		case <-deadline:
			return
		}
	}
}
