//go:build unix

package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The fault harness's SSE readers: every acknowledged run has one client holding its event
// stream (GET /v1/runs/{id}/events) open on another node than the one that admitted it, through
// the faults. Like an EventSource, it reconnects with Last-Event-ID when its stream breaks: its
// node killed, stopped (a load balancer's health check cuts it), restarting its database, or
// silent past the keep-alive. It also moves to another node now and then on its own, as a
// client behind a load balancer does. Across all of that it must read one log: ids 1, 2, 3, …
// with none repeated and none missing, each frame's sequence_number its id, ending with the
// terminal event of the status every node settles the run at (run.unknown, and the stream
// closed, for a run its killed node left restart-unknown).

// follower is the SSE reader of one run.
type follower struct {
	run  string
	quit chan struct{} // closed when the harness no longer waits for more
	done chan struct{}

	mu     sync.Mutex
	last   int      // the id of the last event read
	names  []string // the events read, in order
	final  string   // the terminal event, once read
	conns  int      // streams opened
	moves  int      // reconnections with Last-Event-ID
	broken string   // the first broken promise, if any
}

func (f *follower) fail(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.broken == "" {
		f.broken = fmt.Sprintf(format, args...)
	}
}

// state is what the follower has read so far.
func (f *follower) state() (last int, names []string, final, broken string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last, append([]string(nil), f.names...), f.final, f.broken
}

// terminalEvent is the event that ends a run's log with status st.
func terminalEvent(st string) string { return "run." + st }

// streamStale is how long a stream may stay silent before its reader gives up on it: the
// server sends a keep-alive comment after 15 s of quiet.
const streamStale = 20 * time.Second

// follow starts the SSE reader of the run id, admitted on node admitted.
func (c *cluster) follow(id string, admitted int) {
	f := &follower{run: id, quit: make(chan struct{}), done: make(chan struct{})}
	c.mu.Lock()
	c.followers[id] = f
	c.mu.Unlock()
	c.readers.Go(func() {
		defer close(f.done)
		c.read(f, (admitted+1+rand.IntN(2))%3)
	})
}

// read follows f's run from node, moving to another node whenever the stream breaks, until
// it has read the terminal event or is told to quit.
func (c *cluster) read(f *follower, node int) {
	for {
		select {
		case <-f.quit:
			return
		default:
		}
		p := c.nodes[node].current()
		if p.stopped.Load() {
			node = (node + 1 + rand.IntN(2)) % 3
			continue
		}
		status, retryAfter := c.stream(f, p)
		if _, _, final, broken := f.state(); final != "" || broken != "" {
			return
		}
		switch status {
		case 200, 204:
			// 204: nothing after Last-Event-ID and the run is over, or restart-unknown for
			// now (it may yet be resolved): ask again in a while.
			if status == 204 {
				time.Sleep(time.Second)
			}
		case 503:
			time.Sleep(min(retryAfter, 2*time.Second))
		case 0: // refused, reset: its node died or is restarting
			time.Sleep(200 * time.Millisecond)
		default:
			return // stream recorded the answer as broken
		}
		node = (node + 1 + rand.IntN(2)) % 3
	}
}

