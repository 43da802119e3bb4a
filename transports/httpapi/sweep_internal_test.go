package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/model/openai"
	"github.com/hermes-go/hermes/engine/model/openai/openaitest"
	"github.com/hermes-go/hermes/engine/store"
	"github.com/hermes-go/hermes/engine/store/memstore"
	"github.com/hermes-go/hermes/transports/gateway"
)

// newInternal builds a server (not listening) over st, whose model answers "new".
func newInternal(t testing.TB, st store.Store) *Server {
	t.Helper()
	return newInternalAnswering(t, st, "new")
}

// newInternalAnswering is newInternal with a model that gives these answers, in turn.
func newInternalAnswering(t testing.TB, st store.Store, answers ...string) *Server {
	t.Helper()
	fake := openaitest.New(t)
	for _, a := range answers {
		fake.Enqueue(openaitest.Text(a))
	}
	prov := openai.New(openai.Config{BaseURL: fake.URL(), MaxRetries: -1})
	eng, err := engine.New(engine.Config{Store: st, Providers: map[string]model.Provider{"openai": prov}, DefaultModel: "openai:fake", Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway.New(eng, gateway.Options{})
	s, err := New(eng, gw, Options{APIKey: "internal-key-0123456789"})
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
	return s
}

func TestKeepSessionReleasesOnlyThisServersIdleSessions(t *testing.T) {
	s := newInternal(t, memstore.New())
	ctx := context.Background()
	create := func(source string) *engine.Session {
		t.Helper()
		sess, err := s.eng.Create(ctx, engine.CreateOptions{Source: source})
		if err != nil {
			t.Fatal(err)
		}
		return sess
	}
	api, gatewayOwned, queued := create(Surface), create("tui"), create(Surface)
	release := s.runs.Hold(queued.ID()) // a FIFO worker holds it

	if n := s.eng.ReleaseIdle(0, s.keepSession); n != 1 {
		t.Fatalf("released %d sessions, want 1 (the idle API session)", n)
	}
	if _, live := s.eng.Live(api.ID()); live {
		t.Fatal("the idle API session is still live")
	}
	if _, live := s.eng.Live(gatewayOwned.ID()); !live {
		t.Fatal("a session of another surface was released")
	}
	if _, live := s.eng.Live(queued.ID()); !live {
		t.Fatal("a session with a queued run was released")
	}

	release()
	if n := s.eng.ReleaseIdle(0, s.keepSession); n != 1 {
		t.Fatalf("released %d once the queue emptied, want 1", n)
	}
}

func TestStartTurnOnAReleasedHandle(t *testing.T) {
	s := newInternal(t, memstore.New())
	ctx := context.Background()
	stale, err := s.eng.Create(ctx, engine.CreateOptions{Source: Surface})
	if err != nil {
		t.Fatal(err)
	}
	// The handler opened the session, then the sweeper let it go before the turn started.
	if n := s.eng.ReleaseIdle(0, nil); n != 1 {
		t.Fatalf("released %d, want 1", n)
	}
	tr, err := s.startTurn(ctx, stale, "hello")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.close("")
	if tr.sess != stale || stale.Released() {
		t.Fatal("the turn must run on the handle the handler held, live again")
	}
	if live, ok := s.eng.Live(stale.ID()); !ok || live != stale {
		t.Fatal("the held handle is not the live object")
	}
	for !tr.done {
		if _, err := tr.next(ctx); err != nil && !errors.Is(err, errSilent) {
			t.Fatal(err)
		}
	}
	if tr.out.Status != engine.StatusCompleted || tr.out.Text != "new" {
		t.Fatalf("outcome %+v", tr.out)
	}
}

// A session live here whose title another process changed reads with that title: the store's
// record is newer than the live copy, which only this process's own changes update.
func TestSessionReadShowsAnotherProcessesTitle(t *testing.T) {
	st := memstore.New()
	s := newInternal(t, st)
	ctx := context.Background()
	sess, err := s.eng.Create(ctx, engine.CreateOptions{Source: Surface})
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.SetTitle(ctx, "mine"); err != nil {
		t.Fatal(err)
	}
	other, err := engine.New(engine.Config{Store: st, Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	theirs, err := other.Open(ctx, sess.ID())
	if err != nil {
		t.Fatal(err)
	}
	if err := theirs.SetTitle(ctx, "set elsewhere"); err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/api/sessions/"+sess.ID(), nil)
	req.Header.Set("Authorization", "Bearer internal-key-0123456789")
	res, err := s.App().Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct {
		Session struct{ Title string } `json:"session"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode != 200 {
		t.Fatalf("%d %v", res.StatusCode, err)
	}
	if body.Session.Title != "set elsewhere" {
		t.Fatalf("title %q, want the one another process set", body.Session.Title)
	}
}
