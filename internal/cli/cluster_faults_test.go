//go:build unix

package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/store/postgres"
	"github.com/hermes-go/hermes/engine/store/postgres/pgtest"
)

// The fault harness of the PostgreSQL store: three `hermes serve` nodes on one private
// PostgreSQL cluster, a workload spread over them (sessions created on one node and prompted
// from the others, response chains continued on another node at each step, runs admitted on
// one node and read from the others, each run's event stream held open by an SSE reader on
// another node that reconnects with Last-Event-ID through the faults: cluster_streams_test.go),
// and rounds of faults in the middle of that traffic:
// kill -9 of a node and its restart, SIGSTOP and SIGCONT of a node, an immediate restart of
// PostgreSQL (crash recovery). After each round every acknowledged session, prompt, answer,
// response and run must be there and readable from every node, every run settled alike on all
// three within runSettle (restart-unknown only when its node was killed). While the database is
// down, every node answers a clear 503 with Retry-After in the OpenAI error form, and so does a
// turn the outage cut (a 5xx for a store outage fails the test; other 5xx are counted).
//
// HERMES_CLUSTER_ROUNDS sets how many times the three faults are played (default 1).

// leaseTTL is the engine's default session lease TTL.
const leaseTTL = 10 * time.Second

// clusterNode is one `hermes serve` process of the cluster; restarts replace proc.
type clusterNode struct {
	name string
	home string
	mu   sync.Mutex
	proc *nodeProc
	past strings.Builder // the logs of its earlier lives
}

// allLogs is the node's stderr over all its lives.
func (n *clusterNode) allLogs() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.past.String() + n.proc.logs.String()
}

type nodeProc struct {
	base    string
	cmd     *exec.Cmd
	logs    *lockedBuffer
	done    chan struct{}
	stopped atomic.Bool // SIGSTOPped
}

func (n *clusterNode) current() *nodeProc {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc
}

type cluster struct {
	t      *testing.T
	pg     *pgtest.Cluster
	url    string
	env    []string
	nodes  []*clusterNode
	client *http.Client

	mu          sync.Mutex
	sessions    map[string][]string  // acknowledged session → its acknowledged prompts, in order
	responses   map[string]string    // acknowledged response id → the answer it carried
	runs        map[string]string    // acknowledged run id → its session
	runNode     map[string]int       // acknowledged run id → the node that admitted it
	cut         map[string]bool      // runs admitted by a node later killed
	unknown     int                  // runs settled as restart-unknown (their node killed mid-run)
	parked      map[string]int       // runs parked at an approval, not answered yet → the node that admitted them
	approved    int                  // approvals answered on another node than the one running the run
	cutParked   int                  // runs parked at an approval that the fault settled first (their node killed or stopped)
	adoptedPins int                  // runs parked on a killed or stopped node, adopted by another and completed
	events      int                  // stored events of the acknowledged sessions, last check
	fenced      int                  // of them written under a lease generation
	gens        int                  // sessions whose events carry more than one generation
	acks        atomic.Int64         // acknowledgements so far
	perNode     []atomic.Int64       // acknowledgements by node
	refused     map[string]int       // answers that were not acknowledgements, by kind
	outage503   int                  // 503s with Retry-After seen while the database was down
	slow503     time.Duration        // the longest of them to answer
	outages     []string             // how long each database outage lasted (kill to started), and its parts
	load503     int                  // 503s with Retry-After the workload got (outages, reconnections)
	samples     map[string]string    // the first body of each kind of other 5xx answer
	followers   map[string]*follower // acknowledged run id → its SSE reader
	followed    map[string]bool      // runs whose reader read the log to its end, checked
	readers     sync.WaitGroup       // the SSE readers' goroutines
	streams     *http.Client         // the SSE readers' client
}

func TestClusterFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("the cluster fault harness takes minutes")
	}
	pg, err := pgtest.Start()
	if err != nil {
		if pgtest.Required() {
			t.Fatalf("PostgreSQL required (HERMES_PG=required): %v", err)
		}
		t.Skipf("no PostgreSQL: %v", err)
	}
	t.Cleanup(func() { _ = pg.Close() })
	url, err := pg.CreateDB(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rounds := 1
	if v := os.Getenv("HERMES_CLUSTER_ROUNDS"); v != "" {
		if rounds, err = strconv.Atoi(v); err != nil || rounds < 1 {
			t.Fatalf("HERMES_CLUSTER_ROUNDS=%q", v)
		}
	}
	model := openaitest.New(t, openaitest.WithResponder(echoResponder))
	c := &cluster{
		t: t, pg: pg, url: url, client: &http.Client{Timeout: leaseTTL},
		env: []string{"HERMES_STORE=" + url, "HERMES_MODEL=openai:fake-agent", "OPENAI_BASE_URL=" + model.URL(),
			"OPENAI_API_KEY=k", "HERMES_API_KEY=" + testAPIKey},
		sessions: map[string][]string{}, responses: map[string]string{}, runs: map[string]string{}, runNode: map[string]int{}, cut: map[string]bool{}, parked: map[string]int{},
		refused: map[string]int{}, samples: map[string]string{}, perNode: make([]atomic.Int64, 3),
		followers: map[string]*follower{}, followed: map[string]bool{}, streams: newStreamClient(),
	}
	for i := range 3 {
		n := &clusterNode{name: fmt.Sprintf("node%d", i), home: t.TempDir()}
		c.nodes = append(c.nodes, n)
		c.start(n)
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			p := n.current()
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			_ = p.cmd.Process.Kill()
			<-p.done
			_ = p.cmd.Wait()
		}
	})
	t.Cleanup(func() { // before the nodes go
		c.mu.Lock()
		for _, f := range c.followers {
			select {
			case <-f.done:
			default:
				close(f.quit)
			}
		}
		c.mu.Unlock()
		c.readers.Wait()
		c.streams.CloseIdleConnections()
	})
	counts := map[string]int{}
	for r := range rounds {
		for _, fault := range []string{"kill", "stop", "postgres"} {
			c.round(fault, c.nodes[(r+counts[fault])%3])
			counts[fault]++
		}
	}
	// A 500 is a bug, not failed yet (a rare one remains): the node logs each one.
	for _, n := range c.nodes {
		for _, line := range strings.Split(n.allLogs(), "\n") {
			if strings.Contains(line, "handler failed") {
				t.Logf("%s answered 500: %s", n.name, line)
			}
		}
	}
	adopted := 0 // runs waiting for an approval that a node took over from a killed or stopped one
	for _, n := range c.nodes {
		adopted += strings.Count(n.allLogs(), "adopted a run waiting for an approval")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	read, moves, conns := 0, 0, 0
	for _, f := range c.followers {
		f.mu.Lock()
		read, moves, conns = read+len(f.names), moves+f.moves, conns+f.conns
		f.mu.Unlock()
	}
	rows := 0
	for _, ps := range c.sessions {
		rows += 2 * len(ps)
	}
	t.Logf("cluster faults: %d rounds (%d kill -9 and restart, %d SIGSTOP/SIGCONT, %d PostgreSQL immediate restarts); "+
		"acknowledged and checked on 3 nodes: %d sessions, %d prompts (%d rows), %d chained responses, %d runs; "+
		"runs settled alike on every node: %d (%d restart-unknown, their node killed mid-run); "+
		"runs parked at an approval answered from another node: %d (%d settled by a fault first; %d parked on the victim of a kill or stop, adopted and completed; %d adoptions logged); "+
		"503 with Retry-After: %d probes during the outages (the slowest answered in %v), %d workload requests; database outages %v; not acknowledged: %v; first other 5xx: %v; "+
		"durable events of the sessions: %d, %d of them fenced, %d sessions written under more than one generation; "+
		"SSE readers: %d runs followed to the end of their log from another node (%d events, %d streams opened, %d reconnections with Last-Event-ID)",
		3*rounds, counts["kill"], counts["stop"], counts["postgres"], len(c.sessions), rows/2, rows,
		len(c.responses), len(c.runs), len(c.runs), c.unknown, c.approved, c.cutParked, c.adoptedPins, adopted, c.outage503, c.slow503.Round(time.Millisecond), c.load503, c.outages, c.refused, c.samples, c.events, c.fenced, c.gens,
		len(c.followed), read, conns, moves)
}

// echoResponder answers with the last user message and how many user messages the request
// carried, so an answer shows the whole conversation reached the model. A prompt "appr-…"
// first calls the terminal tool with a command that needs approval (rm -r); the answer follows
// the tool's result.
func echoResponder(r openaitest.Request) openaitest.Response {
	var body struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(r.Body, &body)
	users, last := 0, ""
	for _, m := range body.Messages {
		if m.Role != "user" {
			continue
		}
		users++
		var s string
		if json.Unmarshal(m.Content, &s) != nil {
			var parts []struct{ Text string }
			_ = json.Unmarshal(m.Content, &parts)
			s = ""
			for _, p := range parts {
				s += p.Text
			}
		}
		last = s
	}
	if n := len(body.Messages); n > 0 && body.Messages[n-1].Role == "user" && strings.HasPrefix(last, "appr-") {
		return openaitest.ToolCalls(openaitest.Call{Name: "terminal", Args: []string{`{"command":"rm -r ` + last + `"}`}})
	}
	return openaitest.Text("echo ", last, fmt.Sprintf(" [%d]", users))
}

