package cli

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/hermes-go/hermes/internal/metrics"
	"github.com/hermes-go/hermes/transports/httpapi"
)

// watchServer has the metrics read srv's connections at scrape time.
func watchServer(m *metrics.Metrics, srv *httpapi.Server) {
	m.WatchConns(func() metrics.Conns {
		st := srv.Stats()
		return metrics.Conns{HTTP: st.Conns, WebSocket: st.WebSockets, SSE: st.Streams}
	})
}

// serveMetrics serves h at /metrics on addr (server.metrics_addr, --metrics-addr), a listener
// of its own so a Prometheus server can scrape without the API key. With key set, a scrape
// must send it as a bearer token. An empty addr serves nothing. stop shuts it down.
func serveMetrics(addr, key string, h http.Handler, io stdio) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics address: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metricsAuth(key, h))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	auth := "no key"
	if key != "" {
		auth = "bearer key server.metrics_key"
	}
	fmt.Fprintf(io.err, "hermes serve: metrics on http://%s/metrics (%s)\n", ln.Addr(), auth)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = srv.Close()
		}
		<-done
	}, nil
}

// metricsAuth asks for "Authorization: Bearer <key>" when key is set.
func metricsAuth(key string, h http.Handler) http.Handler {
	if key == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := httpapi.BearerToken(r.Header.Get("Authorization"))
		if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(key)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hermes metrics"`)
			http.Error(w, "a bearer key (server.metrics_key) is required", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
