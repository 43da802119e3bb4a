package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/hermes-go/hermes/engine/config"
	"github.com/hermes-go/hermes/engine/model"
)

// anthropicVersion is the API version header the model list is asked with.
const anthropicVersion = "2023-06-01"

// checkModels asks every configured model endpoint for its model list, with its key: is it
// reachable, is the key accepted, does it list the models the configuration uses. A provider
// is checked when the configuration or a model name uses it, or its key is set; the built-in
// providers nobody uses are left alone.
func checkModels(ctx context.Context, rep *doctorReport, cfg *config.Config, o doctorOptions) {
	used := map[string][]string{} // provider → the models the configuration names
	for _, name := range append([]string{cfg.Model}, cfg.FallbackModels...) {
		prov, m := model.ParseName(name)
		if prov == "" {
			continue
		}
		if _, ok := cfg.Providers[prov]; !ok {
			rep.add(doctorCheck{Area: "models", Name: name, Status: statusFail, Detail: "no provider " + prov + " is configured",
				Fix: "add providers." + prov + " to config.yaml, or set HERMES_MODEL (or model:) to provider:model with one of " + strings.Join(cfg.ProviderNames(), ", ")})
			continue
		}
		used[prov] = append(used[prov], m)
	}
	var names []string
	for _, name := range cfg.ProviderNames() {
		p := cfg.Providers[name]
		_, isUsed := used[name]
		if !isUsed && config.BuiltinProvider(name) && p.APIKey == "" && len(p.Models) == 0 && len(p.Headers) == 0 {
			continue
		}
		names = append(names, name)
	}
	checks := make([]doctorCheck, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		_, isUsed := used[name]
		wg.Go(func() { checks[i] = checkProvider(ctx, name, cfg.Providers[name], used[name], isUsed, o) })
	}
	wg.Wait()
	for _, c := range checks {
		rep.add(c)
	}
}

// checkProvider asks one provider's endpoint for its models: GET {base_url}/models with a
// bearer key (OpenAI-compatible), GET {base_url}/v1/models with x-api-key and
// anthropic-version (Anthropic).
func checkProvider(ctx context.Context, name string, p config.Provider, models []string, used bool, o doctorOptions) doctorCheck {
	c := doctorCheck{Area: "models", Name: name, Status: statusOK}
	keyWhere := "providers." + name + ".api_key in config.yaml"
	if p.KeyEnv != "" {
		keyWhere = p.KeyEnv
	}
	if p.Type == "replay" {
		c.Detail = "replays cassettes; no endpoint to check"
		return c
	}
	if p.APIKey == "" && p.KeyEnv != "" {
		c.Status, c.Detail = statusWarn, "no key"
		if used {
			c.Status, c.Detail = statusFail, "no key, and "+name+":"+strings.Join(models, ", ")+" is configured"
		}
		c.Fix = "set " + keyWhere + " (in the environment or $HERMES_HOME/.env)"
		return c
	}
	url := strings.TrimRight(p.BaseURL, "/") + "/models"
	if p.Type == "anthropic" {
		url = strings.TrimRight(p.BaseURL, "/") + "/v1/models?limit=1000"
	}
	c.Name = name + " " + strings.TrimSuffix(url, "?limit=1000")
	rctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		c.Status, c.Detail, c.Fix = statusFail, err.Error(), "fix providers."+name+".base_url"
		return c
	}
	for k, v := range p.Headers {
		req.Header.Set(k, v)
	}
	if p.APIKey != "" {
		if p.Type == "anthropic" {
			req.Header.Set("X-Api-Key", p.APIKey)
		} else {
			req.Header.Set("Authorization", "Bearer "+p.APIKey)
		}
	}
	if p.Type == "anthropic" {
		req.Header.Set("Anthropic-Version", anthropicVersion)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.Status, c.Detail = statusFail, "unreachable: "+err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			c.Detail = fmt.Sprintf("no answer within %s", o.timeout)
		}
		c.Fix = "check that the server runs and that providers." + name + ".base_url is right"
		if name == "openai" || name == "anthropic" {
			c.Fix += " (or " + strings.ToUpper(name) + "_BASE_URL)"
		}
		return c
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	switch code := resp.StatusCode; {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		c.Status, c.Detail = statusFail, fmt.Sprintf("key refused (HTTP %d)%s", code, apiMessage(body))
		c.Fix = "set " + keyWhere + " to a valid key"
		if p.APIKey == "" {
			c.Detail = fmt.Sprintf("needs a key (HTTP %d)%s", code, apiMessage(body))
			c.Fix = "set " + keyWhere + " (and api_key_env to the variable holding it)"
		}
		return c
	case code == http.StatusNotFound || code == http.StatusMethodNotAllowed:
		c.Status, c.Detail = statusWarn, fmt.Sprintf("reachable, but it does not list models (HTTP %d): key and models not checked", code)
		c.Fix = "check providers." + name + ".base_url (an OpenAI-compatible one ends in /v1)"
		return c
	case code >= 500:
		c.Status, c.Detail, c.Fix = statusFail, fmt.Sprintf("HTTP %d%s", code, apiMessage(body)), "the endpoint is failing: try again later, or look at its server"
		return c
	case code < 200 || code > 299:
		c.Status, c.Detail, c.Fix = statusWarn, fmt.Sprintf("HTTP %d%s", code, apiMessage(body)), "check providers."+name+" in config.yaml"
		return c
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
		HasMore bool `json:"has_more"`
	}
	if err := json.Unmarshal(body, &list); err != nil || len(list.Data) == 0 {
		c.Detail = "reachable, key accepted (no model list to check against)"
		return c
	}
	listed := make([]string, len(list.Data))
	for i, m := range list.Data {
		listed[i] = m.ID
	}
	c.Detail = fmt.Sprintf("reachable, key accepted, %d models listed", len(listed))
	if list.HasMore {
		return c
	}
	var missing []string
	for _, m := range models {
		// An alias (claude-sonnet-4-5) is listed under its dated ids (claude-sonnet-4-5-20250929).
		if !slices.ContainsFunc(listed, func(id string) bool { return id == m || strings.HasPrefix(id, m+"-") }) {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		c.Status = statusWarn
		c.Detail += "; not among them: " + strings.Join(missing, ", ")
		c.Fix = "set HERMES_MODEL (or model:/fallback_models: in config.yaml) to a listed model, e.g. " + name + ":" + listed[0]
	}
	return c
}

// apiMessage is ": <message>" of an API error body (OpenAI's and Anthropic's both carry
// error.message), cut short; "" when there is none.
func apiMessage(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error.Message == "" {
		return ""
	}
	m := e.Error.Message
	if len(m) > 200 {
		m = m[:200] + "…"
	}
	return ": " + m
}