// start runs n as `hermes serve` on a free port and waits until it listens.
func (c *cluster) start(n *clusterNode) {
	t := c.t
	t.Helper()
	p := &nodeProc{logs: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = hermesCmd(t, n.home, append([]string{"HERMES_HOME=" + n.home}, c.env...), "serve", "--addr", "127.0.0.1:0")
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			p.logs.Write([]byte(line + "\n"))
			if _, after, ok := strings.Cut(line, "listening on http://"); ok && !sent {
				sent = true
				addr <- strings.Fields(after)[0]
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatalf("%s exited before listening:\n%s", n.name, p.logs.String())
		}
		p.base = "http://" + a
	case <-time.After(90 * time.Second):
		t.Fatalf("%s did not start listening:\n%s", n.name, p.logs.String())
	}
	n.mu.Lock()
	if n.proc != nil {
		n.past.WriteString(n.proc.logs.String())
	}
	n.proc = p
	n.mu.Unlock()
}

// answer is one HTTP exchange's outcome; status 0 is a transport failure (refused, timed out).
type answer struct {
	status int
	header http.Header
	body   []byte
	err    error
}

func (a answer) json() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(a.body, &m)
	return m
}

func (c *cluster) do(p *nodeProc, method, path, body string) answer {
	req, err := http.NewRequest(method, p.base+path, strings.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.client.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return answer{status: res.StatusCode, header: res.Header, body: b, err: err}
}

// refuse counts an answer that acknowledged nothing (no answer at all: a node killed or
// stopped). A 5xx must be a 503 in the OpenAI error form that says when to retry: a turn the
// database's outage cut is a 503 too, never a 502 or a 500.
func (c *cluster) refuse(kind string, a answer) {
	// A client honours Retry-After (up to 2 s here), holding nothing meanwhile.
	defer func() {
		if s, err := strconv.Atoi(a.header.Get("Retry-After")); err == nil && a.status == 503 {
			time.Sleep(min(time.Duration(s)*time.Second, 2*time.Second))
		}
	}()
	c.mu.Lock()
	defer c.mu.Unlock()
	key := kind + ":" + strconv.Itoa(a.status)
	if a.status == 0 {
		key = kind + ":no answer"
	}
	c.refused[key]++
	if a.status == 503 {
		c.load503++
	}
	if a.status >= 500 && a.status != 503 {
		// A turn the database's outage cut must be a 503; other 5xx are counted (and the
		// nodes' "handler failed" lines logged) in the summary.
		if strings.Contains(string(a.body), "store unavailable") {
			c.t.Errorf("%s answered %d for a store outage (must be 503 with Retry-After): %s", kind, a.status, a.body)
		}
		if _, ok := c.samples[key]; !ok {
			c.samples[key] = string(a.body)
		}
	}
	if a.status >= 500 {
		e, _ := a.json()["error"].(map[string]any)
		if e == nil || e["message"] == nil || e["type"] == nil {
			c.t.Errorf("%s answered %d without an OpenAI error object: %s", kind, a.status, a.body)
		}
		if a.status == 503 && a.header.Get("Retry-After") == "" {
			c.t.Errorf("%s answered 503 without Retry-After: %s", kind, a.body)
		}
	}
}

func (c *cluster) acked(node int) {
	c.acks.Add(1)
	c.perNode[node].Add(1)
}

// worker runs one client's share of the workload until stop: its sessions and its response
// chain are its own, so one session never has two turns asked at once; every step goes to
// another node than the step before.
type worker struct {
	id      int
	seq     int
	node    int
	mine    []string // acknowledged sessions of this worker
	lastRsp string   // the end of its acknowledged response chain
	parks   int      // runs it left parked at an approval this round
	chain   int      // user messages in that chain
}

func (c *cluster) pick(w *worker) (int, *nodeProc) {
	for {
		w.node = (w.node + 1 + rand.IntN(2)) % 3 // never the node of the previous step
		// A stopped node is left out, as a load balancer's health check would.
		if p := c.nodes[w.node].current(); !p.stopped.Load() {
			return w.node, p
		}
	}
}

func (c *cluster) step(w *worker) {
	w.seq++
	tag := fmt.Sprintf("w%d-%d", w.id, w.seq)
	i, p := c.pick(w)
	switch {
	case len(w.mine) == 0 || w.seq%5 == 0:
		a := c.do(p, "POST", "/api/sessions", `{"id":"s-`+tag+`"}`)
		if a.status != 201 {
			c.refuse("create", a)
			return
		}
		w.mine = append(w.mine, "s-"+tag)
		c.mu.Lock()
		c.sessions["s-"+tag] = nil
		c.mu.Unlock()
		c.acked(i)
	case w.seq%5 == 1 || w.seq%5 == 3:
		sid := w.mine[rand.IntN(len(w.mine))]
		prompt := "p-" + tag
		a := c.do(p, "POST", "/api/sessions/"+sid+"/chat", `{"input":"`+prompt+`"}`)
		m := a.json()
		msg, _ := m["message"].(map[string]any)
		if a.status != 200 || m["status"] != "completed" || msg == nil || !strings.HasPrefix(fmt.Sprint(msg["content"]), "echo "+prompt+" [") {
			c.refuse("chat", a)
			return
		}
		c.mu.Lock()
		c.sessions[sid] = append(c.sessions[sid], prompt)
		c.mu.Unlock()
		c.acked(i)
	case w.seq%5 == 2:
		prompt := "r-" + tag
		body := map[string]any{"input": prompt, "store": true}
		if w.lastRsp != "" {
			body["previous_response_id"] = w.lastRsp
		}
		b, _ := json.Marshal(body)
		a := c.do(p, "POST", "/v1/responses", string(b))
		m := a.json()
		id, _ := m["id"].(string)
		want := fmt.Sprintf("echo %s [%d]", prompt, w.chain+1)
		if a.status != 200 || id == "" || m["status"] != "completed" || outputText(m) != want {
			if a.status == 200 && m["status"] == "completed" && outputText(m) != want {
				c.t.Errorf("response %s on %s: %q, want %q (the chain did not reach the model whole)", id, c.nodes[i].name, outputText(m), want)
			}
			c.refuse("response", a)
			return
		}
		w.lastRsp, w.chain = id, w.chain+1
		c.mu.Lock()
		c.responses[id] = want
		c.mu.Unlock()
		c.acked(i)
	default:
		// A worker's first runs of a round park at an approval, answered after the round's
		// fault from another node than the one running it (answerParked); a parked run holds
		// one of its node's turn slots until then, so only two per worker.
		input := "run-" + tag
		if w.seq%10 == 4 && w.parks < 2 {
			input = "appr-" + tag
			w.parks++
		}
		a := c.do(p, "POST", "/v1/runs", `{"input":"`+input+`","session_id":"`+input+`"}`)
		id, _ := a.json()["run_id"].(string)
		if a.status != 202 || id == "" {
			c.refuse("run", a)
			return
		}
		c.mu.Lock()
		c.runs[id], c.runNode[id] = input, i
		if strings.HasPrefix(input, "appr-") {
			c.parked[id] = i
		}
		c.mu.Unlock()
		c.acked(i)
		c.follow(id, i)
	}
}

// outputText is the text of a response object's message output.
func outputText(m map[string]any) string {
	var b strings.Builder
	out, _ := m["output"].([]any)
	for _, o := range out {
		item, _ := o.(map[string]any)
		parts, _ := item["content"].([]any)
		for _, p := range parts {
			if pm, _ := p.(map[string]any); pm != nil {
				if s, ok := pm["text"].(string); ok {
					b.WriteString(s)
				}
			}
		}
	}
	return b.String()
}

// waitFor polls cond until it holds, failing after d.
func (c *cluster) waitFor(what string, d time.Duration, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: not within %s\n%s", what, d, c.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *cluster) logs() string {
	var b strings.Builder
	for _, n := range c.nodes {
		fmt.Fprintf(&b, "--- %s\n%s", n.name, tail(n.allLogs(), 3000))
	}
	return b.String()
}

// about is every node's log lines that name one of keys (a run, its session).
func (c *cluster) about(keys ...string) string {
	var b strings.Builder
	for _, n := range c.nodes {
		for _, line := range strings.Split(n.allLogs(), "\n") {
			if slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(line, k) }) {
				fmt.Fprintf(&b, "%s: %s\n", n.name, line)
			}
		}
	}
	return b.String()
}

