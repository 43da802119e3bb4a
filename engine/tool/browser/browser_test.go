package browser_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/browser"
)

// recorder is a controller that remembers what it was asked and answers with fn.
type recorder struct {
	got []browser.Command
	sid []string
	fn  func(ctx context.Context, c browser.Command) (browser.Reply, error)
}

func (r *recorder) Do(ctx context.Context, sessionID string, c browser.Command) (browser.Reply, error) {
	r.got = append(r.got, c)
	r.sid = append(r.sid, sessionID)
	return r.fn(ctx, c)
}

func call(t *testing.T, tl *browser.Tool, args string) tool.Result {
	t.Helper()
	res, err := tl.Call(context.Background(), tool.Call{ID: "c1", Name: browser.Name, Args: json.RawMessage(args)}, &tool.Env{SessionID: "s1"})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	return res
}

func TestForwardsValidCalls(t *testing.T) {
	rec := &recorder{fn: func(_ context.Context, c browser.Command) (browser.Reply, error) {
		return browser.Reply{Content: "opened " + string(c.Arguments)}, nil
	}}
	tl := browser.New(rec, browser.Options{})
	res := call(t, tl, `{"action":"navigate","url":"https://example.com/"}`)
	if res.IsError || res.Content != `opened {"url":"https://example.com/"}` {
		t.Fatalf("result %+v", res)
	}
	if len(rec.got) != 1 || rec.got[0].Action != "navigate" || rec.sid[0] != "s1" {
		t.Fatalf("controller saw %+v for %v", rec.got, rec.sid)
	}
	if spec := tl.Spec(); spec.Name != "browser" || !json.Valid(spec.Parameters) {
		t.Fatalf("spec %+v", spec)
	}
}

func TestBadArgumentsNeverReachTheController(t *testing.T) {
	rec := &recorder{fn: func(context.Context, browser.Command) (browser.Reply, error) { return browser.Reply{}, nil }}
	tl := browser.New(rec, browser.Options{})
	for _, args := range []string{
		``, `[]`, `null`, `{}`, `{"action":""}`, `{"action":"format_disk"}`, `{"action":5}`,
		`{"action":"navigate"}`, `{"action":"navigate","url":"file:///etc/passwd"}`, `{"action":"navigate","url":"javascript:alert(1)"}`,
		`{"action":"click"}`, `{"action":"type","text":7}`, `{"action":"snapshot","extra":"x"}`, `{"action":"snapshot"} {}`,
	} {
		res := call(t, tl, args)
		if !res.IsError || !strings.HasPrefix(res.Content, "browser: ") {
			t.Errorf("%s: %+v", args, res)
		}
	}
	if len(rec.got) != 0 {
		t.Fatalf("the controller was contacted: %+v", rec.got)
	}
}

func TestControllerRefusalsAreToolErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{browser.ErrNoController, "no browser controller"},
		{browser.ErrNotAllowed, "not allowed"},
		{browser.ErrControllerGone, "disconnected"},
	} {
		rec := &recorder{fn: func(context.Context, browser.Command) (browser.Reply, error) { return browser.Reply{}, c.err }}
		res := call(t, browser.New(rec, browser.Options{}), `{"action":"snapshot"}`)
		if !res.IsError || !strings.Contains(res.Content, c.want) {
			t.Errorf("%v: %+v", c.err, res)
		}
	}
}

func TestTimeoutIsReported(t *testing.T) {
	// The controller waits for its context: only the tool's own deadline can end the call.
	rec := &recorder{fn: func(ctx context.Context, _ browser.Command) (browser.Reply, error) {
		<-ctx.Done()
		return browser.Reply{}, ctx.Err()
	}}
	res := call(t, browser.New(rec, browser.Options{Timeout: time.Millisecond}), `{"action":"back"}`)
	if !res.IsError || !strings.Contains(res.Content, "did not answer in time") {
		t.Fatalf("%+v", res)
	}
}

func TestInterruptIsAGoError(t *testing.T) {
	rec := &recorder{fn: func(ctx context.Context, _ browser.Command) (browser.Reply, error) { return browser.Reply{}, ctx.Err() }}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := browser.New(rec, browser.Options{}).Call(ctx, tool.Call{Args: json.RawMessage(`{"action":"back"}`)}, &tool.Env{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
}

func FuzzParseCall(f *testing.F) {
	for _, s := range []string{`{"action":"navigate","url":"https://a.b"}`, `{"action":"type","ref":"e1","text":"hi"}`, `{}`, `[`, `{"action":"scroll","direction":"up"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		cmd, err := browser.ParseCall(b)
		if err != nil {
			return
		}
		if !browser.KnownAction(cmd.Action) {
			t.Fatalf("unknown action accepted: %q", cmd.Action)
		}
		var m map[string]string
		if err := json.Unmarshal(cmd.Arguments, &m); err != nil {
			t.Fatalf("arguments %s: %v", cmd.Arguments, err)
		}
		if _, ok := m["action"]; ok {
			t.Fatalf("action left in arguments: %s", cmd.Arguments)
		}
	})
}
