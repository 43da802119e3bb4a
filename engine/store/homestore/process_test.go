package homestore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-go/hermes/engine/store"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
	"github.com/hermes-go/hermes/engine/store/homestore"
)

// The store processes of these tests are this test binary, run as TestStoreProcess with the
// home in the environment.
const (
	envRole = "HOMESTORE_TEST_ROLE"
	envHome = "HOMESTORE_TEST_HOME"
)

// TestStoreProcess is the store process the other tests start. It exits after 3 s without
// clients, so that a test that fails half-way cannot leave one running for long.
func TestStoreProcess(t *testing.T) {
	if os.Getenv(envRole) != "server" {
		t.Skip("store process for the process tests")
	}
	home := os.Getenv(envHome)
	err := homestore.Serve(context.Background(), homestore.ServerOptions{
		Home:   home,
		Idle:   3 * time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
		Open: func() (store.Store, error) {
			return badgerstore.Open(filepath.Join(home, "state"), badgerstore.DefaultOptions())
		},
		Ready: func() { fmt.Printf("serving pid %d\n", os.Getpid()) },
	})
	if errors.Is(err, homestore.ErrRunning) {
		fmt.Printf("pid %d: %v\n", os.Getpid(), err)
		os.Exit(0)
	}
	if err != nil {
		fmt.Printf("pid %d: serve: %v\n", os.Getpid(), err)
		os.Exit(1)
	}
	fmt.Printf("pid %d: exiting\n", os.Getpid())
	os.Exit(0)
}

// starter returns a Start function that spawns this test binary as home's store process.
func starter(t *testing.T, home string) func() error {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(envRole, "server")
	t.Setenv(envHome, home)
	return func() error { return homestore.Spawn(home, nil, exe, "-test.run=^TestStoreProcess$") }
}

// stopServer kills home's store process at the end of a test (it would exit when idle anyway).
func stopServer(t *testing.T, home string) {
	t.Cleanup(func() {
		if pid, held := homestore.LockHolder(home); held && pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			waitGone(t, pid)
		}
	})
}

