package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/hermes-go/hermes/internal/loadgen"
	"github.com/hermes-go/hermes/transports/httpapi"
)

// TestMixedLoadKeepsAnswering is the small version of the load of BENCHMARKS.md (the full one
// is `go run ./internal/loadgen/cmd/serveload burst` against a real hermes serve): held chat
// streams, WebSocket clients and a flood of half-open connections from one address at once,
// while /health and an authenticated request from another address must keep answering and
// every stream must end with its terminal event. HERMES_LOAD_STREAMS raises the stream count
// (client and server share this process's open-file limit).
func TestMixedLoadKeepsAnswering(t *testing.T) {
	streams, wsn, flood := 100, 20, 150
	if v, err := strconv.Atoi(os.Getenv("HERMES_LOAD_STREAMS")); err == nil && v > 0 {
		streams, wsn, flood = v, v/20, v
	}
	release := make(chan struct{})
	tg := newTargetWith(t, held{release: release}, func(o *httpapi.Options) {
		o.MaxConcurrent = -1
		// Short enough that the flood cycles during the test, long enough that a starved client
		// of the held streams (a loaded machine: seconds between its connect and its request)
		// is not cut off as a slow sender (408).
		o.Limits = httpapi.Limits{ReadHeaderTimeout: 3 * time.Second, MaxConnsPerIP: flood / 2}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	from := func(ip string, keepAlive bool) *http.Client {
		d := &net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: !keepAlive, MaxIdleConnsPerHost: streams}}
	}

	// The flood: half a request from 127.0.0.250, again whenever the server closes it.
	floodCtx, stopFlood := context.WithCancel(ctx)
	defer stopFlood()
	var floodWG sync.WaitGroup
	var refused, closed atomic.Int64
	for range flood {
		floodWG.Go(func() {
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.250")}}
			for floodCtx.Err() == nil {
				c, err := d.DialContext(floodCtx, "tcp", strings.TrimPrefix(tg.base, "http://"))
				if err != nil {
					continue
				}
				stop := context.AfterFunc(floodCtx, func() { c.Close() })
				_, _ = io.WriteString(c, "GET /v1/models HTTP/1.1\r\nHost: x\r\n")
				b, _ := io.ReadAll(c)
				stop()
				c.Close()
				switch {
				case floodCtx.Err() != nil:
				case strings.HasPrefix(string(b), "HTTP/1.1 503"):
					refused.Add(1)
					time.Sleep(50 * time.Millisecond)
				default:
					closed.Add(1)
				}
			}
		})
	}

	// WebSocket clients that answer pings and keep their connection.
	var wsDropped atomic.Int64
	var wsWG sync.WaitGroup
	wsCtx, stopWS := context.WithCancel(ctx)
	defer stopWS()
	for range wsn {
		c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(tg.base, "http")+"/api/ws?token="+testKey, nil)
		if err != nil {
			t.Fatal(err)
		}
		context.AfterFunc(wsCtx, func() { c.Close() })
		wsWG.Go(func() {
			for {
				if _, _, err := c.ReadMessage(); err != nil {
					if wsCtx.Err() == nil {
						wsDropped.Add(1)
					}
					return
				}
			}
		})
	}

	// Held chat streams, spread over four client addresses.
	var targets []*loadgen.Target
	for i := range 4 {
		targets = append(targets, &loadgen.Target{BaseURL: tg.base + "/v1", APIKey: testKey, Client: from(fmt.Sprintf("127.0.0.%d", 10+i), true)})
	}
	h := loadgen.Hold(streams, func(i int) (*loadgen.Stream, error) {
		body := `{"model":"openai:fake-agent","stream":true,"messages":[{"role":"user","content":"mixed ` + strconv.Itoa(i) + `"}]}`
		return targets[i%4].OpenStream(ctx, "/chat/completions", []byte(body))
	})

	// Probes from an address of their own, on fresh connections, while all of it is held.
	probe := from("127.0.0.30", false)
	for i := range 10 {
		for _, p := range []struct{ path, auth string }{{"/health", ""}, {"/v1/models", "Bearer " + testKey}} {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, tg.base+p.path, nil)
			if p.auth != "" {
				req.Header.Set("Authorization", p.auth)
			}
			res, err := probe.Do(req)
			if err != nil {
				t.Fatalf("probe %d %s under load: %v", i, p.path, err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("probe %d %s under load: %s", i, p.path, res.Status)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}

	close(release)
	sum := h.Drain()
	stopFlood()
	floodWG.Wait()
	stopWS()
	wsWG.Wait()
	if sum.Errors > 0 || sum.Texts["held released"] != streams {
		t.Fatalf("%d of %d streams failed (first: %v); texts %v", sum.Errors, streams, sum.Err, sum.Texts)
	}
	if n := wsDropped.Load(); n > 0 {
		t.Errorf("%d WebSocket clients were dropped", n)
	}
	if refused.Load() == 0 {
		t.Errorf("the flood of %d connections from one address was never refused over the per-address cap of %d", flood, flood/2)
	}
	t.Logf("flood: %d refused, %d closed by the header timeout", refused.Load(), closed.Load())
}
