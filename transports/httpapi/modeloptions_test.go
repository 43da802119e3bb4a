package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermes-go/hermes/transports/httpapi"
)

type optionsBody struct {
	Object    string         `json:"object"`
	Current   map[string]any `json:"current"`
	Refreshed bool           `json:"refreshed"`
	Providers []struct {
		ID      string           `json:"id"`
		Custom  bool             `json:"custom"`
		Current bool             `json:"current"`
		BaseURL string           `json:"base_url"`
		Models  []map[string]any `json:"models"`
		Probe   map[string]any   `json:"probe"`
	} `json:"providers"`
}

func (b optionsBody) provider(t *testing.T, id string) (p struct {
	ID      string           `json:"id"`
	Custom  bool             `json:"custom"`
	Current bool             `json:"current"`
	BaseURL string           `json:"base_url"`
	Models  []map[string]any `json:"models"`
	Probe   map[string]any   `json:"probe"`
}) {
	t.Helper()
	for _, p := range b.Providers {
		if p.ID == id {
			return p
		}
	}
	t.Fatalf("provider %s missing: %+v", id, b.Providers)
	return p
}

func modelIDs(ms []map[string]any) string {
	var ids []string
	for _, m := range ms {
		ids = append(ids, m["id"].(string))
	}
	return strings.Join(ids, ",")
}

func TestModelOptions(t *testing.T) {
	// A live custom endpoint with a model list, counting its probes and checking the key.
	var probes atomic.Int32
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		probes.Add(1)
		if r.URL.Path != "/v1/models" || r.Header.Get("Authorization") != "Bearer lab-key" || r.Header.Get("X-Org") != "lab" {
			http.Error(w, `{"error":{"message":"bad probe"}}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"lab-large"},{"id":"lab-small"},{"id":"lab-large"}]}`))
	}))
	t.Cleanup(live.Close)
	// A hung endpoint: it answers only when the probe gives up.
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hung.Close)
	// A dead endpoint: nothing listens any more.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL + "/v1"
	dead.Close()

	var tg *target
	tg = newTarget(t, func(o *httpapi.Options) {
		o.Providers = func() []httpapi.ProviderInfo {
			return []httpapi.ProviderInfo{
				// The engine's provider is the fake OpenAI server, saved as a custom endpoint: it
				// has no /models route, so its probe fails (404) and says so.
				{Name: "openai", Type: "openai", BaseURL: tg.fake.URL(), Custom: true, Models: []string{"fake-agent"}},
				{Name: "lab", Type: "openai", BaseURL: "http://user:secret@" + strings.TrimPrefix(live.URL, "http://") + "/v1", APIKey: "lab-key", Headers: map[string]string{"X-Org": "lab"}, Custom: true},
				{Name: "gone", Type: "openai", BaseURL: deadURL, Custom: true},
				{Name: "slow", Type: "openai", BaseURL: hung.URL + "/v1", Custom: true, ProbeTimeout: 50 * time.Millisecond},
				{Name: "replay", Type: "replay"},
			}
		}
	})

	// Opening the picker probes only the current provider (openai, custom here).
	b := decodeAs[optionsBody](t, tg.do(t, "GET", "/api/model/options", "", nil), 200)
	if b.Object != "hermes.model_options" || b.Current["id"] != "openai:fake-agent" || b.Refreshed {
		t.Fatalf("options %+v", b)
	}
	oa := b.provider(t, "openai")
	if !oa.Current || oa.Probe["status"] != "error" || !strings.Contains(oa.Probe["error"].(string), "404") {
		t.Fatalf("openai row %+v", oa)
	}
	if ids := modelIDs(oa.Models); ids != "openai:fake-agent,openai:other" || oa.Models[0]["default"] != true {
		t.Fatalf("openai models %s", ids)
	}
	if lab := b.provider(t, "lab"); lab.Probe["status"] != "skipped" || len(lab.Models) != 0 || probes.Load() != 0 {
		t.Fatalf("a saved custom provider was probed on open: %+v (%d probes)", lab, probes.Load())
	}
	if r := b.provider(t, "replay"); r.Probe["status"] != "not_applicable" {
		t.Fatalf("replay %+v", r)
	}

	// refresh=1 probes every saved custom provider; failures stay on their row.
	b = decodeAs[optionsBody](t, tg.do(t, "GET", "/api/model/options?refresh=1", "", nil), 200)
	lab := b.provider(t, "lab")
	if !b.Refreshed || lab.Probe["status"] != "ok" || modelIDs(lab.Models) != "lab:lab-large,lab:lab-small" || lab.Models[0]["source"] != "probe" {
		t.Fatalf("lab after refresh %+v", lab)
	}
	if strings.Contains(lab.BaseURL, "secret") {
		t.Fatalf("base_url leaks credentials: %s", lab.BaseURL)
	}
	if g := b.provider(t, "gone"); g.Probe["status"] != "error" || g.Probe["error"] == "" {
		t.Fatalf("dead provider %+v", g)
	}
	if sl := b.provider(t, "slow"); sl.Probe["status"] != "error" || !strings.Contains(sl.Probe["error"].(string), "no answer within") {
		t.Fatalf("hung provider %+v", sl)
	}
	// The next plain open reuses the cached probe instead of probing again.
	n := probes.Load()
	b = decodeAs[optionsBody](t, tg.do(t, "GET", "/api/model/options", "", nil), 200)
	if lab := b.provider(t, "lab"); lab.Probe["status"] != "ok" || len(lab.Models) != 2 || probes.Load() != n {
		t.Fatalf("cache not used: %+v (%d → %d probes)", lab, n, probes.Load())
	}

	envelope(t, tg.do(t, "GET", "/api/model/options?refresh=yes", "", nil), 400, "invalid_value")
	envelope(t, tg.do(t, "GET", "/api/model/options", "", map[string]string{"Authorization": ""}), 401, "invalid_api_key")
}