// stored is what the database holds about a run and its session: the run's record, the
// session's lease and its event log (types, turns, generations, payloads clipped).
func (c *cluster) stored(runID, sid string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := postgres.Open(ctx, c.url, postgres.Options{})
	if err != nil {
		return "store: " + err.Error()
	}
	defer st.Close()
	var b strings.Builder
	rec, err := st.GetKV(ctx, "httpapi/run/"+runID)
	fmt.Fprintf(&b, "run record: %s %v\n", rec, err)
	l, err := st.GetLease(ctx, sid)
	fmt.Fprintf(&b, "lease: %+v %v\n", l, err)
	evs, err := st.EventsSince(ctx, sid, 0, 0)
	if err != nil {
		fmt.Fprintf(&b, "events: %v\n", err)
	}
	for _, ev := range evs {
		if ev.Type == "message.delta" {
			continue
		}
		fmt.Fprintf(&b, "  #%d gen %d %s %s %s\n", ev.Seq, ev.Generation, ev.Type, ev.TurnID, tail(string(ev.Data), 240))
	}
	return b.String()
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// round plays one fault in the middle of the workload, then checks everything acknowledged.
func (c *cluster) round(fault string, victim *clusterNode) {
	t := c.t
	t.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for id := range 4 {
		w := &worker{id: id, node: id % 3}
		c.mu.Lock()
		for sid := range c.sessions { // earlier rounds' sessions stay in use
			if strings.HasPrefix(sid, fmt.Sprintf("s-w%d-", id)) {
				w.mine = append(w.mine, sid)
			}
		}
		c.mu.Unlock()
		w.seq = 1000 * (int(c.acks.Load()) + 1) // tags stay unique across rounds
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					c.step(w)
				}
			}
		})
	}
	mid := c.acks.Load() + 12
	c.waitFor("traffic before the fault", 120*time.Second, func() bool { return c.acks.Load() >= mid })

	vi := slices.Index(c.nodes, victim)
	pinned := ""
	if fault != "postgres" {
		pinned = c.parkOn(vi)
	}
	switch fault {
	case "kill":
		p := victim.current()
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-p.done
		_ = p.cmd.Wait()
		c.mu.Lock()
		for id, node := range c.runNode {
			if node == vi {
				c.cut[id] = true
			}
		}
		c.mu.Unlock()
		c.start(victim)
	case "stop":
		p := victim.current()
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		p.stopped.Store(true)
		// The other two nodes go on serving while it is stopped.
		others := make([]int64, 3)
		for i := range c.nodes {
			others[i] = c.perNode[i].Load()
		}
		// Stopped past the lease TTL (10 s): the sessions it held may be taken over by the
		// others meanwhile, and what it was writing when it stopped must then be refused.
		held := time.Now().Add(leaseTTL + 2*time.Second)
		c.waitFor("traffic on the other nodes while "+victim.name+" is stopped", 120*time.Second, func() bool {
			if time.Now().Before(held) {
				return false
			}
			for i := range c.nodes {
				if i != vi && c.perNode[i].Load() < others[i]+3 {
					return false
				}
			}
			return true
		})
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		p.stopped.Store(false)
	case "postgres":
		down := time.Now()
		if err := c.pg.Kill(); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		c.checkOutage()
		probed := time.Now()
		if err := c.pg.Start(); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		c.outages = append(c.outages, fmt.Sprintf("%v (stop %v, probes %v, start and recovery %v)", time.Since(down).Round(100*time.Millisecond),
			killed.Sub(down).Round(100*time.Millisecond), probed.Sub(killed).Round(100*time.Millisecond), time.Since(probed).Round(100*time.Millisecond)))
		c.mu.Unlock()
	}
	// Every node serves again, by itself: each acknowledges work after the fault.
	after := make([]int64, 3)
	for i := range c.nodes {
		after[i] = c.perNode[i].Load()
	}
	c.waitFor("every node serving after "+fault+" of "+victim.name, 120*time.Second, func() bool {
		for i := range c.nodes {
			if c.perNode[i].Load() < after[i]+2 {
				return false
			}
		}
		return true
	})
	close(stop)
	wg.Wait()
	c.answerParked(fault)
	if pinned != "" {
		c.checkAdopted(fault, pinned)
	}
	c.verify(fault)
}

