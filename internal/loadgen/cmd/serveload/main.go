// Command serveload loads a real `hermes serve` process the way a hostile and busy world
// does, and reports whether it kept answering and how its memory behaved.
//
//	go run ./internal/loadgen/cmd/serveload burst [-followers 9000 -chats 1000 -ws 500 -flood 5000]
//	go run ./internal/loadgen/cmd/serveload soak -duration 30m
//
// It starts hermes serve (built from the module, or -bin) over a fake OpenAI-compatible model
// served by this process. The model answers "held " at once and the rest ("released") only
// when the driver opens its gate, so every chat turn and run stays in flight, and its event
// streams open, for as long as the driver wants.
//
// burst holds, all at once: -followers clients on the event streams of -runs held runs
// (GET /v1/runs/{id}/events), -chats streamed chat completions, -ws WebSocket clients of
// /api/ws, and a flood of -flood unauthenticated connections that send half a request and
// wait, redialling when the server closes them. Meanwhile it probes GET /health and an
// authenticated GET /v1/models on fresh connections every 250 ms. Then it releases the
// model and drains every stream: each must end with its terminal event.
//
// soak repeats a smaller mix in cycles (held streams, WebSockets, the flood, short
// non-streamed chats) and samples the server's RSS every -sample.
//
// Clients dial from several loopback addresses (127.0.0.x), as many clients would; the
// flood comes from one address, so the per-address cap refuses its excess. Linux only
// (the loopback aliases and /proc).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/hermes-go/hermes/internal/loadgen"
)

const apiKey = "serveload-key-0123456789abcdef"

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "burst" && os.Args[1] != "soak") {
		fmt.Fprintln(os.Stderr, "usage: serveload burst|soak [flags]")
		os.Exit(2)
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	bin := fs.String("bin", "", "hermes executable (default: build the module's)")
	runs := fs.Int("runs", 10, "held runs whose event streams are followed")
	followers := fs.Int("followers", 9000, "clients following the runs' event streams")
	chats := fs.Int("chats", 1000, "held streamed chat completions")
	wsn := fs.Int("ws", 500, "WebSocket clients")
	flood := fs.Int("flood", 5000, "unauthenticated half-open connections kept up from one address")
	hold := fs.Duration("hold", 30*time.Second, "burst: how long everything is held")
	duration := fs.Duration("duration", 30*time.Minute, "soak: how long it runs")
	sample := fs.Duration("sample", time.Minute, "soak: RSS sampling interval")
	cycle := fs.Duration("cycle", time.Minute, "soak: length of one cycle of held streams")
	extra := fs.String("config", "", "soak/burst: extra lines for the server section of config.yaml")
	_ = fs.Parse(os.Args[2:])
	if mode == "soak" && !flagSet(fs, "followers") {
		*runs, *followers, *chats, *wsn, *flood = 2, 1000, 100, 50, 500
	}

	d, err := start(*bin, *chats+*runs+50, *extra)
	if err != nil {
		fmt.Fprintln(os.Stderr, "serveload:", err)
		os.Exit(1)
	}
	defer d.stop()
	fmt.Printf("hermes serve pid %d at %s; %s\n", d.cmd.Process.Pid, d.base, d.mem())
	switch mode {
	case "burst":
		err = d.burst(*runs, *followers, *chats, *wsn, *flood, *hold)
	case "soak":
		err = d.soak(*runs, *followers, *chats, *wsn, *flood, *duration, *sample, *cycle)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "serveload:", err)
		d.stop()
		os.Exit(1)
	}
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// driver is one hermes serve process under load and the fake model behind it.
type driver struct {
	cmd   *exec.Cmd
	base  string // http://127.0.0.1:port
	model *fakeModel
	home  string
	logs  bytes.Buffer
	logMu sync.Mutex
	once  sync.Once
}

