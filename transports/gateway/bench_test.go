package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"iter"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/store"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/store/memstore"
	"github.com/hermes-go/hermes/engine/tool"
	"github.com/hermes-go/hermes/engine/tool/builtin"
	"github.com/hermes-go/hermes/transports/gateway"
	"github.com/hermes-go/hermes/transports/gateway/gwclient"
	"github.com/hermes-go/hermes/transports/httpapi"
	"github.com/hermes-go/hermes/transports/jsonrpc"
)

// instant is a zero-latency model: it calls the terminal once when the prompt asks for a
// tool, then answers; otherwise it answers at once.
type instant struct{}

func (instant) Stream(_ context.Context, r model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		last := r.Messages[len(r.Messages)-1]
		if last.Role == "user" && strings.Contains(last.Content, "tool") {
			yield(model.Chunk{ToolCalls: []model.ToolCallDelta{{ID: "call_1", Name: "terminal", Arguments: `{"command":"true"}`}}, FinishReason: "tool_calls"}, nil)
			return
		}
		if yield(model.Chunk{Text: "ok"}, nil) {
			yield(model.Chunk{FinishReason: "stop", Usage: &model.Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2}}, nil)
		}
	}
}

func benchGateway(b *testing.B, durable bool) (*engine.Engine, *gateway.Server) {
	var st store.Store = memstore.New()
	if durable {
		bs, err := badgerstore.Open(b.TempDir(), badgerstore.DefaultOptions())
		if err != nil {
			b.Fatal(err)
		}
		st = bs
	}
	eng, err := engine.New(engine.Config{Store: st, Providers: map[string]model.Provider{"p": instant{}}, DefaultModel: "p:m",
		Tools: tool.NewRegistry(builtin.Defaults(nil)...), Cwd: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	gw := gateway.New(eng, gateway.Options{})
	b.Cleanup(func() { gw.Close(); eng.Close(); st.Close() })
	return eng, gw
}

// pipeClient connects a client to gw over OS pipes with newline framing, as stdio does.
func pipeClient(b *testing.B, gw *gateway.Server) *gwclient.Client {
	sr, cw, _ := os.Pipe()
	cr, sw, _ := os.Pipe()
	go gw.Serve(context.Background(), jsonrpc.NewLineFramer(sr, sw, closers{sr, sw}, 0), false, nil)
	c := gwclient.New(jsonrpc.NewLineFramer(cr, cw, closers{cr, cw}, 0))
	b.Cleanup(func() { c.Close() })
	if _, _, err := c.WaitType(context.Background(), 0, "", "gateway.ready"); err != nil {
		b.Fatal(err)
	}
	return c
}

type closers []io.Closer

func (cs closers) Close() error {
	for _, c := range cs {
		c.Close()
	}
	return nil
}

func wsServer(b *testing.B, eng *engine.Engine, gw *gateway.Server) string {
	hs, err := httpapi.New(eng, gw, httpapi.Options{APIKey: "bench-key-0123456789"})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go hs.Serve(ln)
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
	})
	return "ws://" + ln.Addr().String() + "/api/ws?token=bench-key-0123456789"
}

func wsClient(b *testing.B, url string) *gwclient.Client {
	c, err := gwclient.DialWS(context.Background(), url, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	if _, _, err := c.WaitType(context.Background(), 0, "", "gateway.ready"); err != nil {
		b.Fatal(err)
	}
	c.Call(context.Background(), "client.capabilities", map[string]any{"server_requests": true})
	return c
}

func mustCall(b *testing.B, c *gwclient.Client, method string, params any) map[string]any {
	var out map[string]any
	if err := c.CallInto(context.Background(), method, params, &out); err != nil {
		b.Fatalf("%s: %v", method, err)
	}
	return out
}

func warmTurn(b *testing.B, c *gwclient.Client, prompt string) {
	sid := mustCall(b, c, "session.create", nil)["session_id"].(string)
	run := func() {
		from := len(c.Events())
		mustCall(b, c, "prompt.submit", map[string]any{"session_id": sid, "text": prompt})
		if _, _, err := c.WaitType(context.Background(), from, sid, "message.complete"); err != nil {
			b.Fatal(err)
		}
	}
	run() // the first prompt stores the session; the benchmark measures warm turns
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run()
	}
}

// BenchmarkWarmTurn measures submit → message.complete at the client for the second and later
// prompts of a session, with a zero-latency model, over pipes and WebSocket, on the durable
// badger store and on the in-memory store.
func BenchmarkWarmTurn(b *testing.B) {
	for _, durable := range []bool{true, false} {
		storeName := map[bool]string{true: "badger", false: "memstore"}[durable]
		for _, kind := range []string{"text", "tool"} {
			prompt := map[string]string{"text": "hello", "tool": "use a tool"}[kind]
			b.Run(storeName+"/pipe/"+kind, func(b *testing.B) {
				_, gw := benchGateway(b, durable)
				warmTurn(b, pipeClient(b, gw), prompt)
			})
			b.Run(storeName+"/ws/"+kind, func(b *testing.B) {
				eng, gw := benchGateway(b, durable)
				warmTurn(b, wsClient(b, wsServer(b, eng, gw)), prompt)
			})
		}
	}
}