// parkOn admits a run on node vi that parks at an approval there, and waits until it does: the
// fault then takes its process away while it waits, and another node must adopt it.
func (c *cluster) parkOn(vi int) string {
	t := c.t
	t.Helper()
	input := fmt.Sprintf("appr-pin-%d", c.acks.Load())
	var id string
	c.waitFor("a run parked on "+c.nodes[vi].name, 60*time.Second, func() bool {
		if id == "" {
			a := c.do(c.nodes[vi].current(), "POST", "/v1/runs", `{"input":"`+input+`","session_id":"`+input+`"}`)
			if id, _ = a.json()["run_id"].(string); a.status != 202 || id == "" {
				id = ""
				return false
			}
			c.mu.Lock()
			c.runs[id], c.runNode[id], c.parked[id] = input, vi, vi
			c.mu.Unlock()
			c.follow(id, vi)
		}
		a := c.do(c.nodes[vi].current(), "GET", "/v1/runs/"+id, "")
		return a.json()["status"] == "waiting_for_approval"
	})
	return id
}

// checkAdopted: the run parked on the fault's victim was adopted, not lost: answered (denied)
// through another node, it completed, the same on every node.
func (c *cluster) checkAdopted(after, id string) {
	t := c.t
	t.Helper()
	var got []string
	c.waitFor("the run parked on the victim settled", runSettle, func() bool {
		got = got[:0]
		for _, n := range c.nodes {
			st, _ := c.retry(n.current(), "GET", "/v1/runs/"+id, "").json()["status"].(string)
			got = append(got, st)
		}
		return !slices.ContainsFunc(got, func(s string) bool { return s == "running" || s == "waiting_for_approval" || s == "queued" })
	})
	for _, st := range got {
		if st != "completed" {
			t.Fatalf("after %s: the run %s parked at an approval on the victim reads %v on the nodes, not adopted and completed\n%s", after, id, got, c.stored(id, parkedSession(id, c)))
		}
	}
	c.mu.Lock()
	c.adoptedPins++
	c.mu.Unlock()
}

