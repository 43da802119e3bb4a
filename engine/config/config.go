// Package config loads Hermes configuration: $HERMES_HOME/config.yaml, then the environment
// overrides that form the public contract (HERMES_HOME, HERMES_MODEL, OPENAI_BASE_URL,
// OPENAI_API_KEY, ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY, HERMES_API_KEY / API_SERVER_KEY, HERMES_POLICY, HERMES_MAX_ITERATIONS,
// HERMES_SESSION_IDLE_RELEASE, HERMES_STORE).
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hermes-go/hermes/engine/model/catalog"
	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/engine/redact"
)

// Provider configures one model provider.
type Provider struct {
	// Type is openai (any OpenAI-compatible Chat Completions endpoint), anthropic (the
	// Messages API, on Anthropic's SDK) or replay (cassettes).
	Type    string            `yaml:"type"`
	BaseURL string            `yaml:"base_url,omitempty"`
	APIKey  string            `yaml:"api_key,omitempty"`
	KeyEnv  string            `yaml:"api_key_env,omitempty"` // read the key from this variable
	Headers map[string]string `yaml:"headers,omitempty"`
	Models  []string          `yaml:"models,omitempty"` // known model names, for offline checks
	// Dir is where replay cassettes are looked up for relative names.
	Dir string `yaml:"dir,omitempty"`
	// MaxRetries is the number of retries after the first attempt of a call that failed
	// retryably (429, 5xx, overloaded) before any of its answer arrived: 0 means the default
	// (2), a negative value none.
	MaxRetries int `yaml:"max_retries,omitempty"`
	// MaxTokens is the output limit sent when a request sets none (anthropic; default 8192).
	MaxTokens int `yaml:"max_tokens,omitempty"`
	// ThinkingBudget enables extended thinking with this many budget tokens (anthropic; at
	// least 1024; 0 leaves it off).
	ThinkingBudget int `yaml:"thinking_budget,omitempty"`
	// Families, Aggregator and Catalog override the model catalogue for this provider (see
	// engine/model/catalog): the model families it owns, whether it serves other vendors'
	// models, and model entries (limits, capabilities, prices) replacing or adding to the
	// embedded ones by id.
	Families   []string        `yaml:"families,omitempty"`
	Aggregator bool            `yaml:"aggregator,omitempty"`
	Catalog    []catalog.Model `yaml:"catalog,omitempty"`
}

// Config is the whole configuration.
type Config struct {
	Home      string              `yaml:"-"`
	Path      string              `yaml:"-"` // the config file read ("" when none)
	Model     string              `yaml:"model"`
	Providers map[string]Provider `yaml:"providers"`
	// FallbackModels are tried in order when a call to the session's model fails retryably
	// (after its provider's retries) before any of its answer arrived.
	FallbackModels []string `yaml:"fallback_models,omitempty"`
	MaxIterations  int      `yaml:"max_iterations"`
	BusyInputMode  string   `yaml:"busy_input_mode"`
	// Display holds the reference's display settings; display.busy_input_mode is read as
	// busy_input_mode.
	Display      Display    `yaml:"display,omitempty"`
	SystemPrompt string     `yaml:"system_prompt,omitempty"`
	Cwd          string     `yaml:"cwd,omitempty"`
	Policy       string     `yaml:"policy,omitempty"` // policy script path
	Approvals    Approvals  `yaml:"approvals"`
	Delegation   Delegation `yaml:"delegation"`
	Files        Files      `yaml:"files"`
	Server       Server     `yaml:"server"`
	Store        Store      `yaml:"store"`
	Scripts      Scripts    `yaml:"scripts"`
	MCP          MCP        `yaml:"mcp,omitempty"`
	Tools        Tools      `yaml:"tools,omitempty"`
	// BrowserControl is off unless enabled here or by HERMES_BROWSER_CONTROL=1.
	BrowserControl BrowserControl `yaml:"browser_control"`
	// Compression configures automatic compaction of long sessions (the reference's section).
	Compression Compression `yaml:"compression,omitempty"`
	// Telemetry configures traces beyond the OTEL_* environment (README "Observability").
	Telemetry Telemetry `yaml:"telemetry,omitempty"`
}

