package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/store/memstore"
)

// holdingStore holds event appends while held is set.
type holdingStore struct {
	store.Store
	held    atomic.Bool
	release chan struct{}
}

func (s *holdingStore) AppendEvents(ctx context.Context, sid string, f store.Fence, evs []store.StoredEvent) error {
	if s.held.Load() {
		select {
		case <-s.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.Store.AppendEvents(ctx, sid, f, evs)
}

// The process executing a run streams its turn's events once the store holds them, as every
// other process reads them: while the store holds the turn's events back, the run's stream on
// its own process shows none of them; once they are stored, it shows them, then the end.
func TestRunStreamOnTheExecutorWaitsForTheStore(t *testing.T) {
	st := &holdingStore{Store: memstore.New(), release: make(chan struct{})}
	s := newInternalAnswering(t, st, "warm", "new")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	call := func(method, path, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer internal-key-0123456789")
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	start := func(input string) string {
		t.Helper()
		res := call("POST", "/v1/runs", `{"input":"`+input+`","session_id":"s-held"}`)
		defer res.Body.Close()
		var admitted struct {
			RunID string `json:"run_id"`
		}
		if err := json.NewDecoder(res.Body).Decode(&admitted); err != nil || res.StatusCode != 202 {
			t.Fatalf("admission: %d %v", res.StatusCode, err)
		}
		return admitted.RunID
	}
	// A first run makes the session and its stored log, and leaves this process holding it.
	warm := start("warm up")
	for deadline := time.Now().Add(30 * time.Second); ; {
		res := call("GET", "/v1/runs/"+warm, "")
		var rec struct{ Status string }
		_ = json.NewDecoder(res.Body).Decode(&rec)
		res.Body.Close()
		if rec.Status == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first run is %s", rec.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	st.held.Store(true)
	admitted := struct{ RunID string }{start("hi")}
	stream := call("GET", "/v1/runs/"+admitted.RunID+"/events", "")
	defer stream.Body.Close()
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var seen []string
	held := time.After(time.Second) // the turn answers at once; its events stay unstored
	for waiting := true; waiting; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the stream ended while the store held the turn's events: %v", seen)
			}
			if strings.Contains(l, `"message.delta"`) {
				t.Fatalf("the executor streamed an event the store does not hold: %s", l)
			}
			seen = append(seen, l)
		case <-held:
			waiting = false
		}
	}
	close(st.release)
	deadline := time.After(30 * time.Second)
	delta := false
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the stream ended before the run did: %v", seen)
			}
			seen = append(seen, l)
			delta = delta || strings.Contains(l, `"message.delta"`) && strings.Contains(l, `"new"`)
			if strings.Contains(l, `"run.completed"`) {
				if !delta {
					t.Fatalf("the run completed without its stored delta: %v", seen)
				}
				return
			}
		case <-deadline:
			t.Fatalf("the run did not complete once its events were stored: %v", seen)
		}
	}
}