func start(bin string, maxConcurrent int, extra string) (*driver, error) {
	tmp, err := os.MkdirTemp("", "serveload")
	if err != nil {
		return nil, err
	}
	if bin == "" {
		bin = filepath.Join(tmp, "hermes")
		out, err := exec.Command("go", "build", "-o", bin, "github.com/hermes-go/hermes").CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	m, err := newFakeModel()
	if err != nil {
		return nil, err
	}
	home := filepath.Join(tmp, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf("server:\n  max_concurrent: %d\n", maxConcurrent)
	for line := range strings.SplitSeq(extra, ";") {
		if line = strings.TrimSpace(line); line != "" {
			cfg += "  " + line + "\n"
		}
	}
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	d := &driver{model: m, home: tmp}
	d.cmd = exec.Command(bin, "serve", "--addr", "127.0.0.1:0")
	d.cmd.Dir = tmp
	d.cmd.Env = append(os.Environ(), "HERMES_HOME="+home, "HERMES_MODEL=openai:fake", "OPENAI_BASE_URL="+m.url,
		"OPENAI_API_KEY=k", "HERMES_API_KEY="+apiKey)
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			d.logMu.Lock()
			if d.logs.Len() < 1<<20 {
				d.logs.WriteString(line + "\n")
			}
			d.logMu.Unlock()
			if _, after, ok := strings.Cut(line, "listening on http://"); ok && !sent {
				sent = true
				addr <- strings.Fields(after)[0]
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			return nil, fmt.Errorf("hermes serve exited:\n%s", d.logText())
		}
		d.base = "http://" + a
	case <-time.After(time.Minute):
		d.stop()
		return nil, errors.New("hermes serve did not start")
	}
	return d, nil
}

func (d *driver) logText() string {
	d.logMu.Lock()
	defer d.logMu.Unlock()
	return d.logs.String()
}

// stop ends hermes serve with SIGTERM and reports how long it took.
func (d *driver) stop() {
	d.once.Do(func() {
		d.model.release()
		t := time.Now()
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- d.cmd.Wait() }()
		select {
		case err := <-done:
			fmt.Printf("hermes serve exited %v after SIGTERM (%v)\n", time.Since(t).Round(time.Millisecond), err)
		case <-time.After(30 * time.Second):
			_ = d.cmd.Process.Kill()
			<-done
			fmt.Println("hermes serve killed: still running 30 s after SIGTERM")
		}
		if log := d.logText(); strings.Contains(log, "level=ERROR") || strings.Contains(log, "panic") {
			fmt.Printf("server log (errors present):\n%s\n", tail(log, 4000))
		}
		d.model.srv.Close()
		_ = os.RemoveAll(d.home)
	})
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func (d *driver) mem() string {
	m, err := loadgen.ReadMem(d.cmd.Process.Pid)
	if err != nil {
		return "RSS unknown: " + err.Error()
	}
	fds, _ := os.ReadDir("/proc/" + strconv.Itoa(d.cmd.Process.Pid) + "/fd")
	return fmt.Sprintf("RSS %s (peak %s, anon %s), %d open files", loadgen.MB(m.RSS), loadgen.MB(m.HWM), loadgen.MB(m.Anon), len(fds))
}

// client returns an HTTP client whose connections come from the loopback address ip.
func client(ip string, conns int, keepAlive bool) *http.Client {
	dialer := &net.Dialer{Timeout: 20 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{
		DialContext:         dialer.DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
		DisableKeepAlives:   !keepAlive,
	}}
}

// targets spreads clients over n loopback addresses starting at 127.0.0.first.
func (d *driver) targets(first, n, conns int) []*loadgen.Target {
	var out []*loadgen.Target
	for i := range n {
		out = append(out, &loadgen.Target{BaseURL: d.base + "/v1", APIKey: apiKey,
			Client: client(fmt.Sprintf("127.0.0.%d", first+i), conns/n+16, true)})
	}
	return out
}

// openAll opens n streams with at most par dials at a time.
func openAll(n, par int, open func(i int) (*loadgen.Stream, error)) *loadgen.Held {
	h := &loadgen.Held{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, par)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			s, err := open(i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				h.Errors = append(h.Errors, err)
				return
			}
			h.Streams = append(h.Streams, s)
		})
	}
	wg.Wait()
	return h
}

