package runsapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/builtin"
	"github.com/hermes-go/hermes/transports/gateway"
	"github.com/hermes-go/hermes/transports/httpapi"
)

// life is one server listening on a store directory that outlives it, as one life of a
// process that is stopped and started again.
type life struct {
	base string
	stop func() // a clean shutdown, as on SIGINT
}

func startLife(t *testing.T, dir, cwd string, fake *openaitest.Server) *life {
	t.Helper()
	st, err := badgerstore.Open(dir, badgerstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{
		Store:        st,
		Providers:    map[string]model.Provider{"openai": openai.New(openai.Config{BaseURL: fake.URL(), MaxRetries: -1})},
		DefaultModel: "openai:fake-agent",
		Tools:        tool.NewRegistry(builtin.Defaults(func(cmd string) tool.Verdict { return tool.Verdict{Command: cmd} })...),
		Cwd:          cwd,
	})
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway.New(eng, gateway.Options{})
	srv, err := httpapi.New(eng, gw, httpapi.Options{APIKey: internalKey})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	stopped := false
	l := &life{base: "http://" + ln.Addr().String()}
	l.stop = func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		<-served
		gw.Close()
		eng.Close()
		if err := st.Close(); err != nil {
			t.Errorf("store close: %v", err)
		}
	}
	t.Cleanup(l.stop)
	return l
}

// frame is one event of a run's stream: its SSE id and its data.
type frame struct {
	id   int
	data map[string]any
}

// stream opens a run's event stream after Last-Event-ID after ("": from the start) and sends
// its frames until the stream ends.
func (l *life) stream(t *testing.T, runID, after string) <-chan frame {
	t.Helper()
	req, _ := http.NewRequest("GET", l.base+"/v1/runs/"+runID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+internalKey)
	if after != "" {
		req.Header.Set("Last-Event-ID", after)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 {
		res.Body.Close()
		t.Fatalf("events of %s after %q: %d", runID, after, res.StatusCode)
	}
	out := make(chan frame, 64)
	go func() {
		defer close(out)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		var f frame
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
				f.id, _ = strconv.Atoi(v)
			} else if v, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				_ = json.Unmarshal([]byte(v), &f.data)
				out <- f
				f = frame{}
			}
		}
	}()
	return out
}

func (l *life) call(t *testing.T, method, path, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(method, l.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+internalKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(res.Body).Decode(&m); err != nil {
		t.Fatalf("%s %s: %d: %v", method, path, res.StatusCode, err)
	}
	return m
}

func frameNames(fs []frame) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i], _ = f.data["event"].(string)
	}
	return out
}

// readAll reads frames until the stream ends (or, with until set, until that event).
func readAll(t *testing.T, frames <-chan frame, until string) []frame {
	t.Helper()
	var got []frame
	timeout := time.After(30 * time.Second)
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				if until != "" {
					t.Fatalf("the stream ended before %s: %v", until, frameNames(got))
				}
				return got
			}
			got = append(got, f)
			if until != "" && f.data["event"] == until {
				return got
			}
		case <-timeout:
			t.Fatalf("stream: no end: %v", frameNames(got))
		}
	}
}

// A server stopped while a run's turn waits in a slow tool settles the run interrupted with
// the log every later server derives for it: a client that read the log live finds the same
// events under the same ids after the restart (the interrupted tool call's tool.completed
// before run.interrupted in both), and GET names the same last event before any stream read
// the log there.
func TestRunLogTheSameAfterAShutdownMidTool(t *testing.T) {
	dir, cwd := t.TempDir(), t.TempDir()
	fake := openaitest.New(t)
	fake.Enqueue(openaitest.ToolCalls(openaitest.Call{ID: "call_slow", Name: "terminal", Args: []string{`{"command":"sleep 60"}`}}))

	a := startLife(t, dir, cwd, fake)
	adm := a.call(t, "POST", "/v1/runs", `{"input":"run the slow command","session_id":"slow"}`)
	id, _ := adm["run_id"].(string)
	if id == "" {
		t.Fatalf("admission %v", adm)
	}
	live := a.stream(t, id, "")
	seen := readAll(t, live, "tool.started")
	a.stop()
	seen = append(seen, readAll(t, live, "")...)

	b := startLife(t, dir, cwd, fake)
	st := b.call(t, "GET", "/v1/runs/"+id, "")
	later := readAll(t, b.stream(t, id, ""), "")
	if len(later) != len(seen) || later[len(later)-1].data["event"] != "run.interrupted" {
		t.Fatalf("live %v, after the restart %v", frameNames(seen), frameNames(later))
	}
	for i, f := range seen {
		x, _ := json.Marshal(f.data)
		y, _ := json.Marshal(later[i].data)
		if f.id != i+1 || later[i].id != f.id || string(x) != string(y) {
			t.Fatalf("event %d: live %d %s, after the restart %d %s", i, f.id, x, later[i].id, y)
		}
	}
	if got := strings.Join(frameNames(later), ","); !strings.Contains(got, "tool.started,tool.completed,run.interrupted") {
		t.Fatalf("log %s", got)
	}
	if st["status"] != "interrupted" || st["last_event"] != "run.interrupted" {
		t.Fatalf("GET after the restart: %v", st)
	}
}
