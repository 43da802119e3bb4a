// Package metrics owns the Prometheus metrics of a Hermes process: one registry of its own
// (never the global default one) holding the Go runtime and process collectors and the
// hermes_* series, and the pieces that feed it — the engine event tap (Config.OnEvent), a
// store decorator timing every store operation, a policy decorator timing every hook call,
// and scrape-time figures read from the engine, the HTTP server and the store. Handler serves
// the registry in the Prometheus text format.
//
// Labels are bounded: no session, turn or call ids. A tool name the registry does not know
// (the model may call anything) is counted as "unknown"; decisions and outcomes outside the
// engine's vocabulary as "other".
package metrics

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/store"
)

// Metrics is a process's registry and the series Hermes keeps in it. Its methods are safe
// for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	turns        *prometheus.CounterVec
	turnSeconds  *prometheus.HistogramVec
	modelCalls   *prometheus.CounterVec
	tokens       *prometheus.CounterVec
	cost         *prometheus.CounterVec
	toolCalls    *prometheus.CounterVec
	toolSeconds  *prometheus.HistogramVec
	approvalWait *prometheus.HistogramVec
	decisions    *prometheus.CounterVec
	hookSeconds  *prometheus.HistogramVec
	hookErrors   *prometheus.CounterVec
	rejections   *prometheus.CounterVec
	contextRatio prometheus.Histogram
	contextUsed  prometheus.Histogram
	compactions  prometheus.Counter
	storeSeconds *prometheus.HistogramVec
	storeErrors  *prometheus.CounterVec

	// storeObs are the store histogram's children by operation, looked up once.
	storeObs map[string]prometheus.Observer

	mu sync.Mutex
	// decided is the approval decision of each tool call between its policy.decision and its
	// tool.complete events; asked is when each open approval request was raised.
	decided map[callKey]string
	asked   map[string]ask

	src atomic.Pointer[sources]
}

type callKey struct{ session, call string }

type ask struct {
	session string
	at      time.Time
}

// sources are what the scrape-time figures are read from; each may be nil.
type sources struct {
	eng   *engine.Engine
	conns func() Conns
	store store.Store // for the leases held (undecorated: a scrape is not a store operation)
	known func(tool string) bool
}

// Conns are the HTTP server's open connections and streams.
type Conns struct {
	HTTP      int // TCP connections the API listener holds (WebSocket ones included)
	WebSocket int // /api/ws connections
	SSE       int // event streams being written
}

// Buckets of the latency histograms, in seconds.
var (
	turnBuckets  = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
	toolBuckets  = []float64{0.001, 0.005, 0.025, 0.1, 0.5, 1, 5, 15, 60, 300}
	waitBuckets  = []float64{0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 900}
	hookBuckets  = []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1, 2.5}
	storeBuckets = []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 2.5}
	ratioBuckets = []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}
	tokenBuckets = []float64{1000, 4000, 16000, 32000, 64000, 128000, 200000, 400000, 1000000}
)

// New returns the metrics with a fresh registry.
func New() *Metrics {
	m := &Metrics{
		reg:     prometheus.NewRegistry(),
		decided: map[callKey]string{},
		asked:   map[string]ask{},
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hermes_turns_total",
			Help: "Turns ended, by the outcome's status (completed, failed, cancelled)."}, []string{"outcome"}),
		turnSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hermes_turn_duration_seconds",
			Help: "Time from a turn's start to its outcome, by status.", Buckets: turnBuckets}, []string{"outcome"}),
		modelCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hermes_model_calls_total",
			Help: "Model requests made by turns, by the turn's model (provider:model)."}, []string{"model"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hermes_model_tokens_total",
			Help: "Tokens the providers reported, by model and type (input, output, cache_read, cache_write, reasoning)."}, []string{"model", "type"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hermes_cost_usd_total",
			Help: "What the turns cost at the model catalogue's prices, in US dollars, by model (nothing for a model without prices)."}, []string{"model"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hermes_tool_calls_total",
			Help: "Tool calls, by tool and verdict (allowed, approved, denied, blocked)."}, []string{"tool", "verdict"}),
		toolSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hermes_tool_duration_seconds",
			Help: "Time a tool call took, approval wait included, by tool.", Buckets: toolBuckets}, []string{"tool"}),
		approvalWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hermes_approval_wait_seconds",
			Help: "Time an approval request stayed open, by how it ended (approved, denied, timeout, interrupted, withdrawn).", Buckets: waitBuckets}, []string{"outcome"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hermes_policy_decisions_total",
			Help: "Policy decisions the engine journaled, by hook and decision (a failed hook's is the fallback's)."}, []string{"hook", "decision"}),
		hookSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hermes_policy_hook_seconds",
			Help: "Latency of policy hook calls, by hook and language (go, js, lua).", Buckets: hookBuckets}, []string{"hook", "language"}),
		hookErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hermes_policy_hook_errors_total",
			Help: "Policy hook calls that failed (error or timeout), by hook and language."}, []string{"hook", "language"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hermes_admission_rejections_total",
			Help: "Work refused at admission, by reason (busy: the busy-input policy rejected a prompt; turn_cap: the server's concurrent-turn cap; max_conns, max_conns_per_ip: connection caps)."}, []string{"reason"}),
		contextRatio: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "hermes_context_used_ratio",
			Help: "Share of the model's context window the session used as each turn ended.", Buckets: ratioBuckets}),
		contextUsed: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "hermes_context_used_tokens",
			Help: "Context tokens the session used as each turn ended.", Buckets: tokenBuckets}),
		compactions: prometheus.NewCounter(prometheus.CounterOpts{Name: "hermes_compactions_total",
			Help: "Compactions turns made of their session's transcript (automatic, or after the provider refused a request as too long)."}),
		storeSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hermes_store_operation_seconds",
			Help: "Latency of store operations, by operation.", Buckets: storeBuckets}, []string{"op"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hermes_store_errors_total",
			Help: "Store operations that returned an error, by operation."}, []string{"op"}),
	}
	m.storeObs = map[string]prometheus.Observer{}
	for _, op := range storeOps {
		m.storeObs[op] = m.storeSeconds.WithLabelValues(op)
	}
	m.src.Store(&sources{})
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.turns, m.turnSeconds, m.modelCalls, m.tokens, m.cost, m.toolCalls, m.toolSeconds,
		m.approvalWait, m.decisions, m.hookSeconds, m.hookErrors, m.rejections, m.contextRatio,
		m.contextUsed, m.compactions, m.storeSeconds, m.storeErrors,
		live{m},
	)
	return m
}