// startRun posts a run and returns its id.
func startRun(ctx context.Context, t *loadgen.Target, input string) (string, error) {
	body, _ := json.Marshal(map[string]any{"input": input})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.BaseURL+"/runs", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+t.APIKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := t.Client.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	var out struct {
		RunID string `json:"run_id"`
	}
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusAccepted || json.Unmarshal(raw, &out) != nil || out.RunID == "" {
		return "", fmt.Errorf("POST /v1/runs: %d %s", res.StatusCode, raw)
	}
	return out.RunID, nil
}

// held is one cycle's held streams.
type held struct {
	runs, chats *loadgen.Held
	opened      time.Duration
}

// holdStreams starts nruns held runs with followers following them and nchats held chats.
func (d *driver) holdStreams(ctx context.Context, tag string, nruns, followers, nchats int) (*held, error) {
	ts := d.targets(10, 10, followers+nchats)
	start := time.Now()
	var ids []string
	for i := range nruns {
		id, err := startRun(ctx, ts[0], fmt.Sprintf("held run %s-%d", tag, i))
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	h := &held{}
	var wg sync.WaitGroup
	wg.Go(func() {
		h.chats = openAll(nchats, 200, func(i int) (*loadgen.Stream, error) {
			body := `{"model":"openai:fake","stream":true,"messages":[{"role":"user","content":"held chat ` + tag + "-" + strconv.Itoa(i) + `"}]}`
			return ts[i%len(ts)].OpenStream(ctx, "/chat/completions", []byte(body))
		})
	})
	wg.Go(func() {
		h.runs = openAll(followers, 300, func(i int) (*loadgen.Stream, error) {
			return ts[i%len(ts)].OpenEvents(ctx, "/runs/"+ids[i%len(ids)]+"/events")
		})
	})
	wg.Wait()
	h.opened = time.Since(start)
	return h, nil
}

// release lets the model finish and drains every stream.
func (d *driver) drain(h *held) (runs, chats loadgen.Summary) {
	d.model.release()
	var wg sync.WaitGroup
	wg.Go(func() { runs = h.runs.Drain() })
	wg.Go(func() { chats = h.chats.Drain() })
	wg.Wait()
	d.model.rearm()
	return runs, chats
}

// probes checks /health and an authenticated request on fresh connections from an address
// no other load uses, every interval, until ctx ends.
type probes struct {
	mu               sync.Mutex
	health, authed   []time.Duration
	healthErr, auErr int
	failed           int // every failure since the start (report resets the others)
	firstErr         error
}

func (p *probes) run(ctx context.Context, base string, every time.Duration) {
	c := client("127.0.0.30", 4, false)
	get := func(path string, auth bool) (time.Duration, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if auth {
			req.Header.Set("Authorization", "Bearer "+apiKey)
		}
		t := time.Now()
		res, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		defer res.Body.Close()
		_, _ = io.Copy(io.Discard, res.Body)
		if res.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("GET %s: %s", path, res.Status)
		}
		return time.Since(t), nil
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		h, herr := get("/health", false)
		a, aerr := get("/v1/models", true)
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		if herr != nil {
			p.healthErr++
			p.failed++
			p.firstErr = cmp(p.firstErr, herr)
		} else {
			p.health = append(p.health, h)
		}
		if aerr != nil {
			p.auErr++
			p.failed++
			p.firstErr = cmp(p.firstErr, aerr)
		} else {
			p.authed = append(p.authed, a)
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func (p *probes) report() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := func(name string, d []time.Duration, errs int) string {
		if len(d) == 0 {
			return fmt.Sprintf("%s: %d ok, %d failed", name, 0, errs)
		}
		d = slices.Clone(d)
		return fmt.Sprintf("%s: %d ok, %d failed, p50 %v p99 %v max %v", name, len(d), errs,
			loadgen.Percentile(d, 50).Round(10*time.Microsecond), loadgen.Percentile(d, 99).Round(10*time.Microsecond), slices.Max(d).Round(10*time.Microsecond))
	}
	s := f("/health", p.health, p.healthErr) + "; " + f("authenticated /v1/models", p.authed, p.auErr)
	if p.firstErr != nil {
		s += "; first error: " + p.firstErr.Error()
	}
	p.health, p.authed, p.healthErr, p.auErr, p.firstErr = nil, nil, 0, 0, nil
	return s
}

// wsClients keeps n WebSocket clients connected; each reads (answering pings) and sends a
// gateway.capabilities request every few seconds.
type wsClients struct {
	connected, failed, answered, lost atomic.Int64
	latMu                             sync.Mutex
	lat                               []time.Duration
}

func (w *wsClients) run(ctx context.Context, base string, n int) *sync.WaitGroup {
	var wg sync.WaitGroup
	url := "ws" + strings.TrimPrefix(base, "http") + "/api/ws?token=" + apiKey
	for i := range n {
		ip := fmt.Sprintf("127.0.0.%d", 40+i%5)
		wg.Go(func() {
			dialer := websocket.Dialer{HandshakeTimeout: 30 * time.Second, NetDialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext}
			c, _, err := dialer.DialContext(ctx, url, nil)
			if err != nil {
				w.failed.Add(1)
				return
			}
			w.connected.Add(1)
			defer c.Close()
			sent := make(chan time.Time, 1)
			go func() {
				<-ctx.Done()
				_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(1000, ""), time.Now().Add(time.Second))
				c.Close()
			}()
			go func() {
				t := time.NewTicker(5 * time.Second)
				defer t.Stop()
				for id := 1; ; id++ {
					select {
					case <-ctx.Done():
						return
					case <-t.C:
					}
					select {
					case sent <- time.Now():
					default:
						continue // the previous request is unanswered
					}
					if c.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":`+strconv.Itoa(id)+`,"method":"gateway.capabilities","params":{}}`)) != nil {
						return
					}
				}
			}()
			for {
				_, msg, err := c.ReadMessage()
				if err != nil {
					if ctx.Err() == nil {
						w.lost.Add(1)
					}
					return
				}
				if bytes.Contains(msg, []byte(`"result"`)) {
					select {
					case t := <-sent:
						w.answered.Add(1)
						w.latMu.Lock()
						w.lat = append(w.lat, time.Since(t))
						w.latMu.Unlock()
					default:
					}
				}
			}
		})
	}
	return &wg
}

