package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine"
	"github.com/hermes-go/hermes/engine/model"
	"github.com/hermes-go/hermes/engine/policy"
	"github.com/hermes-go/hermes/engine/store"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/store/homestore"
	"github.com/hermes-go/hermes/engine/tool"
)

// Figures for one home, many processes (BENCHMARKS.md): the built binary's ready times with the
// home's store process up, started by the command, or not used (badger in the command's own
// process); listing 10,000 sessions; a warm turn over the store process and over badger in
// process. HERMES_BENCH_BIN names a built hermes; by default the benchmarks build one.

func benchBinary(b *testing.B) string {
	b.Helper()
	if p := os.Getenv("HERMES_BENCH_BIN"); p != "" {
		return p
	}
	bin, err := buildHermes(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	return bin
}

// storeServer starts the store process of home from bin (as a command would) and returns a
// function that stops it (SIGTERM) and waits until it has let go of the home.
func storeServer(b *testing.B, bin, home string, env []string) (stop func()) {
	b.Helper()
	args := []string{"store-server", "--home", home, "--dir", filepath.Join(home, "state"), "--idle", "1h"}
	c, err := homestore.Dial(context.Background(), homestore.ClientOptions{
		Home:  home,
		Start: func() error { return homestore.Spawn(home, env, bin, args...) },
	})
	if err != nil {
		b.Fatal(err)
	}
	c.Close()
	return func() { storeServerStop(b, home) }
}

// reportSpread reports the median and the slowest of ds in milliseconds.
func reportSpread(b *testing.B, ds []time.Duration) {
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2])/1e6, "median-ms")
	b.ReportMetric(float64(ds[len(ds)-1])/1e6, "max-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkOneHomeACPReady starts the built `hermes acp` b.N times on one home and times it to
// the answer of initialize and to the answer of the session/new sent right behind it (the first
// request that needs the store): with the store process up, with none running (the command
// starts it; the benchmark stops it between starts), and with badger in the command's process
// (HERMES_STORE_PROCESS=off). init-cpu-ms is the CPU time the process had used when its
// initialize answer arrived (every thread's, from /proc): what the start costs on a quiet
// machine, where the wall time is close to it. Run with -benchtime 15x.
func BenchmarkOneHomeACPReady(b *testing.B) {
	bin := benchBinary(b)
	work := b.TempDir()
	for _, mode := range []string{"store-up", "store-cold", "in-process"} {
		b.Run(mode, func(b *testing.B) {
			home := b.TempDir()
			storeProcess := "on"
			if mode == "in-process" {
				storeProcess = "off"
			}
			env := append(os.Environ(), "HERMES_HOME="+home, "OPENAI_BASE_URL=http://127.0.0.1:1/v1", "OPENAI_API_KEY=k",
				"HERMES_MODEL=openai:fake", "HERMES_STORE_IDLE=1h", "HERMES_STORE_PROCESS="+storeProcess)
			stop := func() {}
			if mode == "store-up" {
				stop = storeServer(b, bin, home, nil)
			}
			var initDs, newDs, initCPU []time.Duration
			req := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`+"\n"+
				`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`+"\n", work)
			for b.Loop() {
				cmd := exec.Command(bin, "acp")
				cmd.Dir, cmd.Env = work, env
				stdin, err := cmd.StdinPipe()
				if err != nil {
					b.Fatal(err)
				}
				stdout, err := cmd.StdoutPipe()
				if err != nil {
					b.Fatal(err)
				}
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				start := time.Now()
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				if _, err := stdin.Write([]byte(req)); err != nil {
					b.Fatal(err)
				}
				sc := bufio.NewScanner(stdout)
				sc.Buffer(nil, 1<<20)
				for sc.Scan() {
					line := sc.Text()
					if strings.Contains(line, `"id":1,`) {
						initDs = append(initDs, time.Since(start))
						if cpu, ok := processCPU(cmd.Process.Pid); ok {
							initCPU = append(initCPU, cpu)
						}
					}
					if strings.Contains(line, `"id":2,`) {
						newDs = append(newDs, time.Since(start))
						if !strings.Contains(line, `"sessionId"`) {
							b.Fatalf("session/new: %s\n%s", line, stderr.String())
						}
						break
					}
				}
				stdin.Close()
				_, _ = io.Copy(io.Discard, stdout)
				if err := cmd.Wait(); err != nil {
					b.Fatalf("hermes acp: %v\n%s", err, stderr.String())
				}
				if mode == "store-cold" {
					storeServerStop(b, home)
				}
			}
			stop()
			if len(initDs) != len(newDs) {
				b.Fatalf("%d initialize and %d session/new answers", len(initDs), len(newDs))
			}
			slices.Sort(initDs)
			slices.Sort(newDs)
			b.ReportMetric(float64(initDs[len(initDs)/2])/1e6, "init-median-ms")
			if len(initCPU) > 0 {
				slices.Sort(initCPU)
				b.ReportMetric(float64(initCPU[len(initCPU)/2])/1e6, "init-cpu-ms")
			}
			b.ReportMetric(float64(newDs[len(newDs)/2])/1e6, "new-median-ms")
			b.ReportMetric(float64(newDs[len(newDs)-1])/1e6, "new-max-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// processCPU is the CPU time process pid has used so far, summed over its threads
// (/proc/<pid>/task/*/schedstat, in nanoseconds); false where /proc does not tell.
func processCPU(pid int) (time.Duration, bool) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, false
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that ended meanwhile
		}
		var ns int64
		if _, err := fmt.Sscan(string(b), &ns); err == nil {
			sum += time.Duration(ns)
		}
	}
	return sum, true
}

// storeServerStop stops the store process serving home, if any, and waits for it to be gone.
func storeServerStop(b *testing.B, home string) {
	b.Helper()
	pid, held := homestore.LockHolder(home)
	if !held {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, held := homestore.LockHolder(home); !held {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			b.Fatalf("store process %d still running 30s after SIGTERM", pid)
		}
	}
}

// fillSessions stores n sessions in home's badger directory.
func fillSessions(b *testing.B, home string, n int) {
	b.Helper()
	o := badgerstore.DefaultOptions()
	o.SyncWrites = false // filling only
	st, err := badgerstore.Open(filepath.Join(home, "state"), o)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				if _, err := st.CreateSession(ctx, store.Session{ID: fmt.Sprintf("s%05d", i), Title: fmt.Sprintf("session %d", i), Model: "openai:gpt-4o", Source: "cli", Cwd: "/src/project"}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// BenchmarkOneHomeList10k lists a home of 10,000 sessions: `hermes sessions` (the built binary,
// start to exit) with badger in its process and over a running store process, and
// ListSessions of the Go API on badger in this process and on a client of the store process.
// `hermes sessions -n 0` prints every session, so its figure includes writing 10,000 lines (an
// aligned table: its column widths are known once every row is read).
// Run with -benchtime 10x.
func BenchmarkOneHomeList10k(b *testing.B) {
	bin := benchBinary(b)
	home := b.TempDir()
	fillSessions(b, home, 10_000)
	command := func(b *testing.B, storeProcess string) {
		env := append(os.Environ(), "HERMES_HOME="+home, "HERMES_STORE_PROCESS="+storeProcess, "HERMES_STORE_IDLE=1h")
		var ds []time.Duration
		for b.Loop() {
			cmd := exec.Command(bin, "sessions", "-n", "0")
			cmd.Env = env
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			start := time.Now()
			if err := cmd.Run(); err != nil || strings.Count(out.String(), "\n") != 10_000+1 { // and the header
				b.Fatalf("hermes sessions: %v, %d lines\n%s", err, strings.Count(out.String(), "\n"), errb.String())
			}
			ds = append(ds, time.Since(start))
		}
		reportSpread(b, ds)
	}
	list := func(b *testing.B, st store.Store) {
		var ds []time.Duration
		for b.Loop() {
			start := time.Now()
			got, err := st.ListSessions(context.Background(), store.ListOptions{})
			if err != nil || len(got) != 10_000 {
				b.Fatalf("%d sessions, %v", len(got), err)
			}
			ds = append(ds, time.Since(start))
		}
		reportSpread(b, ds)
	}
	b.Run("hermes-sessions/in-process", func(b *testing.B) { command(b, "off") })
	b.Run("go-api/in-process", func(b *testing.B) {
		st, err := badgerstore.Open(filepath.Join(home, "state"), badgerstore.DefaultOptions())
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		list(b, st)
	})
	stop := storeServer(b, bin, home, nil)
	defer stop()
	b.Run("hermes-sessions/store-process", func(b *testing.B) { command(b, "on") })
	b.Run("go-api/store-process", func(b *testing.B) {
		c, err := homestore.Dial(context.Background(), homestore.ClientOptions{Home: home})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		list(b, c)
	})
}

// toolOrText is a zero-latency model: with tools offered and the last message a user's "tool"
// prompt, a call of the echo tool; otherwise three text deltas. Each answer carries usage.
type toolOrText struct{}

func (toolOrText) Stream(_ context.Context, r model.Request) iter.Seq2[model.Chunk, error] {
	usage := &model.Usage{PromptTokens: 100, CompletionTokens: 3, TotalTokens: 103}
	chunks := []model.Chunk{{Text: "one "}, {Text: "two "}, {Text: "three"}, {Usage: usage, FinishReason: "stop"}}
	if last := r.Messages[len(r.Messages)-1]; last.Role == "user" && last.Content == "tool" {
		chunks = []model.Chunk{{ToolCalls: []model.ToolCallDelta{{Index: 0, ID: "call_1", Name: "echo", Arguments: `{"text":"hi"}`}}}, {Usage: usage, FinishReason: "tool_calls"}}
	}
	return func(yield func(model.Chunk, error) bool) {
		for _, c := range chunks {
			if !yield(c, nil) {
				return
			}
		}
	}
}

type benchEcho struct{}

func (benchEcho) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "echo", Description: "echo the text", Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)}
}

func (benchEcho) Call(_ context.Context, c tool.Call, _ *tool.Env) (tool.Result, error) {
	return tool.Result{Content: "echo: " + string(c.Args)}, nil
}

// BenchmarkOneHomeWarmTurn measures a warm turn (the 2nd+ prompt of a session, submit →
// outcome) with a zero-latency model, one engine on badger in this process and one on a client
// of a real store process (this test binary as `hermes store-server`), both with fsync on. The
// two engines take turns, one turn each per iteration, so both see the same machine load; it
// reports each one's mean time per turn and their ratio. "text" is a text answer (one model
// call); "tool" is a tool call then a text answer (two model calls, one tool call).
func BenchmarkOneHomeWarmTurn(b *testing.B) {
	for _, prompt := range []string{"text", "tool"} {
		b.Run(prompt, func(b *testing.B) {
			inproc, err := badgerstore.Open(filepath.Join(b.TempDir(), "state"), badgerstore.DefaultOptions())
			if err != nil {
				b.Fatal(err)
			}
			home := b.TempDir()
			exe, err := os.Executable()
			if err != nil {
				b.Fatal(err)
			}
			stop := storeServer(b, exe, home, []string{"HERMES_TEST_AS_MAIN=1"})
			defer stop()
			remote, err := homestore.Dial(context.Background(), homestore.ClientOptions{Home: home})
			if err != nil {
				b.Fatal(err)
			}
			var turns [2]func()
			for i, st := range []store.Store{inproc, remote} {
				eng, err := engine.New(engine.Config{Store: st, Providers: map[string]model.Provider{"fake": toolOrText{}}, DefaultModel: "fake:m",
					Tools: tool.NewRegistry(benchEcho{}), Cwd: b.TempDir(), Policy: policy.Set{Approver: policy.Defaults{}, Busy: policy.NewBusySetting(policy.Queue)}})
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				defer eng.Close()
				ctx := context.Background()
				s, err := eng.Create(ctx, engine.CreateOptions{Source: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				turns[i] = func() {
					adm, err := s.Submit(ctx, engine.Prompt{Text: prompt})
					if err != nil {
						b.Fatal(err)
					}
					if out, err := s.Wait(ctx, adm.TurnID); err != nil || out.Status != engine.StatusCompleted {
						o, _ := json.Marshal(out)
						b.Fatal(string(o), err)
					}
				}
				turns[i]() // the first turn: the session is warm from here on
			}
			var spent [2]time.Duration
			n := 0
			for b.Loop() {
				for k := range 2 {
					k = (k + n) % 2 // alternate which goes first
					start := time.Now()
					turns[k]()
					spent[k] += time.Since(start)
				}
				n++
			}
			in, re := float64(spent[0])/float64(n), float64(spent[1])/float64(n)
			b.ReportMetric(in/1e6, "inprocess-ms/turn")
			b.ReportMetric(re/1e6, "storeprocess-ms/turn")
			b.ReportMetric(re/in, "ratio")
			b.ReportMetric(0, "ns/op")
		})
	}
}
