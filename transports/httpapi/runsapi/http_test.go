package runsapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/runs"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/store/memstore"
	"github.com/hermes-go/hermes/transports/gateway"
	"github.com/hermes-go/hermes/transports/httpapi"
)

const (
	internalKey = "internal-key-0123456789"
	otherKey2   = "second-key-0123456789"
)

// newInternal builds a server (not listening: requests go through fiber's Test) over st.
func newInternal(t testing.TB, st store.Store) *server {
	t.Helper()
	fake := openaitest.New(t)
	fake.Enqueue(openaitest.Text("new"))
	prov := openai.New(openai.Config{BaseURL: fake.URL(), MaxRetries: -1})
	eng, err := engine.New(engine.Config{Store: st, Providers: map[string]model.Provider{"openai": prov}, DefaultModel: "openai:fake", Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway.New(eng, gateway.Options{})
	s, err := httpapi.New(eng, gw, httpapi.Options{APIKey: internalKey, ExtraKeys: []httpapi.NamedKey{{Key: otherKey2}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		gw.Close()
		eng.Close()
	})
	return &server{s, st}
}

// server is a server over HTTP without a listener (requests go through fiber's Test), with the
// store it runs on.
type server struct {
	*httpapi.Server
	st store.Store
}

func (s *server) testCall(t testing.TB, method, path, body string, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+internalKey)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := s.App().Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return res.StatusCode, m
}

// putRecord stores a run record as the ledger keeps it (before any server reads the store).
func putRecord(t testing.TB, st store.Store, rec runs.Record) runs.Record {
	t.Helper()
	rec.Version = 1
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutKV(context.Background(), kvRun+rec.RunID, b); err != nil {
		t.Fatal(err)
	}
	return rec
}

// kvRun is where the ledger keeps run records.
const kvRun = "httpapi/run/"

// settledRecord writes a settled keyed run of owner, settled at `at`.
func settledRecord(t testing.TB, st store.Store, id, owner, key, body string, at time.Time) runs.Record {
	t.Helper()
	return putRecord(t, st, runs.Record{RunID: id, AdmissionID: "adm_" + id, Owner: owner, SessionID: "s", Status: runs.Completed, Generation: 1,
		Fingerprint: runs.SHA256Hex(body + "\n"), IdemKey: runs.SHA256Hex(key), Order: runs.NextOrder(), CreatedAt: at, SettledAt: at,
		Result: map[string]any{"completed": true, "output": "old"}})
}

// Runs and their Idempotency-Keys belong to the key that admitted them: another key neither
// sees the run nor replays it.
func TestRunsScopedToOwner(t *testing.T) {
	st := memstore.New()
	body := `{"input":"hi"}`
	settledRecord(t, st, "run_other", httpapi.Principal("some-other-key-0123"), "k1", body, time.Now())
	mine := settledRecord(t, st, "run_mine", httpapi.Principal(internalKey), "k2", body, time.Now())
	s := newInternal(t, st)

	if code, m := s.testCall(t, "GET", "/v1/runs/run_other", "", nil); code != 404 || m["error"].(map[string]any)["code"] != "run_not_found" {
		t.Fatalf("a foreign run: %d %v", code, m)
	}
	if code, m := s.testCall(t, "GET", "/v1/runs/run_mine", "", nil); code != 200 || m["output"] != "old" || m["admission_id"] != mine.AdmissionID {
		t.Fatalf("own run: %d %v", code, m)
	}
	// k2 replays for its owner; k1 is another owner's key, so here it admits a new run.
	if code, m := s.testCall(t, "POST", "/v1/runs", body, map[string]string{"Idempotency-Key": "k2"}); code != 202 || m["run_id"] != "run_mine" || m["replayed"] != true {
		t.Fatalf("replay: %d %v", code, m)
	}
	if code, m := s.testCall(t, "POST", "/v1/runs", body, map[string]string{"Idempotency-Key": "k1"}); code != 202 || m["run_id"] == "run_other" || m["replayed"] != false {
		t.Fatalf("a foreign key: %d %v", code, m)
	}
	// Live: a run admitted with the second key is that principal's alone, and the same
	// Idempotency-Key with the same body is a separate admission per principal.
	other := map[string]string{"Authorization": "Bearer " + otherKey2, "Idempotency-Key": "shared"}
	code, theirs := s.testCall(t, "POST", "/v1/runs", `{"input":"theirs"}`, other)
	if code != 202 {
		t.Fatalf("%d %v", code, theirs)
	}
	id := theirs["run_id"].(string)
	if code, _ := s.testCall(t, "GET", "/v1/runs/"+id, "", nil); code != 404 {
		t.Fatalf("another principal's run: %d", code)
	}
	if code, _ := s.testCall(t, "GET", "/v1/runs/"+id, "", other); code != 200 {
		t.Fatalf("own run: %d", code)
	}
	if code, m := s.testCall(t, "POST", "/v1/runs", `{"input":"theirs"}`, map[string]string{"Idempotency-Key": "shared"}); code != 202 || m["run_id"] == id || m["replayed"] != false {
		t.Fatalf("the same key under another principal: %d %v", code, m)
	}
	if code, m := s.testCall(t, "POST", "/v1/runs", `{"input":"theirs"}`, other); code != 202 || m["run_id"] != id || m["replayed"] != true {
		t.Fatalf("replay for the principal that owns the key: %d %v", code, m)
	}
	// The record keeps a digest of the key, never the key.
	all, err := st.ListKV(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range all {
		if strings.Contains(string(v), internalKey) || strings.Contains(string(v), otherKey2) || strings.Contains(string(v), `"shared"`) {
			t.Fatalf("%s holds a secret: %s", k, v)
		}
	}
}

// Settled records older than the retention are dropped with their keys, at start and by the
// sweeper; unsettled ones never are.
func TestRunRecordsSwept(t *testing.T) {
	st := memstore.New()
	owner := httpapi.Principal(internalKey)
	body := `{"input":"hi"}`
	settledRecord(t, st, "run_ancient", owner, "k-old", body, time.Now().Add(-runs.Retention-time.Minute))
	settledRecord(t, st, "run_recent", owner, "k-new", body, time.Now().Add(-time.Hour))
	s := newInternal(t, st)
	if _, err := st.GetKV(context.Background(), kvRun+"run_ancient"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an expired record survived the start: %v", err)
	}
	if code, m := s.testCall(t, "POST", "/v1/runs", body, map[string]string{"Idempotency-Key": "k-new"}); code != 202 || m["run_id"] != "run_recent" {
		t.Fatalf("replay within the retention: %d %v", code, m)
	}
	// An unsettled record, however old, stays.
	old := time.Now().Add(-48 * time.Hour)
	putRecord(t, st, runs.Record{RunID: "run_stuck", Owner: owner, SessionID: "s2", Status: runs.Running, Generation: 1, Process: "proc_gone", CreatedAt: old})
	n, err := ledger(t, st).Sweep(context.Background(), time.Now().Add(runs.Retention))
	if err != nil || n != 1 {
		t.Fatalf("swept %d: %v", n, err)
	}
	if _, err := st.GetKV(context.Background(), kvRun+"run_stuck"); err != nil {
		t.Fatalf("an unsettled record was swept: %v", err)
	}
	if id, _, _ := ledger(t, st).Lookup(context.Background(), owner, runs.SHA256Hex("k-new"), runs.SHA256Hex(body+"\n")); id != "" {
		t.Fatalf("an expired key still replays %s", id)
	}
}

// FuzzResolveUnknownBody sends arbitrary bodies to resolve-unknown: every answer is a client
// error (400, 404 or 409), never a server error.
func FuzzResolveUnknownBody(f *testing.F) {
	st := memstore.New()
	putRecord(f, st, runs.Record{RunID: "run_u", AdmissionID: "adm_u", Owner: httpapi.Principal(internalKey),
		SessionID: "s", Status: runs.Running, Generation: 1, Process: "proc_gone", CreatedAt: time.Now()})
	s := newInternal(f, st)
	f.Add(`{"admission_id":"adm_u","execution_generation":2}`)
	f.Add(`{"admission_id":"adm_x","execution_generation":1}`)
	f.Add(`{"admission_id":null,"execution_generation":1e400}`)
	f.Add(`{"execution_generation":"1"}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, body string) {
		code, m := s.testCall(t, "POST", "/v1/runs/run_u/resolve-unknown", body, nil)
		if code == 200 {
			// Only the exact admission resolves it (once; later bodies get 409).
			var req struct {
				AdmissionID string `json:"admission_id"`
				Generation  int64  `json:"execution_generation"`
			}
			if json.Unmarshal([]byte(body), &req) != nil || req.AdmissionID != "adm_u" || req.Generation != 1 {
				t.Fatalf("%q resolved the run: %v", body, m)
			}
			return
		}
		if code != 400 && code != 409 {
			t.Fatalf("%q: %d %v", body, code, m)
		}
	})
}

// ledger opens another process's runs ledger on st, for what the server's own does on its own
// schedule (sweeping) or does not show (a key's lookup).
func ledger(t testing.TB, st store.Store) *runs.Ledger {
	t.Helper()
	l, err := runs.Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// A client that read a restart-unknown run's log to its end on one server and reconnects to
// another with the last id it saw is told 204 (stop reconnecting), even when its request is
// the first this server hears of the run: the answer waits for the log the record implies,
// rather than opening a stream that closes empty.
func TestRunEventsOfAnUnknownRunEndWith204(t *testing.T) {
	for i := range 20 {
		st := memstore.New()
		id := "run_u" + strings.Repeat("x", i)
		putRecord(t, st, runs.Record{RunID: id, AdmissionID: "adm_u", Owner: httpapi.Principal(internalKey),
			SessionID: "s", Status: runs.Running, Generation: 1, Process: "proc_gone", CreatedAt: time.Now()})
		s := newInternal(t, st)
		// The log is run.started (1), run.unknown (2): nothing comes after 2.
		req := httptest.NewRequest("GET", "/v1/runs/"+id+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+internalKey)
		req.Header.Set("Last-Event-ID", "2")
		res, err := s.App().Test(req, 10_000)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 204 {
			t.Fatalf("round %d: reconnect after run.unknown: %d %q", i, res.StatusCode, b)
		}
		// From the start, the whole log.
		req = httptest.NewRequest("GET", "/v1/runs/"+id+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+internalKey)
		res, err = s.App().Test(req, 10_000)
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(b), "id: 1\n") || !strings.Contains(string(b), `"run.unknown"`) || strings.Contains(string(b), "id: 3\n") {
			t.Fatalf("round %d: the whole log: %d %s", i, res.StatusCode, b)
		}
	}
}