// parkedSession is the session of an acknowledged run.
func parkedSession(id string, c *cluster) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[id]
}

// answerParked answers every run parked at an approval (admitted before or during the fault)
// from another node than the one that reports it waiting: the answer (deny) reaches the
// process running it, which goes on and completes the run. A parked run the fault settled
// first (its node killed: restart-unknown; stopped past its lease: interrupted) is counted.
func (c *cluster) answerParked(after string) {
	t := c.t
	t.Helper()
	c.mu.Lock()
	parked := maps.Clone(c.parked)
	clear(c.parked)
	c.mu.Unlock()
	for id, admitted := range parked {
		deadline := time.Now().Add(runSettle)
		for {
			waiting, ended := -1, false
			var got []string
			for i, n := range c.nodes {
				a := c.retry(n.current(), "GET", "/v1/runs/"+id, "")
				st, _ := a.json()["status"].(string)
				got = append(got, st)
				switch st {
				case "waiting_for_approval":
					waiting = i
				case "completed", "failed", "cancelled", "interrupted", "unknown":
					ended = true
				}
			}
			if ended {
				c.mu.Lock()
				c.cutParked++
				c.mu.Unlock()
				t.Logf("after %s: run %s parked at an approval (admitted on node%d) ended %v before it was answered", after, id, admitted, got)
				if slices.Contains(got, "unknown") || slices.Contains(got, "failed") {
					t.Logf("%s%s", c.stored(id, parkedSession(id, c)), c.about(id, parkedSession(id, c)))
				}
				break
			}
			// The node running it reports it waiting; the others read it running. When none
			// does (the executing node's view was cut by the fault), the answer goes through
			// a node that did not admit it, which finds the approval in the durable events.
			if waiting >= 0 || !slices.Contains(got, "queued") {
				from := waiting
				if from < 0 {
					from = admitted
				}
				j := (from + 1 + rand.IntN(2)) % 3
				a := c.do(c.nodes[j].current(), "POST", "/v1/runs/"+id+"/approval", `{"choice":"deny"}`)
				if a.status == 200 && a.json()["resolved"] == float64(1) {
					c.mu.Lock()
					c.approved++
					c.mu.Unlock()
					break
				}
				if a.status != 503 && a.status != 0 && time.Now().After(deadline) {
					t.Fatalf("after %s: approval of run %s (%v on the nodes) answered on %s: %d %s\n%s\n%s", after, id, got, c.nodes[j].name, a.status, a.body, c.about(id, parkedSession(id, c)), c.stored(id, parkedSession(id, c)))
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %s: run %s parked at an approval is %v on the nodes, not answered nor settled within %s\n%s\n%s\n%s", after, id, got, runSettle, c.about(id, parkedSession(id, c)), c.stored(id, parkedSession(id, c)), c.logs())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// checkOutage asks every node, while the database is down, for a session it has: each answers
// 503 with Retry-After and an OpenAI error object, not a hang and not a bare 500.
func (c *cluster) checkOutage() {
	t := c.t
	t.Helper()
	c.mu.Lock()
	var sid string
	for s := range c.sessions {
		sid = s
		break
	}
	c.mu.Unlock()
	for _, n := range c.nodes {
		for _, path := range []string{"/api/sessions/" + sid + "/messages", "/api/sessions"} {
			start := time.Now()
			a := c.do(n.current(), "GET", path, "")
			took := time.Since(start)
			e, _ := a.json()["error"].(map[string]any)
			if a.status != 503 || a.header.Get("Retry-After") == "" || e == nil || e["type"] != "server_error" || e["message"] == nil {
				t.Fatalf("%s GET %s with the database down: %d Retry-After %q %s", n.name, path, a.status, a.header.Get("Retry-After"), a.body)
			}
			c.mu.Lock()
			c.outage503++
			c.slow503 = max(c.slow503, took)
			c.mu.Unlock()
		}
	}
}

// verify reads everything acknowledged so far from every node.
func (c *cluster) verify(after string) {
	t := c.t
	t.Helper()
	c.mu.Lock()
	sessions := make(map[string][]string, len(c.sessions))
	for k, v := range c.sessions {
		sessions[k] = slices.Clone(v)
	}
	responses := maps.Clone(c.responses)
	runs := maps.Clone(c.runs)
	runNode := maps.Clone(c.runNode)
	cut := maps.Clone(c.cut)
	c.mu.Unlock()
	for _, n := range c.nodes {
		p := n.current()
		for sid, prompts := range sessions {
			a := c.retry(p, "GET", "/api/sessions/"+sid+"/messages?limit=1000", "")
			if a.status != 200 {
				t.Fatalf("after %s: %s GET session %s: %d %s", after, n.name, sid, a.status, a.body)
			}
			var list struct {
				Data []struct {
					Role    string `json:"role"`
					Content string `json:"content"`
					TurnID  string `json:"turn_id"`
				} `json:"data"`
			}
			if err := json.Unmarshal(a.body, &list); err != nil {
				t.Fatal(err)
			}
			// The acknowledged prompts, each followed by its answer, in order (unacknowledged
			// turns — cut off by a fault — may sit between them).
			j := 0
			for k, r := range list.Data {
				if j < len(prompts) && r.Role == "user" && r.Content == prompts[j] {
					if k+1 >= len(list.Data) || !strings.HasPrefix(list.Data[k+1].Content, "echo "+prompts[j]+" [") {
						t.Fatalf("after %s: %s session %s: acknowledged prompt %q has no answer after it: %+v", after, n.name, sid, prompts[j], list.Data)
					}
					j++
				}
			}
			// One writer at a time: a turn's rows are never split by another turn's.
			seen := map[string]bool{}
			for k, r := range list.Data {
				if r.TurnID == "" || (k > 0 && list.Data[k-1].TurnID == r.TurnID) {
					continue
				}
				if seen[r.TurnID] {
					t.Fatalf("after %s: %s session %s: turn %s's rows are split by another turn's (two writers): %+v", after, n.name, sid, r.TurnID, list.Data)
				}
				seen[r.TurnID] = true
			}
			if j != len(prompts) {
				t.Fatalf("after %s: %s session %s: %d of %d acknowledged prompts stored in order (missing %q): %+v",
					after, n.name, sid, j, len(prompts), prompts[j], list.Data)
			}
		}
		for id, want := range responses {
			a := c.retry(p, "GET", "/v1/responses/"+id, "")
			if a.status != 200 || outputText(a.json()) != want {
				t.Fatalf("after %s: %s GET response %s: %d %s (want %q)", after, n.name, id, a.status, a.body, want)
			}
		}
	}
	c.checkWriters(after, sessions)
	c.checkRuns(after, runs, runNode, cut)
}

// runSettle bounds how long a run may still read as running after a round: a run its killed
// node was executing is restart-unknown once that node's heartbeat is gone (at once for a
// process of this host that no longer exists, else after the runs ledger's 15 s), and a run
// whose settlement fell in the database's outage is written again every second once the
// database is back; a node stopped past the lease TTL settles its run after SIGCONT.
const runSettle = leaseTTL + 15*time.Second + 20*time.Second

// checkRuns reads every acknowledged run from every node: within runSettle every node reads it
// settled or restart-unknown, the same on all three, restart-unknown only for a run whose node
// was killed; a completed run's prompt and answer are in its session. A node never keeps a
// status of its own apart from the durable record (a settlement whose write an outage refused
// is written again until it lands), so a difference that lasts fails.
func (c *cluster) checkRuns(after string, runs map[string]string, runNode map[string]int, cut map[string]bool) {
	t := c.t
	t.Helper()
	settled := func(st string) bool {
		return st == "completed" || st == "unknown" || st == "interrupted" || st == "failed" || st == "cancelled"
	}
	read := func(p *nodeProc, id, sid string) string {
		a := c.retry(p, "GET", "/v1/runs/"+id, "")
		m := a.json()
		if a.status != 200 || m["session_id"] != sid {
			t.Fatalf("after %s: GET run %s on %s: %d %s", after, id, p.base, a.status, a.body)
		}
		st, _ := m["status"].(string)
		return st
	}
	deadline := time.Now().Add(runSettle)
	unknown := 0
	for id, sid := range runs {
		var got []string
		for {
			got = got[:0]
			for _, n := range c.nodes {
				got = append(got, read(n.current(), id, sid))
			}
			all := !slices.ContainsFunc(got, func(st string) bool { return !settled(st) })
			same := !slices.ContainsFunc(got, func(st string) bool { return st != got[0] || st == "unknown" && !cut[id] })
			if all && same {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %s: run %s (session %s, admitted on %s, its node killed: %v) not settled alike on every node within %s: %v\n%s\n%s",
					after, id, sid, c.nodes[runNode[id]].name, cut[id], runSettle, got, c.about(id, sid), c.logs())
			}
			time.Sleep(200 * time.Millisecond)
		}
		c.mu.Lock()
		followed := c.followed[id]
		c.mu.Unlock()
		if !followed {
			c.checkStream(after, id, got[0])
		}
		switch got[0] {
		case "unknown":
			unknown++
		case "completed":
			a := c.retry(c.nodes[runNode[id]].current(), "GET", "/api/sessions/"+sid+"/messages?limit=1000", "")
			// The run's input is its session's id.
			if a.status != 200 || !strings.Contains(string(a.body), `"content":"`+sid+`"`) || !strings.Contains(string(a.body), `"echo `+sid+` [`) {
				t.Fatalf("after %s: run %s completed, but its session %s lacks its prompt or answer: %d %s", after, id, sid, a.status, a.body)
			}
		}
	}
	c.mu.Lock()
	c.unknown = unknown
	c.mu.Unlock()
}

// checkWriters reads the sessions' durable events straight from the database: the lease
// generation each was written under never goes down within a session, so no session ever had
// a writer after its lease was taken over (a zombie's write would carry the older generation).
func (c *cluster) checkWriters(after string, sessions map[string][]string) {
	t := c.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := postgres.Open(ctx, c.url, postgres.Options{})
	if err != nil {
		t.Fatalf("after %s: open the store: %v", after, err)
	}
	defer st.Close()
	events, fenced, gens := 0, 0, 0
	for sid := range sessions {
		evs, err := st.EventsSince(ctx, sid, 0, 0)
		if err != nil {
			t.Fatalf("after %s: events of %s: %v", after, sid, err)
		}
		var last uint64
		changes := 0
		for _, e := range evs {
			if e.Generation == 0 {
				continue
			}
			fenced++
			if e.Generation < last {
				t.Fatalf("after %s: session %s: event %d (%s) written under generation %d after generation %d: two writers",
					after, sid, e.Seq, e.Type, e.Generation, last)
			}
			if last != 0 && e.Generation != last {
				changes++
			}
			last = e.Generation
		}
		if changes > 0 {
			gens++
		}
		events += len(evs)
	}
	c.mu.Lock()
	c.events, c.fenced, c.gens = events, fenced, gens
	c.mu.Unlock()
}

// retry sends a read again while the node answers 503 (a database that just came back, a pool
// reconnecting), up to a minute.
func (c *cluster) retry(p *nodeProc, method, path, body string) answer {
	deadline := time.Now().Add(60 * time.Second)
	for {
		a := c.do(p, method, path, body)
		if (a.status != 503 && a.status != 0) || time.Now().After(deadline) {
			return a
		}
		time.Sleep(200 * time.Millisecond)
	}
}
