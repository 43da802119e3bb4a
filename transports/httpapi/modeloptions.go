package httpapi

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

	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/engine/model/catalog"
	"github.com/hermes-go/hermes/engine/redact"
)

// ProviderInfo describes one configured model provider for GET /api/model/options.
type ProviderInfo struct {
	Name    string
	Type    string // openai | anthropic | replay
	BaseURL string
	APIKey  string            // sent when probing; never reported
	Headers map[string]string // sent when probing
	Models  []string          // configured model names, without the provider prefix
	// Custom marks a saved custom endpoint whose /models list is probed: the current
	// provider's when the picker opens, every custom provider's on refresh=1.
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

// modelCatalog caches probe results per provider.
type modelCatalog struct {
	mu    sync.Mutex
	cache map[string]probeResult
}

type probeResult struct {
	models []string
	err    string
	at     time.Time
}

func (m *modelCatalog) get(name string) (probeResult, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.cache[name]
	if ok && time.Since(r.at) > probeTTL {
		return r, false
	}
	return r, ok
}

func (m *modelCatalog) put(name string, r probeResult) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cache == nil {
		m.cache = map[string]probeResult{}
	}
	m.cache[name] = r
}

// probe lists the models of an OpenAI-compatible endpoint (GET {base}/models).
func (m *modelCatalog) probe(ctx context.Context, p ProviderInfo) probeResult {
	res := probeResult{at: time.Now()}
	timeout := p.ProbeTimeout
	if timeout <= 0 {
		timeout = probeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(p.BaseURL, "/")+"/models", nil)
	if err != nil {
		res.err = "invalid base_url: " + err.Error()
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
			res.err += ": " + headerSafe(env.Error.Message, 200)
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

// publicURL is a base URL without user info, query or fragment.
func publicURL(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" {
		return ""
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// addCatalogue adds a model's catalogue entry to its picker row: limits, capabilities and
// list prices (USD per million tokens), each only when known.
func addCatalogue(row fiber.Map, m catalog.Model) {
	if m.ContextWindow > 0 {
		row["context_window"] = m.ContextWindow
	}
	if m.MaxOutput > 0 {
		row["max_output"] = m.MaxOutput
	}
	row["capabilities"] = fiber.Map{"tools": m.Tools, "vision": m.Vision, "reasoning": m.Reasoning}
	if p := m.Pricing; p != nil {
		pr := fiber.Map{"currency": "USD", "unit": "1M tokens", "input": p.Input, "output": p.Output}
		if p.CacheRead > 0 {
			pr["cache_read"] = p.CacheRead
		}
		if p.CacheWrite > 0 {
			pr["cache_write"] = p.CacheWrite
		}
		row["pricing"] = pr
	}
}

// providers lists the configured providers, from Options.Providers or else from the engine.
func (s *Server) providers() []ProviderInfo {
	if s.opts.Providers != nil {
		return s.opts.Providers()
	}
	var out []ProviderInfo
	for _, name := range s.eng.Providers() {
		out = append(out, ProviderInfo{Name: name})
	}
	return out
}

// modelOptions is the provider-aware picker inventory. refresh=1 busts the probe cache and
// probes every saved custom provider (concurrently, each bounded by its timeout); otherwise
// only the current provider is probed when it is custom. A failed probe is reported on its
// provider; the request itself succeeds.
func (s *Server) modelOptions(c *fiber.Ctx) error {
	refresh := false
	switch v := c.Query("refresh"); v {
	case "", "0", "false":
	case "1", "true":
		refresh = true
	default:
		return badRequest("refresh", "invalid_value", "refresh must be 1, 0, true or false")
	}
	current, _, _ := s.eng.ResolveModel("")
	curProv, curModel, _ := cutProvider(current)
	provs := s.providers()
	results := make([]probeResult, len(provs))
	probed := make([]bool, len(provs))
	var wg sync.WaitGroup
	for i, p := range provs {
		if !p.Custom || p.BaseURL == "" {
			continue
		}
		if !refresh {
			if r, ok := s.catalog.get(p.Name); ok {
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
			r := s.catalog.probe(s.ctx, p)
			s.catalog.put(p.Name, r)
			results[i] = r
		}()
	}
	wg.Wait()

	advertised := s.models()
	rows := make([]fiber.Map, 0, len(provs))
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
		cat := s.eng.Catalog()
		if !p.Custom { // a saved endpoint serves what its probe lists, not a vendor's catalogue
			for _, m := range cat.Models(p.Name) {
				add(m.ID, "catalog")
			}
		}
		models := make([]fiber.Map, 0, len(names))
		for _, n := range names {
			row := fiber.Map{"id": p.Name + ":" + n, "name": n, "source": source[n], "default": p.Name == curProv && n == curModel}
			if m, ok := cat.Lookup(p.Name, n); ok {
				addCatalogue(row, m)
			}
			models = append(models, row)
		}
		probe := fiber.Map{"status": "skipped"}
		switch {
		case !p.Custom || p.BaseURL == "":
			probe = fiber.Map{"status": "not_applicable"}
		case probed[i] && results[i].err != "":
			probe = fiber.Map{"status": "error", "error": results[i].err, "checked_at": results[i].at.UTC().Format(time.RFC3339)}
		case probed[i]:
			probe = fiber.Map{"status": "ok", "model_count": len(results[i].models), "checked_at": results[i].at.UTC().Format(time.RFC3339)}
		}
		rows = append(rows, fiber.Map{
			"id": p.Name, "name": p.Name, "type": p.Type, "base_url": publicURL(p.BaseURL),
			"custom": p.Custom, "current": p.Name == curProv, "models": models, "probe": probe,
		})
	}
	var cur any
	if current != "" {
		cur = fiber.Map{"id": current, "provider": curProv, "model": curModel}
	}
	return c.JSON(fiber.Map{"object": "hermes.model_options", "current": cur, "default_model": current, "refreshed": refresh, "providers": rows})
}