// Compression configures context accounting and automatic compaction. A model's window comes
// from the catalogue (a provider's catalog entries set context_window per model); a model no
// catalogue knows has ContextWindow.
type Compression struct {
	// Enabled turns automatic compaction before the threshold on (default) or off; a request
	// the provider refuses as too long is compacted and retried either way.
	Enabled *bool `yaml:"enabled,omitempty"`
	// Threshold is the fraction of the window a request may reach before the turn compacts:
	// above 0, at most 1; 0 means the default (0.5).
	Threshold float64 `yaml:"threshold,omitempty"`
	// ContextWindow is the window, in tokens, of a model no catalogue knows (default 128000).
	ContextWindow int `yaml:"context_window,omitempty"`
}

// CompactThreshold is the engine's setting: the threshold, or -1 when automatic compaction is off.
func (c Compression) CompactThreshold() float64 {
	if c.Enabled != nil && !*c.Enabled {
		return -1
	}
	return c.Threshold
}

// Display is the reference's display section. Only busy_input_mode is read (into
// Config.BusyInputMode); the section exists so a configuration written for the reference loads.
type Display struct {
	BusyInputMode string `yaml:"busy_input_mode,omitempty"`
}

// BrowserControl configures browser control on hermes serve: a browser extension registered
// with an API key carries out the agent's browser tool calls of the turns that key started,
// limited to Capabilities.
type BrowserControl struct {
	Enabled      bool     `yaml:"enabled"`
	Capabilities []string `yaml:"capabilities,omitempty"` // allowed actions; empty means all
	Timeout      Duration `yaml:"timeout,omitempty"`      // per action; default 30s
}

// Tools configures the processes tools start (terminal commands, background processes, MCP
// stdio servers). They get an allow-listed environment (paths, user, locale: see
// engine/tool/toolenv), never Hermes' own API keys or the providers' keys.
type Tools struct {
	// EnvPassthrough names further variables tool processes get: an exact name (GH_TOKEN) or a
	// pattern ending in * (AWS_*, or * for everything). A pattern never passes Hermes' keys or
	// a provider's key variable (SecretEnv); name one exactly to pass it.
	EnvPassthrough []string `yaml:"env_passthrough,omitempty"`
	// OutputBudget is the most bytes of one tool result the model sees (default 50000); a
	// longer result reaches it cut, with a marker naming the read_tool_output tool, and is
	// stored whole. OutputBudgets sets it per tool name.
	OutputBudget  int            `yaml:"output_budget,omitempty"`
	OutputBudgets map[string]int `yaml:"output_budgets,omitempty"`
}

// MCP configures Model Context Protocol servers whose tools are offered to the model as
// "server__tool".
type MCP struct {
	Servers map[string]MCPServer `yaml:"servers,omitempty"`
}

// MCPServer is one MCP server: a stdio child (command, args, env) or a streamable HTTP
// endpoint (url, headers). Exactly one of command and url is set.
type MCPServer struct {
	Command string            `yaml:"command,omitempty"`
	Args    []string          `yaml:"args,omitempty"`
	Env     map[string]string `yaml:"env,omitempty"` // added to the allow-listed environment (Tools)
	URL     string            `yaml:"url,omitempty"`
	Headers map[string]string `yaml:"headers,omitempty"`
	Timeout Duration          `yaml:"timeout,omitempty"` // per call; default 60s
}

// Approvals configures approval requests.
type Approvals struct {
	Timeout Duration `yaml:"timeout"` // default 300s; an unanswered approval is a deny
	// QuestionTimeout bounds how long an editor (ACP) is given to answer a clarify, sudo or
	// secret question before it is withdrawn and the model proceeds without the answer
	// (default 120s).
	QuestionTimeout Duration `yaml:"question_timeout,omitempty"`
}

// Delegation configures sub-agents.
type Delegation struct {
	MaxIterations int `yaml:"max_iterations"` // default 50
	MaxDepth      int `yaml:"max_depth"`      // default 2
	MaxConcurrent int `yaml:"max_concurrent"` // default 3
}

// Files configures file tools.
type Files struct {
	AllowOutsideCwd bool `yaml:"allow_outside_cwd"`
}

