package badgerstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/hermes-go/hermes/engine/store"
	badgerstore "github.com/hermes-go/hermes/engine/store/badger"
)

// Child processes are this test binary re-executed with one helper test selected; the role and
// the directory travel in the environment.
const (
	envChildRole = "HERMES_STORE_TEST_CHILD"
	envChildDir  = "HERMES_STORE_TEST_DIR"
)

// childCommand re-executes the test binary to run the helper test name as role in dir.
func childCommand(t *testing.T, name, role, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.v=false")
	cmd.Env = append(os.Environ(), envChildRole+"="+role, envChildDir+"="+dir)
	cmd.Stderr = os.Stderr
	return cmd
}

// seeded returns the directory of a closed store holding one session with a few rows, flushed
// into at least one table file.
func seeded(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s := openDir(t, dir)
	ctx := context.Background()
	if _, err := s.CreateSession(ctx, store.Session{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := s.AppendRows(ctx, "a", store.Fence{}, []store.Row{{Role: "user", Content: fmt.Sprint("row ", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestOpenLockedInProcess(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir)
	defer s.Close()
	_, err := badgerstore.Open(dir, badgerstore.DefaultOptions())
	if !errors.Is(err, store.ErrLocked) {
		t.Fatalf("second Open: got %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), dir) {
		t.Fatalf("lock error %q does not name the directory %s", err, dir)
	}
	// The lock is the one badger itself takes, so a plain badger process is kept out too.
	if db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil)); err == nil {
		_ = db.Close()
		t.Fatal("plain badger opened a directory the store holds")
	}
	// The failed Opens must not have disturbed the first one.
	if _, err := s.CreateSession(context.Background(), store.Session{ID: "still-works"}); err != nil {
		t.Fatalf("first store after a refused second Open: %v", err)
	}
}

// TestLockHolderChild holds a store open in a child process until its stdin closes.
func TestLockHolderChild(t *testing.T) {
	if os.Getenv(envChildRole) != "lock" {
		t.Skip("helper process for TestOpenLockedByOtherProcess")
	}
	s, err := badgerstore.Open(os.Getenv(envChildDir), badgerstore.DefaultOptions())
	if err != nil {
		fmt.Println("open failed:", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := s.Close(); err != nil {
		os.Exit(3)
	}
}

func TestOpenLockedByOtherProcess(t *testing.T) {
	dir := t.TempDir()
	cmd := childCommand(t, "TestLockHolderChild", "lock", dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("child did not open the store: %q, %v", line, err)
	}

	_, err = badgerstore.Open(dir, badgerstore.DefaultOptions())
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Errorf("Open while another process holds the store: got %v, want ErrLocked naming %s", err, dir)
	}

	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	s := openDir(t, dir) // released with the child's Close
	_ = s.Close()
}

func TestOpenRefusesForeignDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := badgerstore.Open(dir, badgerstore.DefaultOptions())
	if !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("Open of a directory with foreign files: got %v, want ErrCorrupt", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("refused Open left files behind: %v", entries)
	}
}

func TestOpenCorrupt(t *testing.T) {
	garbage := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*131 + 7)
		}
		return b
	}
	overwrite := func(pattern string, data func(old []byte) []byte) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			matches, _ := filepath.Glob(filepath.Join(dir, pattern))
			if len(matches) == 0 {
				t.Fatalf("seeded store has no %s file to damage", pattern)
			}
			for _, m := range matches {
				old, err := os.ReadFile(m)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(m, data(old), 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"manifest garbage", overwrite("MANIFEST", func(b []byte) []byte { return garbage(len(b)) })},
		{"manifest empty", overwrite("MANIFEST", func([]byte) []byte { return nil })},
		{"manifest truncated", overwrite("MANIFEST", func(b []byte) []byte { return b[:5] })},
		{"table garbage", overwrite("*.sst", func(b []byte) []byte { return garbage(len(b)) })},
		{"table truncated", overwrite("*.sst", func(b []byte) []byte { return b[:len(b)/2] })},
		{"table empty", overwrite("*.sst", func([]byte) []byte { return nil })},
		{"table tail flipped", overwrite("*.sst", func(b []byte) []byte {
			for i := len(b) - 64; i < len(b); i++ {
				b[i] ^= 0x5a
			}
			return b
		})},
		{"key registry garbage", overwrite("KEYREGISTRY", func(b []byte) []byte { return garbage(len(b)) })},
		{"value log garbage", overwrite("*.vlog", func(b []byte) []byte { return garbage(len(b)) })},
		{"manifest missing", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "MANIFEST")); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := seeded(t)
			c.damage(t, dir)
			s, err := badgerstore.Open(dir, badgerstore.DefaultOptions())
			if err == nil {
				_ = s.Close()
			}
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("Open after %s: got %v, want ErrCorrupt", c.name, err)
			}
		})
	}
}

// rawUpdate writes into a closed store's directory with badger directly, bypassing the store.
func rawUpdate(t *testing.T, dir string, fn func(txn *badger.Txn) error) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOpenFormat(t *testing.T) {
	setFormat := func(v string) func(*badger.Txn) error {
		return func(txn *badger.Txn) error { return txn.Set([]byte("meta/format"), []byte(v)) }
	}

	dir := seeded(t)
	rawUpdate(t, dir, setFormat("999"))
	_, err := badgerstore.Open(dir, badgerstore.DefaultOptions())
	if !errors.Is(err, store.ErrNewerFormat) {
		t.Fatalf("Open of a newer format: got %v, want ErrNewerFormat", err)
	}

	dir = seeded(t)
	rawUpdate(t, dir, setFormat("not a number"))
	_, err = badgerstore.Open(dir, badgerstore.DefaultOptions())
	if !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("Open with a garbled format marker: got %v, want ErrCorrupt", err)
	}

	dir = seeded(t)
	rawUpdate(t, dir, setFormat("1"))
	s := openDir(t, dir)
	if _, err := s.GetSession(context.Background(), "a"); err != nil {
		t.Fatalf("current format refused: %v", err)
	}
	_ = s.Close()

	// Some other program's badger database: it has data but no format marker.
	dir = t.TempDir()
	rawUpdate(t, dir, func(txn *badger.Txn) error { return txn.Set([]byte("user/1"), []byte("x")) })
	_, err = badgerstore.Open(dir, badgerstore.DefaultOptions())
	if !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("Open of a foreign badger database: got %v, want ErrCorrupt", err)
	}
}

func TestOpenCreatesPrivateDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "store")
	s := openDir(t, dir)
	defer s.Close()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		t.Fatalf("store directory mode %o, want 700", perm)
	}
	entries, _ := os.ReadDir(dir)
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Contains(names, "MANIFEST") {
		t.Fatalf("no MANIFEST in a new store: %v", names)
	}
}

// TestIdleMemory guards the small memory settings: badger's defaults reserve a 64 MiB memtable
// and a 256 MiB block cache, which an idle store has no use for.
func TestIdleMemory(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := openDir(t, t.TempDir())
	defer s.Close()
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("heap in use grew by %.1f MiB on open", float64(grown)/(1<<20))
	if grown > 48<<20 {
		t.Fatalf("an idle open store holds %.1f MiB of heap, want under 48 MiB", float64(grown)/(1<<20))
	}
}
