package builtin

import (
	"bytes"
	"strings"
	"sync"
	"time"
)

const (
	// progressInterval bounds how often interim output is reported: often enough to feel
	// live, rarely enough that a chatty build does not flood the surfaces.
	progressInterval = 250 * time.Millisecond
	// progressMaxChunk caps one report. When more arrived since the last report only its end
	// is sent; the full output is in the final result anyway.
	progressMaxChunk = 8 << 10
	// progressMaxPending bounds the buffered partial line.
	progressMaxPending = 64 << 10
)

// progressPump forwards a command's output to Env.Progress as whole lines, at most once per
// progressInterval. It is an io.Writer for the process reader; its own goroutine (started by
// run, ended by close) does the reporting, so a slow Progress never stalls the pipe.
type progressPump struct {
	emit    func(string)
	mu      sync.Mutex
	pending []byte
	skipped bool // bytes were dropped from pending since the last report
	quit    chan struct{}
	wg      sync.WaitGroup
}

func newProgressPump(emit func(string)) *progressPump {
	pp := &progressPump{emit: emit, quit: make(chan struct{})}
	pp.wg.Add(1)
	go pp.run()
	return pp
}

func (pp *progressPump) Write(b []byte) (int, error) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	pp.pending = append(pp.pending, b...)
	if over := len(pp.pending) - progressMaxPending; over > 0 {
		pp.pending = append(pp.pending[:0], pp.pending[over:]...)
		pp.skipped = true
	}
	return len(b), nil
}

func (pp *progressPump) run() {
	defer pp.wg.Done()
	tick := time.NewTicker(progressInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			pp.flush(false)
		case <-pp.quit:
			pp.flush(true)
			return
		}
	}
}

// flush reports the complete lines received since the last report; with final, also a
// trailing partial line.
func (pp *progressPump) flush(final bool) {
	pp.mu.Lock()
	var chunk []byte
	if final {
		chunk, pp.pending = pp.pending, nil
	} else if i := bytes.LastIndexByte(pp.pending, '\n'); i >= 0 {
		chunk = bytes.Clone(pp.pending[:i+1])
		pp.pending = append(pp.pending[:0], pp.pending[i+1:]...)
	}
	skipped := pp.skipped && len(chunk) > 0
	if skipped {
		pp.skipped = false
	}
	pp.mu.Unlock()
	if len(chunk) == 0 {
		return
	}
	if len(chunk) > progressMaxChunk {
		chunk = chunk[len(chunk)-progressMaxChunk:]
		skipped = true
	}
	text := strings.ToValidUTF8(string(chunk), "\uFFFD")
	if skipped {
		text = "[...]\n" + text
	}
	pp.emit(text)
}

// close reports what is left and waits for the pump goroutine. Call it once, after the last
// Write.
func (pp *progressPump) close() {
	close(pp.quit)
	pp.wg.Wait()
}