// Server configures hermes serve.
type Server struct {
	Addr   string `yaml:"addr"` // default 127.0.0.1:8642
	APIKey string `yaml:"api_key,omitempty"`
	// ExtraKeys are further API keys; each is its own principal, which sees only the
	// sessions, runs, responses and browser controller it created. An entry is a plain key
	// (named by its position, extra_api_keys[0]) or {name, key}.
	ExtraKeys []ExtraKey `yaml:"extra_api_keys,omitempty"`
	// AdminKey is an optional API key that sees and acts on every principal's sessions.
	AdminKey string `yaml:"admin_api_key,omitempty"`
	// MaxConcurrent caps the agent turns `hermes serve` runs at once (chat, responses, runs and
	// session chat together); beyond it a request gets 429 with Retry-After. 0 means the
	// default (10); a negative value removes the cap.
	MaxConcurrent int `yaml:"max_concurrent,omitempty"`
	// SessionIdleRelease is how long a session created through the HTTP API may sit unused
	// before the server lets go of it in memory (it stays stored and is loaded again when next
	// used). 0 means the default (10m); a negative value never releases. The environment
	// variable HERMES_SESSION_IDLE_RELEASE overrides it.
	SessionIdleRelease Duration `yaml:"session_idle_release,omitempty"`
	// MetricsAddr is a second listen address serving only /metrics (also `hermes serve
	// --metrics-addr`); empty serves metrics on the API's address only. MetricsKey, when set,
	// is the bearer key that address asks for; without it the address asks for none, so keep
	// it on loopback or a private network.
	MetricsAddr string `yaml:"metrics_addr,omitempty"`
	MetricsKey  string `yaml:"metrics_key,omitempty"`

	// Connection limits. For each, 0 (or leaving it out) means the default and a negative
	// value switches the limit off.
	//
	// ReadHeaderTimeout bounds how long a connection may take to send a request's headers,
	// including the wait for the first byte of a new connection (default 10s). It closes
	// half-open and slowloris connections; the WebSocket handshake falls under it.
	ReadHeaderTimeout Duration `yaml:"read_header_timeout,omitempty"`
	// ReadTimeout bounds reading a request body after its headers (default 60s).
	ReadTimeout Duration `yaml:"read_timeout,omitempty"`
	// WriteTimeout bounds one write to a client (default 30s): a client that stops reading
	// is cut off, while a stream its client keeps reading is not limited in length.
	WriteTimeout Duration `yaml:"write_timeout,omitempty"`
	// IdleTimeout bounds how long a keep-alive connection waits for its next request
	// (default 60s).
	IdleTimeout Duration `yaml:"idle_timeout,omitempty"`
	// MaxConns caps the open connections (default 16384, and never more than the open-file
	// limit less 1024); over it a connection is answered 503 and closed.
	MaxConns int `yaml:"max_conns,omitempty"`
	// MaxConnsPerIP caps the open connections from one remote address (default 4096).
	// Behind a reverse proxy every connection comes from the proxy: raise it there.
	MaxConnsPerIP int `yaml:"max_conns_per_ip,omitempty"`
	// WSPingInterval is how often /api/ws pings its clients (default 30s); WSPongTimeout is
	// how much longer a client may stay silent before it is closed as dead (default 30s).
	WSPingInterval Duration `yaml:"ws_ping_interval,omitempty"`
	WSPongTimeout  Duration `yaml:"ws_pong_timeout,omitempty"`
	// UI serves the dashboard at /ui (also `hermes serve --ui`); off by default.
	UI bool `yaml:"ui,omitempty"`
}

// ExtraKey is one entry of server.extra_api_keys.
type ExtraKey struct {
	Name string `yaml:"name,omitempty"`
	Key  string `yaml:"key"`
}

// UnmarshalYAML accepts a plain string (the key) or a {name, key} mapping.
func (k *ExtraKey) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*k = ExtraKey{Key: n.Value}
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: an extra API key is a string or {name, key}", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch f, v := n.Content[i], n.Content[i+1]; f.Value {
		case "name":
			k.Name = v.Value
		case "key":
			k.Key = v.Value
		default:
			return fmt.Errorf("line %d: field %s not found in an extra API key (name, key)", f.Line, f.Value)
		}
	}
	if k.Key == "" {
		return fmt.Errorf("line %d: an extra API key mapping needs key", n.Line)
	}
	return nil
}