func TestModelOptionsFromTheEngine(t *testing.T) {
	tg := newTarget(t, nil) // no Options.Providers: the engine's providers, nothing probed
	b := decodeAs[optionsBody](t, tg.do(t, "GET", "/api/model/options?refresh=true", "", nil), 200)
	oa := b.provider(t, "openai")
	if len(b.Providers) != 1 || oa.Custom || oa.Probe["status"] != "not_applicable" || !strings.HasPrefix(modelIDs(oa.Models), "openai:fake-agent,openai:other,openai:gpt-5.5,") {
		t.Fatalf("options %+v", b)
	}
	// A built-in provider lists its catalogue with limits, capabilities and prices.
	var gpt41 map[string]any
	for _, m := range oa.Models {
		if m["id"] == "openai:gpt-4.1" {
			gpt41 = m
		}
	}
	pr, _ := gpt41["pricing"].(map[string]any)
	caps, _ := gpt41["capabilities"].(map[string]any)
	if gpt41["source"] != "catalog" || gpt41["context_window"] != float64(1047576) || gpt41["max_output"] != float64(32768) ||
		pr["input"] != float64(2) || pr["output"] != float64(8) || pr["cache_read"] != 0.5 || pr["currency"] != "USD" ||
		caps["tools"] != true || caps["vision"] != true || caps["reasoning"] != false {
		t.Fatalf("gpt-4.1 row %v", gpt41)
	}
	if oa.Models[0]["pricing"] != nil || oa.Models[0]["capabilities"] != nil {
		t.Errorf("an uncatalogued model got catalogue data: %v", oa.Models[0])
	}
	if len(tg.fake.Requests()) != 0 {
		t.Fatal("the model endpoint was contacted")
	}
}

func TestHealth(t *testing.T) {
	tg := newTarget(t, func(o *httpapi.Options) {
		o.Status = func(ctx context.Context) map[string]any {
			return map[string]any{"mcp": map[string]any{"servers": 0}, "status": "overridden?"}
		}
	})
	h := decodeAs[map[string]any](t, tg.do(t, "GET", "/health", "", map[string]string{"Authorization": ""}), 200)
	if h["status"] != "ok" || h["platform"] != "hermes-agent" || h["version"] != "test" {
		t.Fatalf("health %v", h)
	}
	envelope(t, tg.do(t, "GET", "/health/detailed", "", map[string]string{"Authorization": ""}), 401, "invalid_api_key")
	d := decodeAs[map[string]any](t, tg.do(t, "GET", "/health/detailed", "", nil), 200)
	for _, k := range []string{"gateway_state", "platforms", "active_agents", "gateway_busy", "gateway_drainable", "exit_reason", "updated_at", "pid", "sessions", "turns"} {
		if _, ok := d[k]; !ok {
			t.Errorf("detailed health lacks %q: %v", k, d)
		}
	}
	if d["status"] != "ok" || d["store"].(map[string]any)["status"] != "ok" || d["mcp"] == nil || d["browser_control"].(map[string]any)["enabled"] != false {
		t.Fatalf("detailed %v", d)
	}
}