func (w *wsClients) report() string {
	w.latMu.Lock()
	lat := w.lat
	w.lat = nil
	w.latMu.Unlock()
	s := fmt.Sprintf("WebSocket: %d connected, %d failed to connect, %d dropped by the server, %d requests answered",
		w.connected.Load(), w.failed.Load(), w.lost.Load(), w.answered.Load())
	if len(lat) > 0 {
		s += fmt.Sprintf(" (p50 %v, p99 %v)", loadgen.Percentile(lat, 50).Round(10*time.Microsecond), loadgen.Percentile(lat, 99).Round(10*time.Microsecond))
	}
	return s
}

// flooder keeps n unauthenticated connections from one address open: each sends half a
// request line and waits. When the server closes it (header timeout) or refuses it (503)
// it dials again (after a second when refused).
type flooder struct {
	dialed, refused, timedOut, stuck, dialErr atomic.Int64
}

func (f *flooder) run(ctx context.Context, base string, n int) *sync.WaitGroup {
	var wg sync.WaitGroup
	addr := strings.TrimPrefix(base, "http://")
	dialer := &net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.250")}}
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				c, err := dialer.DialContext(ctx, "tcp", addr)
				if err != nil {
					f.dialErr.Add(1)
					sleep(ctx, time.Second)
					continue
				}
				f.dialed.Add(1)
				stop := context.AfterFunc(ctx, func() { c.Close() })
				_, _ = io.WriteString(c, "GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Waiting: ")
				_ = c.SetReadDeadline(time.Now().Add(2 * time.Minute))
				b, err := io.ReadAll(io.LimitReader(c, 4096))
				stop()
				c.Close()
				var ne net.Error
				switch {
				case ctx.Err() != nil:
				case bytes.HasPrefix(b, []byte("HTTP/1.1 503")):
					f.refused.Add(1)
					sleep(ctx, time.Second)
				case errors.As(err, &ne) && ne.Timeout():
					f.stuck.Add(1)
				default:
					f.timedOut.Add(1)
				}
			}
		})
	}
	return &wg
}