// Store configures the session store.
type Store struct {
	Dir        string `yaml:"dir,omitempty"` // default $HERMES_HOME/state
	SyncWrites *bool  `yaml:"sync_writes,omitempty"`
	// URL selects a shared store instead of the directory: postgres://… (or postgresql://…)
	// is the PostgreSQL store. The environment variable HERMES_STORE overrides it.
	URL string `yaml:"url,omitempty"`
}

// Scripts configures the script sandbox: capabilities granted to policy and run scripts, and
// the limits of one policy hook call.
type Scripts struct {
	// Grants: "fs" (the working directory), "fs:DIR", "http:HOST" or "http:HOST:PORT".
	Grants []string `yaml:"grants,omitempty"`
	// HookTimeout is the deadline of one policy hook call (default 250ms).
	HookTimeout Duration `yaml:"hook_timeout"`
	// MemoryMB is how far the heap may grow during one hook call, in MiB (default 128;
	// negative disables the check).
	MemoryMB int `yaml:"memory_mb"`
	// Workers is the number of policy VMs (default: one per CPU, at most 8).
	Workers int `yaml:"workers,omitempty"`
}

// Duration is a time.Duration that reads "30s" or a number of seconds.
type Duration time.Duration

// UnmarshalYAML accepts "90s", "5m" or a bare number of seconds.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = v
	return nil
}

// parseDuration reads "90s", "5m" or a bare number of seconds.
func parseDuration(s string) (Duration, error) {
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		// NaN, ±Inf and values past ~292 years have no Duration; they are mistakes.
		if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > math.MaxInt64/float64(time.Second) {
			return 0, fmt.Errorf("%q is not a duration (e.g. 90s, 5m)", s)
		}
		return Duration(v * float64(time.Second)), nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (e.g. 90s, 5m)", s)
	}
	return Duration(v), nil
}

// MarshalYAML writes the duration as text.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// DefaultHome is ~/.hermes.
func DefaultHome() string {
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".hermes")
	}
	return ".hermes"
}

// defaultContextWindow is the engine's window for a model no catalogue knows
// (engine.DefaultContextWindow; this package does not import the engine).
const defaultContextWindow = 128000

// Builtin providers, available without configuration.
func builtinProviders() map[string]Provider {
	return map[string]Provider{
		"openai":     {Type: "openai", BaseURL: "https://api.openai.com/v1", KeyEnv: "OPENAI_API_KEY"},
		"anthropic":  {Type: "anthropic", BaseURL: "https://api.anthropic.com", KeyEnv: "ANTHROPIC_API_KEY"},
		"openrouter": {Type: "openai", BaseURL: "https://openrouter.ai/api/v1", KeyEnv: "OPENROUTER_API_KEY"},
		"ollama":     {Type: "openai", BaseURL: "http://127.0.0.1:11434/v1"},
		"vllm":       {Type: "openai", BaseURL: "http://127.0.0.1:8000/v1", KeyEnv: "VLLM_API_KEY"},
		"llamacpp":   {Type: "openai", BaseURL: "http://127.0.0.1:8080/v1"},
		"replay":     {Type: "replay"},
	}
}

// MissingKey names the variable to set when provider name cannot be called for want of a key:
// a built-in hosted provider (its default https endpoint) with no key and no auth header. ""
// when it has one, or may need none (a local server, a base URL of the user's own).
func MissingKey(name string, p Provider) string {
	b, ok := builtinProviders()[name]
	if !ok || p.APIKey != "" || b.KeyEnv == "" || !strings.HasPrefix(b.BaseURL, "https://") ||
		strings.TrimRight(p.BaseURL, "/") != strings.TrimRight(b.BaseURL, "/") {
		return ""
	}
	for h := range p.Headers {
		if strings.EqualFold(h, "Authorization") || strings.EqualFold(h, "X-Api-Key") {
			return ""
		}
	}
	return b.KeyEnv
}

// BuiltinProvider reports whether name is a provider available without configuration; any
// other provider is a saved custom endpoint.
func BuiltinProvider(name string) bool {
	_, ok := builtinProviders()[name]
	return ok
}

