//go:build linux

package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/engine/store"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/store/postgres"
	"github.com/hermes-go/hermes/engine/store/postgres/pgtest"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/transports/gateway/gwclient"
	"github.com/jackc/pgx/v5"
)

// Figures of the PostgreSQL store across real `hermes serve` nodes on one private PostgreSQL
// (BENCHMARKS.md, "PostgreSQL store"). They take a minute or more and print figures rather than
// asserting times, so they run only when asked:
//
//	HERMES_CLUSTER_BENCH=1 HERMES_PG=required go test -run 'TestClusterBench' -v .
//
// Attach latency: a turn on node a streams deltas from a paced fake model; one client follows
// the run's SSE on a (the owner) and one on b; per event, b's arrival minus a's. Failover: the
// owner of a session in the middle of a turn is killed (SIGKILL), and the next turn of that
// session is sent to another node; the time from the kill to that turn reaching the model.

func clusterBenchEnabled(t *testing.T) {
	if os.Getenv("HERMES_CLUSTER_BENCH") == "" {
		t.Skip("set HERMES_CLUSTER_BENCH=1 to measure the cluster figures")
	}
}

// pacedModel is a streaming chat-completions server: an input containing "stall" gets an answer
// that never comes (until the client goes away); any other input waits for the gate of its turn
// (when one is set), then streams deltas deltas, gap apart. Every request's last user input is
// sent on seen.
type pacedModel struct {
	srv    *httptest.Server
	deltas int
	gap    time.Duration
	seen   chan string
	mu     sync.Mutex
	gate   chan struct{} // nil: stream at once
}

func newPacedModel(t *testing.T, deltas int, gap time.Duration) *pacedModel {
	m := &pacedModel{deltas: deltas, gap: gap, seen: make(chan string, 64)}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *pacedModel) URL() string { return m.srv.URL + "/v1" }

func (m *pacedModel) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &req)
	last := ""
	for _, msg := range req.Messages {
		if msg.Role == "user" {
			last = string(msg.Content)
		}
	}
	select {
	case m.seen <- last:
	default:
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	chunk := func(delta, finish string) {
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, finish)
		fl.Flush()
	}
	chunk(`{"role":"assistant","content":""}`, "null")
	if strings.Contains(last, "stall") {
		<-r.Context().Done()
		return
	}
	m.mu.Lock()
	gate := m.gate
	m.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	for i := range m.deltas {
		if i > 0 {
			time.Sleep(m.gap)
		}
		chunk(fmt.Sprintf(`{"content":"d%d "}`, i), "null")
	}
	chunk(`{}`, `"stop"`)
	fmt.Fprint(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":10,\"total_tokens\":20}}\n\n")
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

// benchNode is one `hermes serve`. With a hostname it runs in a UTS namespace of its own under
// that name, so its lease owner ids name another host than the other nodes' (a node on the same
// host that finds the holder's process gone takes its leases at once, not after the TTL).
type benchNode struct {
	base string
	cmd  *exec.Cmd
	logs *lockedBuffer
	done chan struct{}
}

func startBenchNode(t *testing.T, env []string, hostname string) *benchNode {
	t.Helper()
	home := t.TempDir()
	n := &benchNode{logs: &lockedBuffer{}, done: make(chan struct{})}
	n.cmd = hermesCmd(t, home, append([]string{"HERMES_HOME=" + home}, env...), "serve", "--addr", "127.0.0.1:0")
	if hostname != "" {
		unshare, err := exec.LookPath("unshare")
		if err != nil {
			t.Skipf("no unshare for a node on another host name: %v", err)
		}
		n.cmd.Args = append([]string{"unshare", "-u", "sh", "-c", `hostname "$0" && exec "$@"`, hostname, n.cmd.Path}, n.cmd.Args[1:]...)
		n.cmd.Path = unshare
	}
	stderr, err := n.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = n.cmd.Process.Kill()
		<-n.done
		_ = n.cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		defer close(n.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			n.logs.Write([]byte(line + "\n"))
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
			t.Fatalf("node exited before listening:\n%s", n.logs.String())
		}
		n.base = "http://" + a
	case <-time.After(90 * time.Second):
		t.Fatalf("node did not start listening:\n%s", n.logs.String())
	}
	return n
}

func (n *benchNode) post(t *testing.T, path, body string) (int, map[string]any) {
	t.Helper()
	code, m, err := n.postErr(path, body)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return code, m
}

func (n *benchNode) postErr(path, body string) (int, map[string]any, error) {
	req, err := http.NewRequest("POST", n.base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	var m map[string]any
	b, err := io.ReadAll(res.Body)
	_ = json.Unmarshal(b, &m)
	return res.StatusCode, m, err
}

// clusterBenchDB starts a private PostgreSQL and returns a database URL on it.
func clusterBenchDB(t testing.TB) string {
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
	return url
}

func clusterBenchEnv(url, model string) []string {
	return []string{"HERMES_STORE=" + url, "HERMES_MODEL=openai:fake", "OPENAI_BASE_URL=" + model,
		"OPENAI_API_KEY=k", "HERMES_API_KEY=" + testAPIKey}
}

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, len(ds)*p/100)]
}

