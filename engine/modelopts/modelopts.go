// Package modelopts builds the provider-aware model picker inventory that GET /api/model/options
// (HTTP API) and model.options (TUI gateway) both answer with: one row per configured provider
// with its models (from configuration, the model catalogue and, for saved custom endpoints, a
// probe of their /models list), each catalogued model with its limits, capabilities and prices.
// Opening the picker probes only the current provider when it is a custom endpoint; a refresh
// probes every saved custom endpoint concurrently, each bounded by its timeout, and refills a
// five-minute cache. A probe that fails is reported on its row; the inventory never fails.
package modelopts

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model/catalog"
	"github.com/hermes-go/hermes/engine/redact"
)

// Provider describes one configured model provider.
type Provider struct {
	Name    string
	Type    string // openai | anthropic | replay
	BaseURL string
	APIKey  string            // sent when probing; never reported
	Headers map[string]string // sent when probing
	Models  []string          // configured model names, without the provider prefix
	// Custom marks a saved custom endpoint whose /models list is probed: the current
	// provider's when the picker opens, every custom provider's on refresh.
	Custom bool
	// ProbeTimeout bounds one probe (default 5s): an offline endpoint must not stall the
	// picker.
	ProbeTimeout time.Duration
}

// Probe policy: a probe that takes longer than its timeout is reported as failed, and a
// result is reused for probeTTL.
const (
	probeTimeout = 5 * time.Second
	probeTTL     = 5 * time.Minute
	probeMaxBody = 4 << 20
)

// Cache holds probe results per provider. The zero value is ready; it is safe for concurrent
// use.
type Cache struct {
	mu    sync.Mutex
	cache map[string]probeResult
}

type probeResult struct {
	models []string
	err    string
	at     time.Time
}

func (m *Cache) get(name string) (probeResult, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.cache[name]
	if ok && time.Since(r.at) > probeTTL {
		return r, false
	}
	return r, ok
}

func (m *Cache) put(name string, r probeResult) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cache == nil {
		m.cache = map[string]probeResult{}
	}
	m.cache[name] = r
}

// probe lists the models of an OpenAI-compatible endpoint (GET {base}/models).
func probe(ctx context.Context, p Provider) probeResult {
	res := probeResult{at: time.Now()}
	timeout := p.ProbeTimeout
	if timeout <= 0 {
		timeout = probeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(p.BaseURL, "/")+"/models", nil)
	if err != nil {
		res.err = "invalid base_url: " + redact.String(err.Error())
		return res
	}
	for k, v := range p.Headers {
		req.Header.Set(k, v)
	}
	if p.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+p.APIKey)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			res.err = fmt.Sprintf("no answer within %s", timeout)
		} else {
			res.err = redact.String(err.Error()) // the URL may carry user info or a key
		}
		return res
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, probeMaxBody))
	if err != nil {
		res.err = "reading the model list: " + err.Error()
		return res
	}
	if resp.StatusCode != http.StatusOK {
		res.err = fmt.Sprintf("GET /models answered HTTP %d", resp.StatusCode)
		var env struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(body, &env) == nil && env.Error.Message != "" {
			res.err += ": " + clip(env.Error.Message, 200)
		}
		return res
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		res.err = "GET /models did not return a model list: " + err.Error()
		return res
	}
	for _, d := range list.Data {
		if d.ID != "" && !slices.Contains(res.models, d.ID) {
			res.models = append(res.models, d.ID)
		}
	}
	slices.Sort(res.models)
	return res
}

// clip cuts s to n bytes and drops control characters.
func clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
	if len(s) > n {
		s = s[:n]
	}
	return redact.String(s)
}

