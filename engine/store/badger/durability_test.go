package badgerstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/hermes-go/hermes/engine/store"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
)

const (
	durabilityWriters = 6
	durabilityKillAt  = 300 // acknowledgements seen before the child is killed
)

// durableContent is the content of the n-th row a writer appends. Every tenth row is large enough
// to live in badger's value log rather than inline, so both write paths are covered.
func durableContent(sid string, n int) string {
	size := 40 + n%200
	if n%10 == 9 {
		size = 20 << 10
	}
	head := fmt.Sprintf("%s#%d:", sid, n)
	return head + strings.Repeat(string(rune('a'+n%26)), size)
}

// TestDurabilityChild appends rows from several goroutines until it is killed, printing each
// row's id only after AppendRows has returned it.
func TestDurabilityChild(t *testing.T) {
	if os.Getenv(envChildRole) != "durability" {
		t.Skip("helper process for TestDurability")
	}
	fail := func(err error) {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	s, err := badgerstore.Open(os.Getenv(envChildDir), badgerstore.DefaultOptions())
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	var out sync.Mutex
	var wg sync.WaitGroup
	for g := range durabilityWriters {
		sid := fmt.Sprintf("w%d", g)
		if _, err := s.CreateSession(ctx, store.Session{ID: sid}); err != nil {
			fail(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Bounded so that a parent that never kills us cannot leave us running forever.
			for n := range 100_000 {
				rows, err := s.AppendRows(ctx, sid, store.Fence{}, []store.Row{{Role: "user", Content: durableContent(sid, n)}})
				if err != nil {
					fail(err)
				}
				out.Lock()
				fmt.Printf("ack %s %d %d\n", sid, n, rows[0].ID)
				out.Unlock()
			}
		}()
	}
	wg.Wait()
	_ = s.Close()
}

type ack struct {
	sid string
	n   int
	id  uint64
}

func parseAck(line string) (ack, bool) {
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != "ack" {
		return ack{}, false
	}
	n, err1 := strconv.Atoi(f[2])
	id, err2 := strconv.ParseUint(f[3], 10, 64)
	return ack{sid: f[1], n: n, id: id}, err1 == nil && err2 == nil
}

// TestDurability kills a writing child process with SIGKILL and checks that every row it had
// acknowledged is in the store, intact, when the store is opened again.
func TestDurability(t *testing.T) {
	dir := t.TempDir()
	cmd := childCommand(t, "TestDurabilityChild", "durability", dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acks []ack
	var other []string
	killed := false
	r := bufio.NewReader(stdout)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			// A line cut short by the kill was never fully acknowledged; ignore the fragment.
			if !errors.Is(err, io.EOF) {
				t.Errorf("reading child output: %v", err)
			}
			break
		}
		a, ok := parseAck(line)
		if !ok {
			other = append(other, strings.TrimSpace(line))
			continue
		}
		acks = append(acks, a)
		if len(acks) == durabilityKillAt && !killed {
			// Keep reading after the kill: rows acknowledged before the signal landed count too.
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatalf("kill child: %v", err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("child ended after %d acknowledgements without being killed (%v); output: %q", len(acks), err, other)
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		t.Fatalf("child did not die from the kill: %v", err)
	}
	if ws, ok := exitErr.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child exit status %v, want killed by SIGKILL", err)
	}

	s := openDir(t, dir)
	defer s.Close()
	ctx := context.Background()
	stored := map[uint64]store.Row{}
	var maxID uint64
	for g := range durabilityWriters {
		sid := fmt.Sprintf("w%d", g)
		rows, err := s.Rows(ctx, sid, store.RowQuery{})
		if err != nil {
			t.Fatalf("Rows(%s) after kill: %v", sid, err)
		}
		sess, err := s.GetSession(ctx, sid)
		if err != nil {
			t.Fatalf("GetSession(%s) after kill: %v", sid, err)
		}
		if sess.RowCount != int64(len(rows)) {
			t.Errorf("%s: RowCount %d but %d rows: session and rows were not written together", sid, sess.RowCount, len(rows))
		}
		for _, r := range rows {
			stored[r.ID] = r
			maxID = max(maxID, r.ID)
		}
	}
	lastN := map[string]int{}
	for _, a := range acks {
		r, ok := stored[a.id]
		if !ok {
			t.Fatalf("acknowledged row %d (%s #%d) is missing after the kill (%d acks, %d rows stored)", a.id, a.sid, a.n, len(acks), len(stored))
		}
		if r.SessionID != a.sid || r.Content != durableContent(a.sid, a.n) || !r.Active || r.Role != "user" {
			t.Fatalf("acknowledged row %d came back damaged: session %q, %d bytes of content", a.id, r.SessionID, len(r.Content))
		}
		if prev, seen := lastN[a.sid]; seen && a.n != prev+1 {
			t.Fatalf("%s acknowledged #%d after #%d", a.sid, a.n, prev)
		}
		lastN[a.sid] = a.n
	}
	// The store is usable after the crash and never reissues an id it handed out before it.
	more, err := s.AppendRows(ctx, "w0", store.Fence{}, []store.Row{{Role: "user", Content: "after the crash"}})
	if err != nil {
		t.Fatalf("append after the crash: %v", err)
	}
	if more[0].ID <= maxID {
		t.Fatalf("row id %d issued after the crash, but %d was already stored", more[0].ID, maxID)
	}
	t.Logf("%d acknowledged rows verified, %d rows stored", len(acks), len(stored))
}
