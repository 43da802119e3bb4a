package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/transports/gateway"
	"github.com/hermes-go/hermes/transports/httpapi"
)

// otherServer is a second API server on tg's engine and store, as another `hermes serve` on
// the same home (or the same server after a restart) sees it: nothing in memory is shared.
func otherServer(t *testing.T, tg *target) *target {
	t.Helper()
	gw := gateway.New(tg.eng, gateway.Options{})
	srv, err := httpapi.New(tg.eng, gw, httpapi.Options{APIKey: testKey, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		<-served
		gw.Close()
	})
	return &target{t: t, base: "http://" + ln.Addr().String(), fake: tg.fake, eng: tg.eng, cwd: tg.cwd, srv: srv}
}

// A turn whose tool ran and whose model then failed is answered 409 turn_failed; the client's
// retry reaching another server on the same home is the same answer, replayed, and the tool
// does not run again.
func TestFailedTurnReplayedByAnotherServer(t *testing.T) {
	a := newTarget(t, nil)
	b := otherServer(t, a)
	a.fake.Enqueue(
		openaitest.ToolCalls(openaitest.Call{ID: "call_1", Name: "terminal", Args: []string{`{"command":"echo ran >> ran.txt"}`}}),
		openaitest.HTTPError(400, openaitest.APIError{Message: "bad things", Type: "invalid_request_error"}),
	)
	body := chatBody(false, false, "user", "run it once")
	envelope(t, a.do(t, "POST", "/v1/chat/completions", body, nil), 409, "turn_failed")
	asked := len(a.fake.Requests())
	r := b.do(t, "POST", "/v1/chat/completions", body, nil)
	if e := envelope(t, r, 409, "turn_failed"); !strings.Contains(e["message"].(string), "bad things") || r.header.Get("X-Hermes-Replayed") != "true" {
		t.Fatalf("retry on the other server: %v %s", r.header, r.body)
	}
	if n := len(a.fake.Requests()); n != asked {
		t.Fatalf("the retry reached the model: %d requests, want %d", n, asked)
	}
	ran, err := os.ReadFile(filepath.Join(a.cwd, "ran.txt"))
	if err != nil || string(ran) != "ran\n" {
		t.Fatalf("the tool ran %q (%v), want once", ran, err)
	}
}

// Idempotency-Key across servers: a finished request's answer is replayed by another server
// (chat completions and responses, the same ids); while the first still runs, the other server
// answers in progress, and another body under the key is a conflict.
func TestIdempotencyKeyAcrossServers(t *testing.T) {
	a := newTarget(t, nil)
	b := otherServer(t, a)
	feats := decode(t, a.do(t, "GET", "/v1/capabilities", "", nil))["features"].(map[string]any)
	if idem, _ := feats["turn_idempotency"].(map[string]any); idem["durable"] != true {
		t.Fatalf("turn_idempotency %v", feats["turn_idempotency"])
	}
	a.fake.Enqueue(openaitest.Text("only ", "once"))
	hdr := map[string]string{"Idempotency-Key": "key-across"}
	body := chatBody(false, false, "user", "idempotent question")
	r1 := a.do(t, "POST", "/v1/chat/completions", body, hdr)
	r2 := b.do(t, "POST", "/v1/chat/completions", body, hdr)
	if r1.status != 200 || r2.status != 200 || !bytes.Equal(r1.body, r2.body) || r2.header.Get("Idempotency-Replayed") != "true" ||
		r2.header.Get("X-Hermes-Session-Id") != r1.header.Get("X-Hermes-Session-Id") {
		t.Fatalf("first %d %s\nreplay %d %v %s", r1.status, r1.body, r2.status, r2.header, r2.body)
	}
	envelope(t, b.do(t, "POST", "/v1/chat/completions", chatBody(false, false, "user", "another"), hdr), 409, "idempotency_key_conflict")

	a.fake.Enqueue(openaitest.Text("kept"))
	rhdr := map[string]string{"Idempotency-Key": "resp-across"}
	rbody := `{"input":"idempotent response"}`
	var o1, o2 struct {
		ID         string `json:"id"`
		OutputText string `json:"output_text"`
	}
	if r := a.do(t, "POST", "/v1/responses", rbody, rhdr); r.status != 200 || json.Unmarshal(r.body, &o1) != nil {
		t.Fatalf("response %d %s", r.status, r.body)
	}
	if r := b.do(t, "POST", "/v1/responses", rbody, rhdr); r.status != 200 || json.Unmarshal(r.body, &o2) != nil || o2.ID != o1.ID || o2.OutputText != "kept" || r.header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("replayed response %d %v %s", r.status, r.header, r.body)
	}
	if n := len(a.fake.Requests()); n != 2 {
		t.Fatalf("the model was asked %d times, want 2", n)
	}

	// A request still running on one server: its key is in progress on the other.
	gate := openaitest.NewGate()
	t.Cleanup(gate.Release)
	a.fake.Enqueue(openaitest.Response{Text: []string{"slow ", "answer"}, FaultAt: 2, Gate: gate})
	hdr = map[string]string{"Idempotency-Key": "key-running"}
	body = chatBody(false, false, "user", "slow question")
	first := make(chan resp, 1)
	go func() {
		// Not tg.do: it may stop the test, which only the test's goroutine can.
		req, _ := http.NewRequest("POST", a.base+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "key-running")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			first <- resp{body: []byte(err.Error())}
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		first <- resp{res.StatusCode, res.Header, b}
	}()
	select {
	case <-gate.Reached():
	case <-time.After(60 * time.Second):
		t.Fatal("the first request's model call never started")
	}
	envelope(t, b.do(t, "POST", "/v1/chat/completions", body, hdr), 409, "idempotency_key_in_progress")
	envelope(t, b.do(t, "POST", "/v1/chat/completions", chatBody(false, false, "user", "other"), hdr), 409, "idempotency_key_conflict")
	gate.Release()
	if r := <-first; r.status != 200 || !strings.Contains(string(r.body), "slow answer") {
		t.Fatalf("first request %d %s", r.status, r.body)
	}
	if r := b.do(t, "POST", "/v1/chat/completions", body, hdr); r.status != 200 || r.header.Get("Idempotency-Replayed") != "true" || !strings.Contains(string(r.body), "slow answer") {
		t.Fatalf("after it finished %d %v %s", r.status, r.header, r.body)
	}
	if n := len(a.fake.Requests()); n != 3 {
		t.Fatalf("the model was asked %d times, want 3", n)
	}
}
