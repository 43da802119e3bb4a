package httpapi_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/store"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/transports/gateway"
	"github.com/hermes-go/hermes/transports/httpapi"
)

// refusingStore refuses to store responses while refuse is set, as a store that went out
// between a turn and its response's write does.
type refusingStore struct {
	store.Store
	refuse atomic.Bool
}

func (s *refusingStore) PutKV(ctx context.Context, key string, value []byte) error {
	if s.refuse.Load() && strings.HasPrefix(key, "httpapi/response/") {
		return store.ErrUnavailable
	}
	return s.Store.PutKV(ctx, key, value)
}

// A response whose write the store refused is not acknowledged: no 200 (nor
// response.completed) names an id that is not stored. The client gets a 503 with Retry-After
// (an error event on a stream); once the store takes writes again, a response is stored and
// read back.
func TestResponseNotStoredNotAcknowledged(t *testing.T) {
	t.Parallel()
	fake := openaitest.New(t)
	bs, err := badgerstore.Open(t.TempDir(), badgerstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	st := &refusingStore{Store: bs}
	eng, err := engine.New(engine.Config{Store: st, DefaultModel: "openai:fake-agent", Cwd: t.TempDir(),
		Providers: map[string]model.Provider{"openai": openai.New(openai.Config{BaseURL: fake.URL(), MaxRetries: -1})}})
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway.New(eng, gateway.Options{})
	srv, err := httpapi.New(eng, gw, httpapi.Options{APIKey: testKey, Version: "test"})
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
		eng.Close()
		bs.Close()
	})
	tg := &target{t: t, base: "http://" + ln.Addr().String(), fake: fake, eng: eng, srv: srv}

	st.refuse.Store(true)
	fake.Enqueue(openaitest.Text("lost"), openaitest.Text("lost too"))
	r := tg.do(t, "POST", "/v1/responses", `{"input":"hello","store":true}`, nil)
	if r.status != 503 || r.header.Get("Retry-After") == "" || strings.Contains(string(r.body), `"status":"completed"`) {
		t.Fatalf("a response the store refused: %d Retry-After %q %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	if id := r.header.Get(httpapi.HeaderResponseID); id == "" {
		t.Fatal("no response id header on the refusal")
	} else if g := tg.do(t, "GET", "/v1/responses/"+id, "", nil); g.status != 404 {
		t.Fatalf("GET of the unstored response %s: %d %s", id, g.status, g.body)
	}
	s := tg.do(t, "POST", "/v1/responses", `{"input":"hello","store":true,"stream":true}`, nil)
	if body := string(s.body); !strings.Contains(body, "event: error") || strings.Contains(body, "response.completed") {
		t.Fatalf("a streamed response the store refused: %s", body)
	}

	st.refuse.Store(false)
	fake.Enqueue(openaitest.Text("kept"))
	ok := decode(t, tg.do(t, "POST", "/v1/responses", `{"input":"again","store":true}`, nil))
	id, _ := ok["id"].(string)
	if g := tg.do(t, "GET", "/v1/responses/"+id, "", nil); g.status != 200 || !strings.Contains(string(g.body), "kept") {
		t.Fatalf("GET of the stored response %s: %d %s", id, g.status, g.body)
	}
}