// publicURL is a base URL without user info, query or fragment.
func publicURL(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" {
		return ""
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// cutProvider splits "provider:model".
func cutProvider(m string) (provider, bare string, ok bool) {
	provider, bare, ok = strings.Cut(m, ":")
	if !ok {
		return "", m, false
	}
	return provider, bare, true
}

// Build is the inventory: providers as configured, advertised the provider:model names the
// surface lists, refresh whether to bust the probe cache and probe every custom provider.
// Probes run concurrently under ctx, each bounded by its timeout.
func Build(ctx context.Context, eng *engine.Engine, cache *Cache, provs []Provider, advertised []string, refresh bool) map[string]any {
	current, _, _ := eng.ResolveModel("")
	curProv, curModel, _ := cutProvider(current)
	results := make([]probeResult, len(provs))
	probed := make([]bool, len(provs))
	var wg sync.WaitGroup
	for i, p := range provs {
		if !p.Custom || p.BaseURL == "" {
			continue
		}
		if !refresh {
			if r, ok := cache.get(p.Name); ok {
				results[i], probed[i] = r, true
				continue
			}
			if p.Name != curProv {
				continue
			}
		}
		probed[i] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := probe(ctx, p)
			cache.put(p.Name, r)
			results[i] = r
		}()
	}
	wg.Wait()

	cat := eng.Catalog()
	rows := make([]map[string]any, 0, len(provs))
	for i, p := range provs {
		var names []string
		source := map[string]string{}
		add := func(n, src string) {
			if n != "" && !slices.Contains(names, n) {
				names = append(names, n)
				source[n] = src
			}
		}
		for _, n := range p.Models {
			add(n, "config")
		}
		for _, m := range advertised {
			if pr, bare, ok := cutProvider(m); ok && pr == p.Name {
				add(bare, "config")
			}
		}
		for _, n := range results[i].models {
			add(n, "probe")
		}
		if p.Name == curProv {
			add(curModel, "default")
		}
		if !p.Custom { // a saved endpoint serves what its probe lists, not a vendor's catalogue
			for _, m := range cat.Models(p.Name) {
				add(m.ID, "catalog")
			}
		}
		models := make([]map[string]any, 0, len(names))
		for _, n := range names {
			row := map[string]any{"id": p.Name + ":" + n, "name": n, "source": source[n], "default": p.Name == curProv && n == curModel}
			if m, ok := cat.Lookup(p.Name, n); ok {
				addCatalogue(row, m)
			}
			models = append(models, row)
		}
		probeRow := map[string]any{"status": "skipped"}
		switch {
		case !p.Custom || p.BaseURL == "":
			probeRow = map[string]any{"status": "not_applicable"}
		case probed[i] && results[i].err != "":
			probeRow = map[string]any{"status": "error", "error": results[i].err, "checked_at": results[i].at.UTC().Format(time.RFC3339)}
		case probed[i]:
			probeRow = map[string]any{"status": "ok", "model_count": len(results[i].models), "checked_at": results[i].at.UTC().Format(time.RFC3339)}
		}
		rows = append(rows, map[string]any{
			"id": p.Name, "name": p.Name, "type": p.Type, "base_url": publicURL(p.BaseURL),
			"custom": p.Custom, "current": p.Name == curProv, "models": models, "probe": probeRow,
		})
	}
	var cur any
	if current != "" {
		cur = map[string]any{"id": current, "provider": curProv, "model": curModel}
	}
	return map[string]any{"object": "hermes.model_options", "current": cur, "default_model": current, "refreshed": refresh, "providers": rows}
}

// addCatalogue adds a model's catalogue entry to its picker row: limits, capabilities and
// list prices (USD per million tokens), each only when known.
func addCatalogue(row map[string]any, m catalog.Model) {
	if m.ContextWindow > 0 {
		row["context_window"] = m.ContextWindow
	}
	if m.MaxOutput > 0 {
		row["max_output"] = m.MaxOutput
	}
	row["capabilities"] = map[string]any{"tools": m.Tools, "vision": m.Vision, "reasoning": m.Reasoning}
	if p := m.Pricing; p != nil {
		pr := map[string]any{"currency": "USD", "unit": "1M tokens", "input": p.Input, "output": p.Output}
		if p.CacheRead > 0 {
			pr["cache_read"] = p.CacheRead
		}
		if p.CacheWrite > 0 {
			pr["cache_write"] = p.CacheWrite
		}
		row["pricing"] = pr
	}
}