func (f *flooder) report() string {
	return fmt.Sprintf("flood: %d connections dialled, %d refused with 503, %d closed by the server's header timeout, %d left open 2 min (should be 0), %d dial errors",
		f.dialed.Load(), f.refused.Load(), f.timedOut.Load(), f.stuck.Load(), f.dialErr.Load())
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (d *driver) burst(nruns, followers, nchats, nws, nflood int, hold time.Duration) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fmt.Printf("idle: %s\n", d.mem())
	var pr probes
	probeCtx, stopProbes := context.WithCancel(ctx)
	defer stopProbes()
	probeDone := make(chan struct{})
	go func() { defer close(probeDone); pr.run(probeCtx, d.base, 250*time.Millisecond) }()
	var fl flooder
	floodCtx, stopFlood := context.WithCancel(ctx)
	defer stopFlood()
	floodWG := fl.run(floodCtx, d.base, nflood)
	var ws wsClients
	wsCtx, stopWS := context.WithCancel(ctx)
	defer stopWS()
	wsWG := ws.run(wsCtx, d.base, nws)

	h, err := d.holdStreams(ctx, "burst", nruns, followers, nchats)
	if err != nil {
		return err
	}
	fmt.Printf("opened %d run-event streams (%d failed) and %d chat streams (%d failed) in %v, while the flood and %d WebSockets connected\n",
		len(h.runs.Streams), len(h.runs.Errors), len(h.chats.Streams), len(h.chats.Errors), h.opened.Round(time.Millisecond), nws)
	for _, e := range append(h.runs.Errors, h.chats.Errors...)[:min(3, len(h.runs.Errors)+len(h.chats.Errors))] {
		fmt.Printf("  open error: %v\n", e)
	}
	fmt.Printf("while opening: %s\n", pr.report())
	deadline := time.Now().Add(hold)
	for time.Now().Before(deadline) {
		time.Sleep(min(10*time.Second, time.Until(deadline)))
		fmt.Printf("held %d SSE: %s; %s; %s\n", len(h.runs.Streams)+len(h.chats.Streams), d.mem(), ws.report(), fl.report())
	}
	fmt.Printf("while held: %s\n", pr.report())
	runs, chats := d.drain(h)
	fmt.Printf("drained: run followers %d ended with run.completed, %d errors; chats %d ended with [DONE], %d errors", runs.Streams, runs.Errors, chats.Streams, chats.Errors)
	if err := cmp(runs.Err, chats.Err); err != nil {
		fmt.Printf(" (first: %v)", err)
	}
	fmt.Println()
	stopFlood()
	stopWS()
	floodWG.Wait()
	wsWG.Wait()
	stopProbes()
	<-probeDone
	fmt.Printf("while draining: %s\n", pr.report())
	fmt.Printf("%s\n%s\n", ws.report(), fl.report())
	time.Sleep(2 * time.Second)
	fmt.Printf("after: %s\n", d.mem())
	var bad []string
	if n := len(h.runs.Errors) + len(h.chats.Errors) + runs.Errors + chats.Errors; n > 0 {
		bad = append(bad, fmt.Sprintf("%d streams failed", n))
	}
	if pr.failed > 0 {
		bad = append(bad, fmt.Sprintf("%d probes of /health or /v1/models failed", pr.failed))
	}
	if n := ws.failed.Load() + ws.lost.Load(); n > 0 {
		bad = append(bad, fmt.Sprintf("%d WebSocket clients failed or were dropped", n))
	}
	if n := fl.stuck.Load(); n > 0 {
		bad = append(bad, fmt.Sprintf("%d flood connections were never closed", n))
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

func (d *driver) soak(nruns, followers, nchats, nws, nflood int, duration, sample, cycle time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	start := time.Now()
	fmt.Printf("soak: %v; per cycle of %v: %d runs followed by %d clients, %d held chats; %d WebSockets and a flood of %d throughout; short chats between\n",
		duration, cycle, nruns, followers, nchats, nws, nflood)
	fmt.Printf("minute 0: %s\n", d.mem())
	var pr probes
	go pr.run(ctx, d.base, 2*time.Second)
	var fl flooder
	floodWG := fl.run(ctx, d.base, nflood)
	var ws wsClients
	wsWG := ws.run(ctx, d.base, nws)
	go func() {
		t := time.NewTicker(sample)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fmt.Printf("minute %.0f: %s; %s; %s\n", time.Since(start).Minutes(), d.mem(), pr.report(), ws.report())
			}
		}
	}()
	short := d.targets(60, 2, 8)
	var cycles, errs, shortOK, shortErr int
	for n := 0; ctx.Err() == nil; n++ {
		cycleEnd := time.Now().Add(cycle)
		h, err := d.holdStreams(ctx, "soak"+strconv.Itoa(n), nruns, followers, nchats)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return err
		}
		// Short non-streamed conversations while the streams are held.
		for time.Until(cycleEnd) > 5*time.Second && ctx.Err() == nil {
			body := `{"model":"openai:fake","messages":[{"role":"user","content":"quick ` + strconv.Itoa(shortOK+shortErr) + `"}]}`
			if _, err := short[(shortOK+shortErr)%2].Post(ctx, "/chat/completions", []byte(body)); err != nil {
				if ctx.Err() == nil {
					shortErr++
				}
			} else {
				shortOK++
			}
			sleep(ctx, 200*time.Millisecond)
		}
		runs, chats := d.drain(h)
		if ctx.Err() == nil {
			cycles++
			errs += runs.Errors + chats.Errors
		}
		sleep(ctx, time.Until(cycleEnd))
	}
	floodWG.Wait()
	wsWG.Wait()
	fmt.Printf("soak ended after %v: %d cycles, %d stream errors in complete cycles, %d short chats (%d failed); %s; %s\n",
		time.Since(start).Round(time.Second), cycles, errs, shortOK, shortErr, ws.report(), fl.report())
	fmt.Printf("end: %s\n", d.mem())
	return nil
}

