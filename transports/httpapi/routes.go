package httpapi

import (
	"slices"

	"github.com/gofiber/fiber/v2"

	"github.com/hermes-go/hermes/transports/httpapi/internal/wire"
)

func (s *Server) routes() {
	s.app.Get("/v1/models", s.listModels)
	s.app.Get("/v1/models/+", s.getModel) // ids contain ':' (provider:model) and may contain '/'
	s.app.Get("/v1/capabilities", s.capabilities)
	s.app.Post("/v1/chat/completions", s.chatCompletions)
	s.app.Post("/v1/responses", s.createResponse)
	s.app.Get("/v1/responses/:id", s.getResponse)
	s.app.Delete("/v1/responses/:id", s.deleteResponse)
	s.app.Post("/v1/runs", s.runs.Create)
	s.app.Get("/v1/runs", s.runs.List)
	s.app.Get("/v1/runs/:id", s.runs.Get)
	s.app.Get("/v1/runs/:id/events", s.runs.Events)
	s.app.Post("/v1/runs/:id/approval", s.runs.Approval)
	s.app.Post("/v1/runs/:id/steer", s.runs.Steer)
	s.app.Post("/v1/runs/:id/stop", s.runs.Stop)
	s.app.Post("/v1/runs/:id/resolve-unknown", s.runs.ResolveUnknown)
	s.app.Get("/api/model/options", s.modelOptions)
	s.sessionRoutes()
	s.browserRoutes()
	s.metricsRoutes()
}

// AgentModel is the model id /v1/models lists first. A request naming it (or naming no model)
// runs on the session's current model: the default for a new session, whatever a /model
// command or an earlier request chose for an existing one.
const AgentModel = "hermes-agent"