func waitGone(t *testing.T, pid int) {
	for range 500 {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("process %d still running", pid)
}

func dialStart(t *testing.T, home string, start func() error) *homestore.Client {
	t.Helper()
	c, err := homestore.Dial(context.Background(), homestore.ClientOptions{
		Home: home, Start: start, Patience: 10 * time.Second,
		Info: homestore.ClientInfo{Command: t.Name()},
	})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func status(t *testing.T, c *homestore.Client) *homestore.Status {
	t.Helper()
	st, err := c.Status(context.Background())
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	return st
}

// TestRacingStarters starts several store processes on one home at once, and dials from several
// clients that each start one: exactly one process serves, and every client reaches it.
func TestRacingStarters(t *testing.T) {
	home := shortHome(t)
	start := starter(t, home)
	stopServer(t, home)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := start(); err != nil {
				t.Error(err)
			}
		}()
	}
	clients := make([]*homestore.Client, 4)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := homestore.Dial(context.Background(), homestore.ClientOptions{Home: home, Start: start, Patience: 10 * time.Second})
			if err != nil {
				t.Error(err)
				return
			}
			clients[i] = c
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	pid := 0
	for _, c := range clients {
		t.Cleanup(func() { _ = c.Close() })
		st := status(t, c)
		if pid != 0 && st.PID != pid {
			t.Fatalf("clients reached store processes %d and %d", pid, st.PID)
		}
		pid = st.PID
	}
	if holder, held := homestore.LockHolder(home); !held || holder != pid {
		t.Fatalf("lock held by %d (%v), serving process is %d", holder, held, pid)
	}
	if st := status(t, clients[0]); len(st.Clients) != len(clients) {
		t.Fatalf("store process lists %d clients, want %d", len(st.Clients), len(clients))
	}
	// Every other process that was started has left, saying why.
	deadline := time.Now().Add(10 * time.Second)
	for {
		log, _ := os.ReadFile(homestore.LogPath(home))
		serving := strings.Count(string(log), "serving pid")
		refused := strings.Count(string(log), homestore.ErrRunning.Error())
		if serving > 1 {
			t.Fatalf("%d store processes served:\n%s", serving, log)
		}
		if serving == 1 && refused >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("log after racing starts:\n%s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A connection that never says who it is (a starter checking that the store process answers)
// is not one of its clients.
func TestProbeIsNoClient(t *testing.T) {
	home := shortHome(t)
	stopServer(t, home)
	c := dialStart(t, home, starter(t, home))
	probe, err := net.Dial("unix", homestore.SocketPath(home))
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	// The probe is accepted some time after its dial returned: look for a while.
	for range 50 {
		st := status(t, c)
		if len(st.Clients) != 1 || st.Clients[0].Command != t.Name() {
			t.Fatalf("clients %+v, want this test's only", st.Clients)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestKillRestart kills the store process under a client: the client starts a new one by itself
// and carries on; what was acknowledged is there; a watch reports Lost and works again.
func TestKillRestart(t *testing.T) {
	home := shortHome(t)
	stopServer(t, home)
	c := dialStart(t, home, starter(t, home))
	ctx := context.Background()
	if _, err := c.CreateSession(ctx, store.Session{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	rows, err := c.AppendRows(ctx, "a", store.Fence{}, []store.Row{{Role: "user", Content: "before"}})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.Watch(ctx, store.Interest{Sessions: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	old := status(t, c).PID
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, old)

	got, err := c.Rows(ctx, "a", store.RowQuery{})
	if err != nil || len(got) != 1 || got[0].ID != rows[0].ID || got[0].Content != "before" {
		t.Fatalf("rows after the kill = %+v, %v", got, err)
	}
	if now := status(t, c).PID; now == old {
		t.Fatalf("still talking to killed process %d", old)
	}
	// The watch was registered again and says hints were lost...
	select {
	case <-sub.C():
	case <-time.After(10 * time.Second):
		t.Fatal("no signal on the watch after reconnecting")
	}
	if _, lost := sub.Take(); !lost {
		t.Fatal("watch did not report lost hints after reconnecting")
	}
	// ...and delivers new ones.
	if _, err := c.AppendRows(ctx, "a", store.Fence{}, []store.Row{{Role: "user", Content: "after"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sub.C():
	default:
		t.Fatal("no hint for a write after reconnecting")
	}
	if cs, _ := sub.Take(); len(cs) != 1 || cs[0].SessionID != "a" {
		t.Fatalf("hints after reconnecting: %+v", cs)
	}
}

// TestCrashRounds kills the store process at random moments while clients append, 20 times.
// Every write a client saw acknowledged must be stored with the id it was given; a write that
// failed must have failed with store.ErrUnavailable; and the clients carry on by themselves.
// The longest gap between a kill and the next acknowledged write is logged.
func TestCrashRounds(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 3
	}
	home := shortHome(t)
	stopServer(t, home)
	start := starter(t, home)
	const writers = 4
	clients := make([]*homestore.Client, 2)
	for i := range clients {
		clients[i] = dialStart(t, home, start)
	}
	ctx := context.Background()
	for w := range writers {
		if _, err := clients[0].CreateSession(ctx, store.Session{ID: fmt.Sprintf("w%d", w)}); err != nil {
			t.Fatal(err)
		}
	}
	type ack struct {
		id      uint64
		content string
	}
	acked := make([][]ack, writers)
	var mu sync.Mutex
	// lastAck is when the latest acknowledged append had been sent: an answer the killed process
	// wrote just before it died may still be read after the kill, and proves nothing.
	var lastAck, lastAckAt time.Time
	var worst time.Duration
	unknown := 0
	for round := range rounds {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := clients[w%len(clients)]
				sid := fmt.Sprintf("w%d", w)
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					content := fmt.Sprintf("%s r%d n%d %s", sid, round, n, strings.Repeat("x", n%300))
					sent := time.Now()
					rows, err := c.AppendRows(ctx, sid, store.Fence{}, []store.Row{{Role: "user", Content: content}})
					if err != nil {
						if !errors.Is(err, store.ErrUnavailable) {
							t.Errorf("append failed with a non-retryable error: %v", err)
							return
						}
						mu.Lock()
						unknown++
						mu.Unlock()
						continue
					}
					mu.Lock()
					acked[w] = append(acked[w], ack{rows[0].ID, content})
					if sent.After(lastAck) {
						lastAck, lastAckAt = sent, time.Now()
					}
					mu.Unlock()
				}
			}()
		}
		time.Sleep(time.Duration(20+rand.IntN(150)) * time.Millisecond)
		pid, held := homestore.LockHolder(home)
		if !held {
			log, _ := os.ReadFile(homestore.LogPath(home))
			t.Fatalf("round %d: no store process holds the lock (pid file %d, alive: %v); log:\n%s", round, pid, syscall.Kill(pid, 0) == nil, log)
		}
		killed := time.Now()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// Let the writers reach the new process before the round ends.
		for {
			mu.Lock()
			back := lastAck.After(killed)
			mu.Unlock()
			if back {
				break
			}
			if time.Since(killed) > 20*time.Second {
				t.Fatalf("round %d: no write acknowledged within 20s of the kill", round)
			}
			time.Sleep(5 * time.Millisecond)
		}
		mu.Lock()
		if gap := lastAckAt.Sub(killed); gap > worst {
			worst = gap
		}
		mu.Unlock()
		close(stop)
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	total := 0
	for w := range writers {
		sid := fmt.Sprintf("w%d", w)
		got, err := clients[0].Rows(ctx, sid, store.RowQuery{})
		if err != nil {
			t.Fatal(err)
		}
		byID := map[uint64]string{}
		for _, r := range got {
			byID[r.ID] = r.Content
		}
		for _, a := range acked[w] {
			if c, ok := byID[a.id]; !ok || c != a.content {
				t.Fatalf("%s: acknowledged row %d (%.30q) lost or changed: %.30q", sid, a.id, a.content, c)
			}
		}
		total += len(acked[w])
	}
	t.Logf("%d rounds: %d acknowledged appends all present; %d failed as unavailable; longest kill-to-next-ack %v",
		rounds, total, unknown, worst)
}

// TestHomeRemoved: a store process whose home is deleted under it (a test's temporary home, a
// user's rm -rf) exits instead of retrying to write into a directory that is gone.
func TestHomeRemoved(t *testing.T) {
	home := shortHome(t)
	stopServer(t, home)
	c := dialStart(t, home, starter(t, home))
	ctx := context.Background()
	if _, err := c.CreateSession(ctx, store.Session{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	pid := status(t, c).PID
	_ = c.Close()
	if err := os.RemoveAll(home); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
}