// fakeModel is an OpenAI-compatible chat completions endpoint. A prompt containing "quick"
// is answered at once; any other is answered "held " at once and "released" when the gate
// opens.
type fakeModel struct {
	srv  *http.Server
	url  string
	mu   sync.Mutex
	gate chan struct{}
}

func newFakeModel() (*fakeModel, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m := &fakeModel{url: "http://" + ln.Addr().String() + "/v1", gate: make(chan struct{})}
	m.srv = &http.Server{Handler: http.HandlerFunc(m.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

func (m *fakeModel) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.gate:
	default:
		close(m.gate)
	}
}

func (m *fakeModel) rearm() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gate = make(chan struct{})
}

func (m *fakeModel) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	gate := m.gate
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	chunk := func(delta string, finish string) {
		fr := "null"
		if finish != "" {
			fr = `"` + finish + `"`
		}
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"fake\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, fr)
		if fl != nil {
			fl.Flush()
		}
	}
	chunk(`{"role":"assistant","content":""}`, "")
	if bytes.Contains(body, []byte("quick")) {
		chunk(`{"content":"ok"}`, "")
	} else {
		chunk(`{"content":"held "}`, "")
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		chunk(`{"content":"released"}`, "")
	}
	chunk(`{}`, "stop")
	fmt.Fprint(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"fake\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7}}\n\ndata: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}
