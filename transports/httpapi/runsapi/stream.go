package runsapi

import (
	"bufio"
	"strconv"
	"time"
)

// frames writes a run's event stream: buffered writes, and a flush that reports a gone client.
type frames struct {
	w   *bufio.Writer
	err error
}

func (f *frames) write(parts ...[]byte) {
	for _, p := range parts {
		if f.err == nil {
			_, f.err = f.w.Write(p)
		}
	}
}

func (f *frames) flush() error {
	if f.err == nil {
		f.err = f.w.Flush()
	}
	return f.err
}

func (rs *Runs) streamRun(w *bufio.Writer, r *run, after int) {
	sse := &frames{w: w}
	sse.write([]byte("retry: 3000\n\n"))
	timer := time.NewTimer(rs.keepAlive)
	defer timer.Stop()
	for {
		evs, done, changed := r.since(after)
		for _, ev := range evs {
			sse.write([]byte("id: "+strconv.Itoa(ev.seq)+"\n"), []byte("data: "), ev.data, []byte("\n\n"))
			after = ev.seq
		}
		if done {
			sse.write([]byte(": stream closed\n\n"))
			_ = sse.flush()
			return
		}
		if sse.flush() != nil {
			return
		}
		timer.Reset(rs.keepAlive)
		select {
		case <-changed:
		case <-timer.C:
			sse.write([]byte(": keepalive\n\n"))
		case <-rs.ctx.Done():
			// The run's worker settles it as interrupted; deliver that before closing.
			rs.finishStream(sse, r, after)
			return
		}
	}
}

// finishStream waits (bounded) for the terminal event of a run whose server is stopping and
// writes what came after `after`, so a stream ends with the terminal event rather than a cut.
func (rs *Runs) finishStream(sse *frames, r *run, after int) {
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	for {
		evs, done, changed := r.since(after)
		for _, ev := range evs {
			sse.write([]byte("id: "+strconv.Itoa(ev.seq)+"\n"), []byte("data: "), ev.data, []byte("\n\n"))
			after = ev.seq
		}
		if done {
			sse.write([]byte(": stream closed\n\n"))
			_ = sse.flush()
			return
		}
		if sse.flush() != nil {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			return
		}
	}
}