// Handler serves the registry in the Prometheus text format (or OpenMetrics when asked).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

func (m *Metrics) update(f func(*sources)) {
	for {
		old := m.src.Load()
		s := *old
		f(&s)
		if m.src.CompareAndSwap(old, &s) {
			return
		}
	}
}

// WatchEngine reads the live sessions, queue depth and open approvals from e at scrape time,
// and counts only tools e's registry knows by name.
func (m *Metrics) WatchEngine(e *engine.Engine) {
	m.update(func(s *sources) {
		s.eng = e
		s.known = func(name string) bool { _, err := e.Tools().Get(name); return err == nil }
	})
}

// WatchConns reads the HTTP server's connections at scrape time.
func (m *Metrics) WatchConns(f func() Conns) { m.update(func(s *sources) { s.conns = f }) }

// WatchLeases reads the leases held from st at scrape time (pass the undecorated store).
func (m *Metrics) WatchLeases(st store.Store) { m.update(func(s *sources) { s.store = st }) }

// Reject counts work refused at admission for reason (turn_cap, max_conns, max_conns_per_ip;
// the engine's busy rejections are counted from its events).
func (m *Metrics) Reject(reason string) { m.rejections.WithLabelValues(reason).Inc() }

// live is the collector of the figures read at scrape time.
type live struct{ m *Metrics }

var (
	descSessions = prometheus.NewDesc("hermes_sessions_active", "Sessions live in the engine (loaded in memory).", nil, nil)
	descBusy     = prometheus.NewDesc("hermes_sessions_busy", "Live sessions running a turn (working or waiting for an answer).", nil, nil)
	descQueue    = prometheus.NewDesc("hermes_queue_depth", "Prompts waiting for a live session's running turn to end (its follow-up slot and its line).", nil, nil)
	descPending  = prometheus.NewDesc("hermes_approvals_pending", "Approval requests open now.", nil, nil)
	descConns    = prometheus.NewDesc("hermes_connections", "Open connections of the HTTP API, by kind (http: every TCP connection, websocket: /api/ws).", []string{"kind"}, nil)
	descSSE      = prometheus.NewDesc("hermes_sse_clients", "Server-sent event streams being written.", nil, nil)
	descLeases   = prometheus.NewDesc("hermes_leases_held", "Session leases held now in the store, by every process and node sharing it.", nil, nil)
)

func (live) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSessions, descBusy, descQueue, descPending, descConns, descSSE, descLeases} {
		ch <- d
	}
}

func (l live) Collect(ch chan<- prometheus.Metric) {
	src := l.m.src.Load()
	if e := src.eng; e != nil {
		sessions := e.LiveSessions()
		busy, queued, pending := 0, 0, 0
		for _, s := range sessions {
			snap := s.Snapshot()
			if st := snap.Info.Status; st == engine.StatusWorking || st == engine.StatusWaiting {
				busy++
			}
			if snap.Queued != "" {
				queued++
			}
			queued += snap.InLine
			for _, r := range snap.OpenRequests {
				if r.Kind == engine.KindApproval {
					pending++
				}
			}
		}
		ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(len(sessions)))
		ch <- prometheus.MustNewConstMetric(descBusy, prometheus.GaugeValue, float64(busy))
		ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, float64(queued))
		ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(pending))
	}
	if f := src.conns; f != nil {
		c := f()
		ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(c.HTTP), "http")
		ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(c.WebSocket), "websocket")
		ch <- prometheus.MustNewConstMetric(descSSE, prometheus.GaugeValue, float64(c.SSE))
	}
	if st := src.store; st != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		leases, err := st.ListLeases(ctx)
		cancel()
		if err != nil {
			ch <- prometheus.NewInvalidMetric(descLeases, err)
		} else {
			ch <- prometheus.MustNewConstMetric(descLeases, prometheus.GaugeValue, float64(len(leases)))
		}
	}
}