// Load reads $HERMES_HOME/config.yaml (absent is fine) and applies the environment. getenv is
// os.Getenv in production; tests pass their own. The secrets it finds (Secrets) are registered
// with engine/redact, so no log line or error message of this process prints them.
func Load(getenv func(string) string) (*Config, error) {
	home := getenv("HERMES_HOME")
	if home == "" {
		home = DefaultHome()
	}
	c := &Config{Home: home}
	path := filepath.Join(home, "config.yaml")
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("config %s: %w", path, readableYAMLError(err))
		}
		c.Path = path
		switch d := c.Display.BusyInputMode; {
		case d == "" || d == c.BusyInputMode:
		case c.BusyInputMode == "":
			c.BusyInputMode = d
		default:
			return nil, fmt.Errorf("config %s: busy_input_mode %q and display.busy_input_mode %q disagree (set one)", path, c.BusyInputMode, d)
		}
	case errors.Is(err, os.ErrNotExist):
	default:
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	c.Home = home
	merged := builtinProviders()
	for name, p := range c.Providers {
		if b, ok := merged[name]; ok && p.Type == "" {
			p.Type = b.Type // a built-in provider keeps its wire unless the type says otherwise
		}
		if p.Type == "" {
			p.Type = "openai"
		}
		if p.Type != "openai" && p.Type != "anthropic" && p.Type != "replay" {
			return nil, fmt.Errorf("config %s: provider %q: unknown type %q (want openai, anthropic or replay)", path, name, p.Type)
		}
		if b, ok := merged[name]; ok && p.BaseURL == "" {
			p.BaseURL = b.BaseURL
		}
		if b, ok := merged[name]; ok && p.KeyEnv == "" {
			p.KeyEnv = b.KeyEnv
		}
		merged[name] = p
	}
	c.Providers = merged
	for name, m := range c.MCP.Servers {
		if (m.Command == "") == (m.URL == "") {
			return nil, fmt.Errorf("config %s: mcp server %q: set exactly one of command and url", path, name)
		}
	}
	if v := getenv("HERMES_MODEL"); v != "" {
		c.Model = v
	}
	if c.Model == "" {
		c.Model = "openai:gpt-4.1"
	}
	op := c.Providers["openai"]
	if v := getenv("OPENAI_BASE_URL"); v != "" {
		op.BaseURL = v
	}
	if v := getenv("OPENAI_API_KEY"); v != "" {
		op.APIKey = v
	}
	c.Providers["openai"] = op
	if v := getenv("ANTHROPIC_BASE_URL"); v != "" {
		ap := c.Providers["anthropic"]
		ap.BaseURL = v
		c.Providers["anthropic"] = ap
	}
	for name, p := range c.Providers {
		if p.APIKey == "" && p.KeyEnv != "" {
			p.APIKey = getenv(p.KeyEnv)
			c.Providers[name] = p
		}
	}
	if v := getenv("HERMES_API_KEY"); v != "" {
		c.Server.APIKey = v
	} else if v := getenv("API_SERVER_KEY"); v != "" {
		c.Server.APIKey = v
	}
	switch v := getenv("HERMES_BROWSER_CONTROL"); v {
	case "":
	case "1", "true", "yes":
		c.BrowserControl.Enabled = true
	case "0", "false", "no":
		c.BrowserControl.Enabled = false
	default:
		return nil, fmt.Errorf("HERMES_BROWSER_CONTROL=%q: want 1 or 0", v)
	}
	if v := getenv("HERMES_POLICY"); v != "" {
		c.Policy = v
	}
	if v := getenv("HERMES_MAX_ITERATIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("HERMES_MAX_ITERATIONS=%q: want a positive integer", v)
		}
		c.MaxIterations = n
	}
	if v := getenv("HERMES_SESSION_IDLE_RELEASE"); v != "" {
		d, err := parseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("HERMES_SESSION_IDLE_RELEASE: %w", err)
		}
		c.Server.SessionIdleRelease = d
	}
	if c.MaxIterations == 0 {
		c.MaxIterations = 90
	}
	// The engine's defaults, filled here so config show prints what runs.
	c.BusyInputMode = policy.NormalizeBusyMode(c.BusyInputMode)
	if c.Delegation.MaxIterations == 0 {
		c.Delegation.MaxIterations = 50
	}
	if c.Delegation.MaxDepth == 0 {
		c.Delegation.MaxDepth = 2
	}
	if c.Delegation.MaxConcurrent == 0 {
		c.Delegation.MaxConcurrent = 3
	}
	if t := c.Compression.Threshold; t < 0 || t > 1 {
		return nil, fmt.Errorf("compression.threshold %v: want a fraction of the context window above 0 and at most 1", t)
	}
	if c.Compression.ContextWindow < 0 {
		return nil, fmt.Errorf("compression.context_window %d: want a positive number of tokens", c.Compression.ContextWindow)
	}
	if c.Compression.Enabled == nil {
		on := true
		c.Compression.Enabled = &on
	}
	if c.Compression.Threshold == 0 {
		c.Compression.Threshold = policy.DefaultCompactThreshold
	}
	if c.Compression.ContextWindow == 0 {
		c.Compression.ContextWindow = defaultContextWindow
	}
	if c.Tools.OutputBudget < 0 {
		return nil, fmt.Errorf("tools.output_budget %d: want a positive number of bytes", c.Tools.OutputBudget)
	}
	for name, b := range c.Tools.OutputBudgets {
		if b <= 0 {
			return nil, fmt.Errorf("tools.output_budgets.%s %d: want a positive number of bytes", name, b)
		}
	}
	if c.Server.Addr == "" {
		c.Server.Addr = "127.0.0.1:8642"
	}
	if c.Store.Dir == "" {
		c.Store.Dir = filepath.Join(home, "state")
	}
	if v := getenv("HERMES_STORE"); v != "" {
		c.Store.URL = v
	}
	if c.Approvals.Timeout == 0 {
		c.Approvals.Timeout = Duration(300 * time.Second)
	}
	if c.Approvals.QuestionTimeout == 0 {
		c.Approvals.QuestionTimeout = Duration(120 * time.Second)
	}
	if c.Scripts.HookTimeout == 0 {
		c.Scripts.HookTimeout = Duration(250 * time.Millisecond)
	}
	if c.Scripts.MemoryMB == 0 {
		c.Scripts.MemoryMB = 128
	}
	redact.Register(c.Secrets()...)
	return c, nil
}