// models is the advertised list: AgentModel, the default model, then Options.Models, no
// duplicates.
func (s *Server) models() []string {
	out := []string{AgentModel}
	if m, _, err := s.eng.ResolveModel(""); err == nil {
		out = append(out, m)
	}
	if s.opts.Models != nil {
		for _, m := range s.opts.Models() {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out
}

// pickModel accepts what listedModel accepts, and a provider:model name of a configured
// provider the catalogue does not refuse (catalogueModel); it returns the provider:model
// name the session runs. An empty name and AgentModel return "": keep the session's model (the
// default for a new session).
func (s *Server) pickModel(name string) (string, error) {
	if name == "" || name == AgentModel {
		return "", nil
	}
	if m, ok := s.listedModel(name); ok {
		return m, nil
	}
	if m, ok, err := s.catalogueModel(name); ok {
		return m, err
	}
	return "", modelNotFound(name)
}

func modelNotFound(name string) *wire.Error {
	return &wire.Error{Status: fiber.StatusNotFound, Message: "The model '" + name + "' does not exist (see GET /v1/models)", Type: "invalid_request_error", Param: "model", Code: "model_not_found"}
}

// listedModel returns the listed id name stands for: the id itself, the bare model part of
// one ("gpt-4.1" for "openai:gpt-4.1"), or a catalogue alias of one, qualified or bare
// ("claude-sonnet-4" for a listed "anthropic:claude-sonnet-4-0", as /model resolves it).
// GET /v1/models/{id} and the model field of a request both answer with it, so they agree
// with the listing.
func (s *Server) listedModel(name string) (string, bool) {
	listed := s.models()
	if slices.Contains(listed, name) {
		return name, true
	}
	var provs []string
	for _, m := range listed {
		p, bare, ok := cutProvider(m)
		if !ok {
			continue
		}
		if bare == name {
			return m, true
		}
		if !slices.Contains(provs, p) {
			provs = append(provs, p)
		}
	}
	candidates := []string{name}
	if _, _, qualified := cutProvider(name); !qualified {
		candidates = candidates[:0]
		for _, p := range provs {
			candidates = append(candidates, p+":"+name)
		}
	}
	for _, c := range candidates {
		if canon, _, err := s.eng.ResolveModel(c); err == nil && slices.Contains(listed, canon) {
			return canon, true
		}
	}
	return "", false
}

func cutProvider(m string) (provider, bare string, ok bool) {
	for i := 0; i < len(m); i++ {
		if m[i] == ':' {
			return m[:i], m[i+1:], true
		}
	}
	return "", m, false
}

func modelObject(id string, created int64) fiber.Map {
	owner := "hermes"
	if p, _, ok := cutProvider(id); ok {
		owner = p
	}
	return fiber.Map{"id": id, "object": "model", "created": created, "owned_by": owner}
}

func (s *Server) listModels(c *fiber.Ctx) error {
	created := s.start.Unix()
	data := []fiber.Map{}
	for _, m := range s.models() {
		data = append(data, modelObject(m, created))
	}
	return c.JSON(fiber.Map{"object": "list", "data": data})
}

func (s *Server) getModel(c *fiber.Ctx) error {
	id := c.Params("+")
	m, ok := s.listedModel(id)
	if !ok {
		return modelNotFound(id)
	}
	return c.JSON(modelObject(m, s.start.Unix()))
}

// capabilities lists only what this server serves; clients treat absent features as false.
// turnCap is the concurrency cap on agent turns, nil when there is none.
func (s *Server) turnCap() any {
	if s.slots == nil {
		return nil
	}
	return cap(s.slots)
}

func (s *Server) capabilities(c *fiber.Ctx) error {
	ep := func(method, path string) fiber.Map { return fiber.Map{"method": method, "path": path} }
	def, _, _ := s.eng.ResolveModel("")
	body := fiber.Map{
		"object":   "hermes.api_server.capabilities",
		"platform": platform,
		"version":  s.opts.Version,
		"model":    def,
		"auth":     fiber.Map{"type": "bearer", "required": true},
		"limits":   fiber.Map{"max_concurrent_turns": s.turnCap()},
		"runtime":  fiber.Map{"mode": "server_agent", "tool_execution": "server", "split_runtime": false, "description": "the agent runs its tools on the server; approvals a policy leaves open are denied on chat completions and responses, and wait for POST /v1/runs/{run_id}/approval on runs"},
		"features": fiber.Map{
			"chat_completions": true, "chat_completions_streaming": true,
			"responses_api": true, "responses_streaming": true,
			"run_submission": true, "run_status": true, "run_events_sse": true, "run_stop": true, "run_steer": true,
			"run_approval_response": true, "tool_progress_events": true, "approval_events": true,
			// Chat-completion streams carry hermes.tool.progress events only when the request
			// sends this header with "true".
			"tool_progress_header":   HeaderToolProgress,
			"models_agent_alias":     AgentModel,
			"turn_idempotency":       fiber.Map{"supported": true, "durable": true, "retention_seconds": int(idempotencyRetention.Seconds()), "endpoints": []string{"/v1/chat/completions", "/v1/responses"}},
			"failed_turn_replay":     fiber.Map{"status": fiber.StatusConflict, "code": "turn_failed", "window_seconds": int(replayWindow.Seconds())},
			"run_unknown_resolution": true, "run_durable_admission": true, "run_idempotency": fiber.Map{"supported": true, "durable": true, "retention_seconds": int(idempotencyRetention.Seconds())},
			"session_resources": true, "session_chat": true, "session_chat_streaming": true, "session_fork": true,
			"model_options":             true,
			"browser_control":           s.browser != nil,
			"session_continuity_header": HeaderSessionID,
			"session_key_header":        HeaderSessionKey,
			"cors":                      len(s.cors) > 0,
			"websocket_gateway":         true,
		},
		"endpoints": fiber.Map{
			"health":              ep("GET", "/health"),
			"health_detailed":     ep("GET", "/health/detailed"),
			"models":              ep("GET", "/v1/models"),
			"capabilities":        ep("GET", "/v1/capabilities"),
			"chat_completions":    ep("POST", "/v1/chat/completions"),
			"responses":           ep("POST", "/v1/responses"),
			"response":            ep("GET", "/v1/responses/{response_id}"),
			"response_delete":     ep("DELETE", "/v1/responses/{response_id}"),
			"runs":                ep("POST", "/v1/runs"),
			"runs_list":           ep("GET", "/v1/runs"),
			"run_status":          ep("GET", "/v1/runs/{run_id}"),
			"run_events":          ep("GET", "/v1/runs/{run_id}/events"),
			"run_approval":        ep("POST", "/v1/runs/{run_id}/approval"),
			"run_steer":           ep("POST", "/v1/runs/{run_id}/steer"),
			"run_stop":            ep("POST", "/v1/runs/{run_id}/stop"),
			"run_resolve":         ep("POST", "/v1/runs/{run_id}/resolve-unknown"),
			"websocket":           ep("GET", "/api/ws"),
			"model_options":       ep("GET", "/api/model/options"),
			"sessions":            ep("GET", "/api/sessions"),
			"session_create":      ep("POST", "/api/sessions"),
			"session":             ep("GET", "/api/sessions/{session_id}"),
			"session_update":      ep("PATCH", "/api/sessions/{session_id}"),
			"session_delete":      ep("DELETE", "/api/sessions/{session_id}"),
			"session_messages":    ep("GET", "/api/sessions/{session_id}/messages"),
			"session_fork":        ep("POST", "/api/sessions/{session_id}/fork"),
			"session_chat":        ep("POST", "/api/sessions/{session_id}/chat"),
			"session_chat_stream": ep("POST", "/api/sessions/{session_id}/chat/stream"),
		},
	}
	if s.browser != nil {
		endpoints := body["endpoints"].(fiber.Map)
		endpoints["browser_control_register"] = ep("POST", "/v1/browser-control/register")
		endpoints["browser_control_ws"] = ep("GET", "/v1/browser-control/ws")
		body["browser_control"] = fiber.Map{"capabilities": s.browser.b.Capabilities(), "timeout_ms": s.browser.b.Timeout().Milliseconds()}
	}
	return c.JSON(body)
}