// TestClusterBenchAttachLatency: turns on node a streaming deltas, followed live over /api/ws by
// a client of a (the owner) and a client of b; per event (matched by seq), b's arrival minus a's.
func TestClusterBenchAttachLatency(t *testing.T) {
	clusterBenchEnabled(t)
	const turns, deltas, gap = 5, 200, 5 * time.Millisecond
	url := clusterBenchDB(t)
	model := newPacedModel(t, deltas, gap)
	env := clusterBenchEnv(url, model.URL())
	a, b := startBenchNode(t, env, ""), startBenchNode(t, env, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dial := func(n *benchNode) *gwclient.Client {
		c, err := gwclient.DialWS(ctx, "ws"+strings.TrimPrefix(n.base, "http")+"/api/ws", http.Header{"Authorization": {"Bearer " + testAPIKey}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	call := func(c *gwclient.Client, method string, params any) map[string]any {
		t.Helper()
		var out map[string]any
		if err := c.CallInto(ctx, method, params, &out); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		return out
	}
	ca, cb := dial(a), dial(b)
	var lat []time.Duration
	types := map[string]int{}
	for turn := range turns {
		sid := fmt.Sprintf("attach-%d", turn)
		if code, m := a.post(t, "/api/sessions", `{"id":"`+sid+`"}`); code != 201 {
			t.Fatalf("create on a: %d %v", code, m)
		}
		la := call(ca, "session.resume", map[string]any{"session_id": sid})["session_id"].(string)
		lb := call(cb, "session.resume", map[string]any{"session_id": sid})["session_id"].(string)
		call(cb, "session.events.since", map[string]any{"session_id": lb, "last_seen": 0})
		fromA, fromB := len(ca.Events()), len(cb.Events())
		if r := call(ca, "prompt.submit", map[string]any{"session_id": la, "text": "stream please"}); r["status"] != "streaming" {
			t.Fatalf("prompt on a: %v", r)
		}
		_, ia, err := ca.WaitType(ctx, fromA, la, "message.complete")
		if err != nil {
			t.Fatalf("turn on a: %v", err)
		}
		_, ib, err := cb.WaitType(ctx, fromB, lb, "message.complete")
		if err != nil {
			t.Fatalf("turn followed on b: %v", err)
		}
		atA := map[uint64]gwclient.Event{}
		for _, e := range ca.Events()[fromA : ia+1] {
			if e.SessionID == la && e.Seq > 0 {
				atA[e.Seq] = e
			}
		}
		matched, deltasB := 0, 0
		for _, e := range cb.Events()[fromB : ib+1] {
			ea, ok := atA[e.Seq]
			if e.SessionID != lb || e.Seq == 0 || !ok {
				continue
			}
			if ea.Type != e.Type {
				t.Fatalf("seq %d: b delivered %s, a %s", e.Seq, e.Type, ea.Type)
			}
			if e.Type == "message.delta" {
				deltasB++
			}
			types[e.Type]++
			matched++
			lat = append(lat, e.Received.Sub(ea.Received))
		}
		if deltasB < deltas {
			t.Fatalf("turn %d: %d events matched, %d deltas on b; want %d deltas", turn, matched, deltasB, deltas)
		}
	}
	slices.Sort(lat)
	t.Logf("attach latency over /api/ws, b's arrival minus a's (the owner's), %d events of %d turns (%d deltas %s apart each; %v): p50 %s p90 %s p99 %s max %s",
		len(lat), turns, deltas, gap, types, pct(lat, 50), pct(lat, 90), pct(lat, 99), lat[len(lat)-1])
}

// TestClusterBenchFailover: the owner of a session is killed mid-turn; the session's next turn
// is sent to another node, which admits it once the dead owner's lease is gone.
func TestClusterBenchFailover(t *testing.T) {
	clusterBenchEnabled(t)
	rounds := 3
	url := clusterBenchDB(t)
	model := newPacedModel(t, 3, 0)
	env := clusterBenchEnv(url, model.URL())
	for _, mode := range []string{"same host", "other hosts"} {
		hostA, hostB := "", ""
		if mode == "other hosts" {
			hostA, hostB = "hermes-node-a", "hermes-node-b"
		}
		b := startBenchNode(t, env, hostB)
		var took []time.Duration
		var answered []string
		for r := range rounds {
			a := startBenchNode(t, env, hostA)
			sid := fmt.Sprintf("fo-%s-%d", strings.ReplaceAll(mode, " ", "-"), r)
			if code, m := a.post(t, "/api/sessions", `{"id":"`+sid+`"}`); code != 201 {
				t.Fatalf("create on a: %d %v", code, m)
			}
			// The turn on a never ends: its answer is cut by the kill.
			go func() { _, _, _ = a.postErr("/api/sessions/"+sid+"/chat", `{"input":"stall"}`) }()
			waitSeen(t, model, "stall")
			kill := time.Now()
			if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-a.done
			_ = a.cmd.Wait()
			res := make(chan string, 1)
			go func() {
				code, m, err := b.postErr("/api/sessions/"+sid+"/chat", `{"input":"after the kill"}`)
				e, _ := m["error"].(map[string]any)
				res <- fmt.Sprintf("%s: %d %v %v %v", time.Since(kill).Round(time.Millisecond), code, m["status"], e["message"], err)
			}()
			waitSeen(t, model, "after the kill")
			took = append(took, time.Since(kill))
			answered = append(answered, <-res)
		}
		slices.Sort(took)
		t.Logf("failover (%s), kill of the owner mid-turn → its next turn, sent to another node, reaching the model: %v (the chat's answer on that node: %q); lease TTL 10s",
			mode, took, answered)
	}
}

// waitSeen waits until the model receives a request whose last user input contains s.
func waitSeen(t *testing.T, m *pacedModel, s string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case in := <-m.seen:
			if strings.Contains(in, s) {
				return
			}
		case <-deadline:
			t.Fatalf("the model got no request with %q within 60s", s)
		}
	}
}

// BenchmarkPostgresWarmTurn measures a warm turn (the 2nd+ prompt of a session, submit →
// outcome) through the engine with a zero-latency model, one engine on the PostgreSQL store (a
// private cluster, fsync and synchronous_commit on) and one on badger (synced writes), each
// with its session lease and durable event log. The two take turns, one turn each per
// iteration, so both see the same machine load; it reports each one's mean per turn and the
// ratio. "text" is a text answer; "tool" is a tool call then a text answer.
//
//	HERMES_PG=required go test -run '^$' -bench PostgresWarmTurn -benchtime 200x .
func BenchmarkPostgresWarmTurn(b *testing.B) {
	url := clusterBenchDB(b)
	for i, prompt := range []string{"text", "tool"} {
		b.Run(prompt, func(b *testing.B) {
			bs, err := badgerstore.Open(filepath.Join(b.TempDir(), "state"), badgerstore.DefaultOptions())
			if err != nil {
				b.Fatal(err)
			}
			ps, err := postgres.Open(context.Background(), url, postgres.Options{Schema: fmt.Sprintf("warm%d_%d", i, time.Now().UnixNano())})
			if err != nil {
				b.Fatal(err)
			}
			var turns [2]func()
			for k, st := range []store.Store{ps, bs} {
				eng, err := engine.New(engine.Config{Store: st, Providers: map[string]model.Provider{"fake": toolOrText{}}, DefaultModel: "fake:m",
					Tools: tool.NewRegistry(benchEcho{}), Cwd: b.TempDir(), Policy: policy.Set{Approver: policy.Defaults{}, Busy: policy.NewBusySetting(policy.Queue)}})
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				defer eng.Close()
				ctx := context.Background()
				s, err := eng.Create(ctx, engine.CreateOptions{Source: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				turns[k] = func() {
					adm, err := s.Submit(ctx, engine.Prompt{Text: prompt})
					if err != nil {
						b.Fatal(err)
					}
					if out, err := s.Wait(ctx, adm.TurnID); err != nil || out.Status != engine.StatusCompleted {
						o, _ := json.Marshal(out)
						b.Fatal(string(o), err)
					}
				}
				turns[k]() // the first turn: the session is warm from here on
			}
			commits0, syncs0 := pgCommits(b, url)
			var spent [2]time.Duration
			n := 0
			for b.Loop() {
				for k := range 2 {
					k = (k + n) % 2 // alternate which goes first
					start := time.Now()
					turns[k]()
					spent[k] += time.Since(start)
				}
				n++
			}
			b.StopTimer()
			// Transactions committed per turn on the database (its statistics lag by up to a
			// second; the engine's background writes, e.g. lease renewals, are included).
			time.Sleep(1500 * time.Millisecond)
			commits, syncs := pgCommits(b, url)
			b.ReportMetric(float64(commits-commits0)/float64(n), "pg-xacts/turn")
			b.ReportMetric(float64(syncs-syncs0)/float64(n), "pg-walsyncs/turn")
			pg, bg := float64(spent[0])/float64(n), float64(spent[1])/float64(n)
			b.ReportMetric(pg/1e6, "postgres-ms/turn")
			b.ReportMetric(bg/1e6, "badger-ms/turn")
			b.ReportMetric(pg/bg, "ratio")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// pgCommits is the number of transactions committed in the database of url so far (reads
// included), and of WAL syncs of the cluster (durable commits, some shared by several).
func pgCommits(b *testing.B, url string) (xacts, syncs int64) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		b.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT d.xact_commit, w.wal_sync FROM pg_stat_database d, pg_stat_wal w WHERE d.datname = current_database()").Scan(&xacts, &syncs); err != nil {
		b.Fatal(err)
	}
	return xacts, syncs
}