// stream reads one connection of f's stream on p and returns its HTTP status (0 when there was
// no answer) and the Retry-After of a 503.
func (c *cluster) stream(f *follower, p *nodeProc) (int, time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", p.base+"/v1/runs/"+f.run+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	req.Header.Set("Accept", "text/event-stream")
	f.mu.Lock()
	if f.last > 0 {
		req.Header.Set("Last-Event-ID", strconv.Itoa(f.last))
		f.moves++
	}
	f.conns++
	f.mu.Unlock()
	res, err := c.streams.Do(req)
	if err != nil {
		return 0, 0
	}
	defer res.Body.Close()
	switch res.StatusCode {
	case 200, 204:
	case 503:
		s, _ := strconv.Atoi(res.Header.Get("Retry-After"))
		if s <= 0 {
			f.fail("events of %s on %s: 503 without Retry-After", f.run, p.base)
		}
		return 503, time.Duration(s) * time.Second
	default:
		var b [512]byte
		n, _ := res.Body.Read(b[:])
		f.fail("events of %s on %s after %d: %d %s", f.run, p.base, f.last, res.StatusCode, b[:n])
		return res.StatusCode, 0
	}
	if res.StatusCode == 204 {
		// The node's log of the run is over and ends at Last-Event-ID: the event read there
		// must be the end of the log — run.unknown, as the terminal event ends the reading.
		lastID, names, _, _ := f.state()
		if len(names) == 0 || names[len(names)-1] != "run.unknown" {
			f.fail("events of %s on %s after Last-Event-ID %d: 204, the log over without its terminal event, after %v; that node's log: %v", f.run, c.nameOf(p), lastID, names, c.logOn(p, f.run))
		}
		return 204, 0
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		f.fail("events of %s on %s: Content-Type %q", f.run, p.base, ct)
		return res.StatusCode, 0
	}
	// The watchdog hangs up on a stopped node, a stream silent past streamStale, and when the
	// harness no longer waits.
	var heard atomic.Int64 // when the stream last said anything, in Unix nanoseconds
	heard.Store(time.Now().UnixNano())
	watched := make(chan struct{})
	defer func() { <-watched }()
	defer cancel()
	go func() {
		defer close(watched)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-f.quit:
				cancel()
				return
			case <-tick.C:
				if p.stopped.Load() || time.Since(time.Unix(0, heard.Load())) > streamStale {
					cancel()
					return
				}
			}
		}
	}()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	id := -1
	for sc.Scan() {
		heard.Store(time.Now().UnixNano())
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			if id, err = strconv.Atoi(v); err != nil {
				f.fail("events of %s on %s: id line %q", f.run, p.base, line)
				return 200, 0
			}
			continue
		}
		v, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var data map[string]any
		if err := json.Unmarshal([]byte(v), &data); err != nil {
			f.fail("events of %s on %s: data %q: %v", f.run, p.base, v, err)
			return 200, 0
		}
		name, _ := data["event"].(string)
		f.mu.Lock()
		broken := ""
		switch {
		case id <= f.last:
			broken = fmt.Sprintf("id %d (%s) again", id, name)
		case id != f.last+1:
			broken = fmt.Sprintf("id %d (%s), the ones between missing", id, name)
		case data["sequence_number"] != float64(id) || data["run_id"] != f.run:
			broken = fmt.Sprintf("frame %d says sequence_number %v run_id %v", id, data["sequence_number"], data["run_id"])
		}
		if broken != "" {
			last, names := f.last, slices.Clone(f.names)
			f.mu.Unlock()
			f.fail("events of %s on %s after Last-Event-ID %d: %s, after %v; the rest of that stream: %v", f.run, c.nameOf(p), last, broken, names, rest(sc, cancel))
			return 200, 0
		}
		f.last, f.names = id, append(f.names, name)
		if st, ok := strings.CutPrefix(name, "run."); ok && runEnded(st) {
			f.final = name
		}
		final := f.final != ""
		f.mu.Unlock()
		id = -1
		if final {
			return 200, 0
		}
		// Now and then the client moves to another node by itself, as behind a load
		// balancer.
		if rand.IntN(12) == 0 {
			return 200, 0
		}
	}
	return 200, 0
}

// rest reads what a stream still says within 3 s, for a failure's message.
func rest(sc *bufio.Scanner, cancel func()) []string {
	stop := time.AfterFunc(3*time.Second, cancel)
	defer stop.Stop()
	var out []string
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			out = append(out, v)
		} else if v, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var data map[string]any
			_ = json.Unmarshal([]byte(v), &data)
			out = append(out, fmt.Sprint(data["event"]))
		}
	}
	return out
}

// logOn reads the whole log of run on p (its ids and events), for a failure's message.
func (c *cluster) logOn(p *nodeProc, run string) []string {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", p.base+"/v1/runs/"+run+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	res, err := c.streams.Do(req)
	if err != nil {
		return []string{err.Error()}
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	return rest(sc, cancel)
}

// nameOf names the node p is the process of, for a failure's message.
func (c *cluster) nameOf(p *nodeProc) string {
	for _, n := range c.nodes {
		if n.current() == p {
			return n.name + " (" + p.base + ")"
		}
	}
	return "a node since restarted (" + p.base + ")"
}

// runEnded reports whether st is a status a run ends at.
func runEnded(st string) bool {
	switch st {
	case "completed", "failed", "cancelled", "interrupted":
		return true
	}
	return false
}

// checkStream waits for the SSE reader of run id, settled at st on every node, to have read
// the log to its end: the terminal event of st, or run.unknown for a restart-unknown run.
func (c *cluster) checkStream(after, id, st string) {
	t := c.t
	t.Helper()
	c.mu.Lock()
	f := c.followers[id]
	c.mu.Unlock()
	if f == nil {
		t.Fatalf("after %s: run %s has no SSE reader", after, id)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, names, final, broken := f.state()
		if broken != "" {
			c.mu.Lock()
			sid, admitted := c.runs[id], c.runNode[id]
			c.mu.Unlock()
			t.Fatalf("after %s: the SSE reader of run %s (session %s, admitted on node%d, settled %s): %s\n%s\n%s", after, id, sid, admitted, st, broken, c.about(id, sid), c.stored(id, sid))
		}
		if st == "unknown" && len(names) > 0 && names[len(names)-1] == "run.unknown" {
			close(f.quit) // restart-unknown until someone resolves it: the reader stops here
			<-f.done
			break
		}
		if final != "" {
			if final != terminalEvent(st) {
				t.Fatalf("after %s: the SSE reader of run %s read %v, ending with %s; every node says %s", after, id, names, final, st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: the SSE reader of run %s settled %s read %v, not %s within a minute\n%s", after, id, st, names, terminalEvent(st), c.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.mu.Lock()
	c.followed[id] = true
	c.mu.Unlock()
}

// newStreamClient is the readers' HTTP client: no overall timeout (a stream lasts as long as
// its run), but a node that does not answer is given up on.
func newStreamClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		ResponseHeaderTimeout: 10 * time.Second,
		MaxIdleConnsPerHost:   16,
	}}
}