// BenchmarkEventLatency measures engine event → client frame latency: one event in flight at
// a time (p50/p99 over b.N events).
func BenchmarkEventLatency(b *testing.B) {
	for _, kind := range []string{"pipe", "ws"} {
		b.Run(kind, func(b *testing.B) {
			c, s, sid := eventClient(b, kind)
			lat := make([]time.Duration, 0, b.N)
			idx := len(c.Events())
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				sent := time.Now()
				s.Emit("bench.tick", engine.SurfaceEvent{"i": i})
				e, at, err := c.WaitType(context.Background(), idx, sid, "bench.tick")
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, e.Received.Sub(sent))
				idx = at + 1
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50_µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99_µs")
		})
	}
}

// BenchmarkEventThroughput measures events/s to one client, emitted back to back in bursts
// that fit the journal's replay window.
func BenchmarkEventThroughput(b *testing.B) {
	for _, kind := range []string{"pipe", "ws"} {
		b.Run(kind, func(b *testing.B) {
			c, s, sid := eventClient(b, kind)
			from := len(c.Events())
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i += burst {
				n := min(burst, b.N-i)
				for k := 0; k < n; k++ {
					s.Emit("bench.tick", engine.SurfaceEvent{"i": i + k})
				}
				from = waitCount(b, c, from, sid, n)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
		})
	}
}

const burst = 2048

func eventClient(b *testing.B, kind string) (*gwclient.Client, *engine.Session, string) {
	eng, gw := benchGateway(b, false)
	var c *gwclient.Client
	if kind == "pipe" {
		c = pipeClient(b, gw)
	} else {
		c = wsClient(b, wsServer(b, eng, gw))
	}
	sid := mustCall(b, c, "session.create", nil)["session_id"].(string)
	return c, findSession(b, eng), sid
}

func findSession(b *testing.B, eng *engine.Engine) *engine.Session {
	l := eng.LiveSessions()
	if len(l) != 1 {
		b.Fatalf("want one live session, have %d", len(l))
	}
	return l[0]
}

// waitCount waits for n more bench.tick events after index from and returns the index after
// the last one.
func waitCount(b *testing.B, c *gwclient.Client, from int, sid string, n int) int {
	idx := from
	for got := 0; got < n; got++ {
		_, i, err := c.WaitType(context.Background(), idx, sid, "bench.tick")
		if err != nil {
			b.Error(err)
			return idx
		}
		idx = i + 1
	}
	return idx
}

// BenchmarkFanOut100 measures events delivered to 100 WebSocket clients attached to one
// session (events/s per client and in total).
func BenchmarkFanOut100(b *testing.B) {
	eng, gw := benchGateway(b, false)
	url := wsServer(b, eng, gw)
	first := wsClient(b, url)
	sid := mustCall(b, first, "session.create", nil)["session_id"].(string)
	clients := []*gwclient.Client{first}
	for i := 1; i < 100; i++ {
		c := wsClient(b, url)
		mustCall(b, c, "session.activate", map[string]any{"session_id": sid, "omit_messages": true})
		clients = append(clients, c)
	}
	s := findSession(b, eng)
	froms := make([]int, len(clients))
	for i, c := range clients {
		froms[i] = len(c.Events())
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i += burst {
		n := min(burst, b.N-i)
		for k := 0; k < n; k++ {
			s.Emit("bench.tick", engine.SurfaceEvent{"i": i + k})
		}
		var wg sync.WaitGroup
		for ci, c := range clients {
			wg.Go(func() { froms[ci] = waitCount(b, c, froms[ci], sid, n) })
		}
		wg.Wait()
	}
	el := time.Since(start)
	b.ReportMetric(float64(b.N)/el.Seconds(), "events/s/client")
	b.ReportMetric(float64(b.N*len(clients))/el.Seconds(), "frames/s")
}

// BenchmarkConnectionMemory reports heap per idle WebSocket connection (client and server
// ends together, both in this process).
func BenchmarkConnectionMemory(b *testing.B) {
	for i := 0; i < b.N; i++ {
		eng, gw := benchGateway(b, false)
		url := wsServer(b, eng, gw)
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		const n = 200
		keep := make([]*gwclient.Client, 0, n)
		for k := 0; k < n; k++ {
			keep = append(keep, wsClient(b, url))
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/n, "B/conn")
		runtime.KeepAlive(keep)
	}
}

// BenchmarkEventThroughputRaw measures the server side alone: events/s written to one pipe
// connection whose reader only splits lines (no JSON decoding on the client side).
func BenchmarkEventThroughputRaw(b *testing.B) {
	eng, gw := benchGateway(b, false)
	sr, cw, _ := os.Pipe()
	cr, sw, _ := os.Pipe()
	go gw.Serve(context.Background(), jsonrpc.NewLineFramer(sr, sw, closers{sr, sw}, 0), false, nil)
	b.Cleanup(func() { cw.Close(); cr.Close() })
	br := bufio.NewReaderSize(cr, 1<<20)
	if _, err := br.ReadBytes('\n'); err != nil { // gateway.ready
		b.Fatal(err)
	}
	cw.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"session.create","params":{}}` + "\n"))
	if _, err := br.ReadBytes('\n'); err != nil {
		b.Fatal(err)
	}
	s := findSession(b, eng)
	tick := []byte(`"bench.tick"`)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i += burst {
		n := min(burst, b.N-i)
		for k := 0; k < n; k++ {
			s.Emit("bench.tick", engine.SurfaceEvent{"i": i + k})
		}
		for got := 0; got < n; {
			line, err := br.ReadSlice('\n')
			if err != nil {
				b.Fatal(err)
			}
			if bytes.Contains(line, tick) {
				got++
			}
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}
