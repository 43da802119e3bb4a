package cli

import (
	"bufio"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/catalog"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/internal/metrics/metricstest"
)

// TestServeMetrics: hermes serve answers /metrics on the API's address behind the API key
// (401 without it, 403 for an extra key, the text format for the server's key) and on
// server.metrics_addr without one; a chat turn moves the turn, model-call, token and cost
// series by exactly its usage at the catalogue's prices; a held stream shows as an SSE client
// and a connection; a turn over the concurrency cap is counted as a turn_cap rejection; the
// store's operations and the leases held are there.
func TestServeMetrics(t *testing.T) {
	home := t.TempDir()
	const extraKey = "other-key-0123456789abcdef"
	cfg := "server:\n  max_concurrent: 1\n  metrics_addr: 127.0.0.1:0\n  extra_api_keys:\n    - {name: other, key: " + extraKey + "}\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	const priced = "openai:gpt-4.1-mini"
	p := startServe(t, "HERMES_HOME="+home, "HERMES_MODEL="+priced)
	m := regexp.MustCompile(`metrics on (http://\S+/metrics) \(no key\)`).FindStringSubmatch(p.logs.String())
	if m == nil {
		t.Fatalf("no metrics address announced:\n%s", p.logs.String())
	}
	side := m[1]

	get := func(url, key string) int {
		req, _ := http.NewRequest("GET", url, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	if code := get(p.base+"/metrics", ""); code != http.StatusUnauthorized {
		t.Fatalf("/metrics without a key: %d", code)
	}
	if code := get(p.base+"/metrics", "wrong-key-0123456789"); code != http.StatusUnauthorized {
		t.Fatalf("/metrics with a wrong key: %d", code)
	}
	if code := get(p.base+"/metrics", extraKey); code != http.StatusForbidden {
		t.Fatalf("/metrics with an extra key: %d", code)
	}
	onAPI := metricstest.Scrape(t, p.base+"/metrics", testAPIKey)
	if _, ok := onAPI["hermes_turns_total"]; ok {
		t.Fatal("turn counts before any turn")
	}
	if _, ok := onAPI["go_goroutines"]; !ok {
		t.Fatal("no Go runtime metrics on the API's address")
	}
	before := metricstest.Scrape(t, side, "")

	chat := func(stream bool) *http.Response {
		body := `{"model":"hermes-agent","messages":[{"role":"user","content":"hello"}]` + map[bool]string{true: `,"stream":true}`, false: `}`}[stream]
		req, _ := http.NewRequest("POST", p.base+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testAPIKey)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	u1 := model.Usage{PromptTokens: 1200, CompletionTokens: 300, TotalTokens: 1500, CachedTokens: 200}
	p.model.Enqueue(openaitest.Response{Text: []string{"hi"}, Usage: &u1})
	res := chat(false)
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("chat: %d", res.StatusCode)
	}

	// A streamed turn held mid-answer: it is an SSE client, and the cap of one turn refuses
	// the next.
	gate := openaitest.NewGate()
	u2 := model.Usage{PromptTokens: 800, CompletionTokens: 40, TotalTokens: 840}
	p.model.Enqueue(openaitest.Response{Text: []string{"a", "b"}, FaultAt: 2, Gate: gate, Usage: &u2})
	held := chat(true)
	defer held.Body.Close()
	if held.StatusCode != http.StatusOK {
		t.Fatalf("streamed chat: %d", held.StatusCode)
	}
	lines := bufio.NewScanner(held.Body)
	for lines.Scan() && !strings.Contains(lines.Text(), `"content":"a"`) {
	}
	during := metricstest.Scrape(t, side, "")
	if got := during.Value("hermes_sse_clients"); got != 1 {
		t.Errorf("SSE clients during a stream: %v", got)
	}
	if got := during.Value("hermes_sessions_busy"); got != 1 {
		t.Errorf("busy sessions during a turn: %v", got)
	}
	if got := during.Value("hermes_connections", "kind", "http"); got < 1 {
		t.Errorf("HTTP connections during a stream: %v", got)
	}
	refused := chat(false)
	_, _ = io.Copy(io.Discard, refused.Body)
	refused.Body.Close()
	if refused.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a turn over the cap: %d", refused.StatusCode)
	}
	gate.Release()
	for lines.Scan() {
	}

	after := metricstest.Scrape(t, side, "")
	delta := func(name string, labels ...string) float64 {
		return after.Value(name, labels...) - before.Value(name, labels...)
	}
	expect := func(want float64, name string, labels ...string) {
		t.Helper()
		if got := delta(name, labels...); got != want {
			t.Errorf("%s%v moved by %v, want %v", name, labels, got, want)
		}
	}
	expect(2, "hermes_turns_total", "outcome", "completed")
	expect(2, "hermes_model_calls_total", "model", priced)
	expect(2000, "hermes_model_tokens_total", "model", priced, "type", "input")
	expect(340, "hermes_model_tokens_total", "model", priced, "type", "output")
	expect(200, "hermes_model_tokens_total", "model", priced, "type", "cache_read")
	expect(1, "hermes_admission_rejections_total", "reason", "turn_cap")
	cm, ok := catalog.Default().Lookup("openai", "gpt-4.1-mini")
	if !ok {
		t.Fatal("gpt-4.1-mini is not in the catalogue")
	}
	if want, got := cm.Cost(u1)+cm.Cost(u2), delta("hermes_cost_usd_total", "model", priced); want <= 0 || math.Abs(got-want) > 1e-12 {
		t.Errorf("cost moved by %v; the catalogue prices the usage at %v", got, want)
	}
	for _, op := range []string{"create_session", "append_rows", "append_rows_usage"} { // a turn stores its answer and usage in one write
		if delta("hermes_store_operation_seconds", "op", op) < 1 {
			t.Errorf("no %s store operation observed", op)
		}
	}
	if !after.Has("hermes_leases_held") {
		t.Error("no hermes_leases_held")
	}
	if after.Value("hermes_sessions_active") < 1 {
		t.Errorf("active sessions %v", after.Value("hermes_sessions_active"))
	}
}

// TestMetricsAddrKey: with server.metrics_key set, the metrics address asks for it as a
// bearer key (401 with WWW-Authenticate otherwise), and stopping it frees the address.
func TestMetricsAddrKey(t *testing.T) {
	const key = "metrics-key-0123456789"
	var errOut lockedBuffer
	stop, err := serveMetrics("127.0.0.1:0", key, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "# HELP x x\n# TYPE x counter\nx 1\n")
	}), stdio{out: io.Discard, err: &errOut})
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`metrics on (http://\S+/metrics) \(bearer key server.metrics_key\)`).FindStringSubmatch(errOut.String())
	if m == nil {
		stop()
		t.Fatalf("announcement: %q", errOut.String())
	}
	for _, k := range []string{"", "wrong"} {
		req, _ := http.NewRequest("GET", m[1], nil)
		if k != "" {
			req.Header.Set("Authorization", "Bearer "+k)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized || res.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("key %q: %d %v", k, res.StatusCode, res.Header)
		}
	}
	if f := metricstest.Scrape(t, m[1], key); f.Value("x") != 1 {
		t.Errorf("scrape with the key: %v", f)
	}
	stop()
	if _, err := http.Get(m[1]); err == nil {
		t.Error("the metrics address still answers after stop")
	}
}