// Secrets lists the secret values of the configuration: API keys (the server's and the
// providers'), and the values of provider headers, MCP env entries and MCP headers whose names
// say they hold a secret (redact.SecretName). Show masks every header and env value; this list
// is what must not appear in any other output either.
func (c *Config) Secrets() []string {
	out := []string{c.Server.APIKey, c.Server.AdminKey, c.Server.MetricsKey}
	for _, k := range c.Server.ExtraKeys {
		out = append(out, k.Key)
	}
	named := func(m map[string]string) {
		for k, v := range m {
			if redact.SecretName(k) {
				out = append(out, v, strings.TrimSpace(strings.TrimPrefix(v, "Bearer ")))
			}
		}
	}
	for _, p := range c.Providers {
		out = append(out, p.APIKey)
		named(p.Headers)
	}
	for _, m := range c.MCP.Servers {
		named(m.Env)
		named(m.Headers)
	}
	return out
}

// SecretEnv names the environment variables that hold Hermes' or a provider's API key (the
// built-in ones and every provider's api_key_env). Tool processes never get them unless
// tools.env_passthrough names them exactly.
func (c *Config) SecretEnv() []string {
	out := []string{"HERMES_API_KEY", "API_SERVER_KEY", "OPENAI_API_KEY"}
	for _, name := range c.ProviderNames() {
		if k := c.Providers[name].KeyEnv; k != "" && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// Show renders the effective configuration as YAML with secrets masked: API keys, every
// provider and MCP header value and MCP env value, and the user info and secret-named query
// parameters of URLs (engine/redact).
func (c *Config) Show() string {
	masked := *c
	masked.Providers = map[string]Provider{}
	for k, p := range c.Providers {
		p.APIKey = mask(p.APIKey)
		p.BaseURL = redact.String(p.BaseURL)
		p.Headers = maskValues(p.Headers)
		masked.Providers[k] = p
	}
	masked.Store.URL = redact.String(c.Store.URL) // a database URL may carry its password
	masked.Server.APIKey = mask(c.Server.APIKey)
	masked.Server.AdminKey = mask(c.Server.AdminKey)
	masked.Server.MetricsKey = mask(c.Server.MetricsKey)
	masked.Server.ExtraKeys = nil
	for _, k := range c.Server.ExtraKeys {
		masked.Server.ExtraKeys = append(masked.Server.ExtraKeys, ExtraKey{Name: k.Name, Key: mask(k.Key)})
	}
	// MCP env values and headers often carry tokens.
	masked.MCP.Servers = map[string]MCPServer{}
	for k, m := range c.MCP.Servers {
		m.Env, m.Headers = maskValues(m.Env), maskValues(m.Headers)
		m.URL = redact.String(m.URL)
		m.Args = slices.Clone(m.Args)
		for i, a := range m.Args {
			// --token=VALUE is caught by String; --token VALUE by its flag.
			if i > 0 && strings.HasPrefix(m.Args[i-1], "-") && !strings.Contains(m.Args[i-1], "=") && redact.SecretName(m.Args[i-1]) {
				m.Args[i] = redact.Secret(a)
				continue
			}
			m.Args[i] = redact.String(a)
		}
		masked.MCP.Servers[k] = m
	}
	b, _ := yaml.Marshal(&masked)
	var sb strings.Builder
	fmt.Fprintf(&sb, "# HERMES_HOME: %s\n", c.Home)
	if c.Path != "" {
		fmt.Fprintf(&sb, "# config file: %s\n", c.Path)
	} else {
		fmt.Fprintf(&sb, "# config file: none (%s not found; defaults and environment)\n", filepath.Join(c.Home, "config.yaml"))
	}
	sb.Write(b)
	return sb.String()
}

// Catalog is the embedded model catalogue with this configuration's overrides: each
// provider's families, aggregator flag and catalog entries, and its models list as entries
// known by name only.
func (c *Config) Catalog() *catalog.Catalog {
	cat := catalog.Default()
	for _, name := range c.ProviderNames() {
		p := c.Providers[name]
		entries := slices.Clone(p.Catalog)
		for _, m := range p.Models {
			if _, ok := cat.Lookup(name, m); !ok && !slices.ContainsFunc(entries, func(e catalog.Model) bool { return e.ID == m }) {
				entries = append(entries, catalog.Model{ID: m})
			}
		}
		if len(p.Families) > 0 || p.Aggregator || len(entries) > 0 {
			cat.Override(name, p.Families, p.Aggregator, entries)
		}
	}
	return cat
}

// ProviderNames lists the configured providers, sorted.
func (c *Config) ProviderNames() []string {
	out := make([]string, 0, len(c.Providers))
	for k := range c.Providers {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func maskValues(m map[string]string) map[string]string { return redact.Values(m) }

func mask(s string) string { return redact.Secret(s) }

// readableYAMLError says a decoding error of config.yaml in the file's terms: an unknown key is
// named as a key, with the known key it most likely meant ("line 1: unknown key "modle" (did
// you mean "model"?)"), not as a field of a Go type.
func readableYAMLError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	keys := map[string][]string{} // Go type name → its yaml keys
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t.PkgPath() != reflect.TypeFor[Config]().PkgPath() {
			return
		}
		name := "config." + t.Name()
		if _, seen := keys[name]; seen {
			return
		}
		keys[name] = []string{}
		for f := range t.Fields() {
			if k, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); k != "" && k != "-" {
				keys[name] = append(keys[name], k)
			}
			walk(f.Type)
		}
	}
	walk(reflect.TypeFor[Config]())
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		msgs[i] = m
		var line int
		var field, typ string
		if n, _ := fmt.Sscanf(m, "line %d: field %s not found in type %s", &line, &field, &typ); n != 3 {
			continue
		}
		msgs[i] = fmt.Sprintf("line %d: unknown key %q", line, field)
		if near := nearestKey(field, keys[typ]); near != "" {
			msgs[i] += fmt.Sprintf(" (did you mean %q?)", near)
		}
	}
	return errors.New(strings.Join(msgs, "; "))
}

// nearestKey is the key of keys closest to k, when it is a likely typo of it (at most two
// edits away, one for short keys); "" otherwise.
func nearestKey(k string, keys []string) string {
	best, bestD := "", 3
	for _, c := range keys {
		if d := editDistance(k, c); d < bestD && (d <= 1 || len(c) > 4) {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b (bytes: keys are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
