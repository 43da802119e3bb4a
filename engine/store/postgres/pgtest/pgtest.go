// Package pgtest runs a private PostgreSQL cluster for tests: initdb into a temporary directory,
// one postgres server on a free 127.0.0.1 port owned by the test process, a fresh database per
// test, and everything removed when the package's tests end. A package starts one cluster for
// its whole run from TestMain (Main); tests take databases from it (DB).
//
// Without PostgreSQL binaries the tests that need a database skip, unless HERMES_PG=required,
// which makes them fail instead (CI sets it, so a missing install never passes silently). The
// binaries are found through HERMES_PG_BIN (a directory), then initdb on PATH, then the newest
// /usr/lib/postgresql/*/bin. initdb refuses to run as root, so a root process runs the cluster
// as the postgres user (or HERMES_PG_USER) and hands it the temporary directory.
//
// A multi-node fault harness controls a cluster of its own: Start, CreateDB for the URL it gives
// every node, then Kill (immediate shutdown; the next start runs crash recovery) or Stop (clean)
// and Start again, or Restart. The port stays the same across restarts, so the nodes' URLs stay
// valid and their reconnects are what is tested. The server is a child of the test process
// (on Linux it gets SIGINT if that process dies), so no cluster outlives the run.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Required reports whether HERMES_PG=required: a missing PostgreSQL is then a failure.
func Required() bool { return os.Getenv("HERMES_PG") == "required" }

// Cluster is a private PostgreSQL cluster: a data directory and, while it runs, one postgres
// server process owned by this process.
type Cluster struct {
	bin     string // directory holding initdb and postgres
	dir     string // temporary directory: data/, socket/, log
	port    int
	account *account // the user the server runs as; nil for the current one

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for

	dbs atomic.Int64
}

// FindBin returns the directory holding initdb and postgres, or an error saying where it looked.
func FindBin() (string, error) {
	var tried []string
	ok := func(dir string) bool {
		tried = append(tried, dir)
		for _, b := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	if d := os.Getenv("HERMES_PG_BIN"); d != "" {
		if ok(d) {
			return d, nil
		}
		return "", fmt.Errorf("HERMES_PG_BIN=%s holds no initdb and postgres", d)
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		// Debian links initdb into PATH but not postgres: follow the link to the real directory.
		if real, err := filepath.EvalSymlinks(p); err == nil && ok(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	for _, d := range dirs {
		if ok(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("no PostgreSQL binaries (initdb, postgres) found; looked in HERMES_PG_BIN, PATH and %s",
		strings.Join(append(tried, "/usr/lib/postgresql/*/bin"), ", "))
}

func versionOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// Start initialises a cluster in a new temporary directory and starts its server.
func Start() (*Cluster, error) {
	bin, err := FindBin()
	if err != nil {
		return nil, err
	}
	acct, err := serverAccount()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "hermes-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, dir: dir, account: acct}
	if err := c.init(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := c.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

func (c *Cluster) init() error {
	if err := os.MkdirAll(filepath.Join(c.dir, "socket"), 0o700); err != nil {
		return err
	}
	if err := c.account.own(c.dir); err != nil {
		return err
	}
	// --no-sync only skips flushing the initial files; the running server keeps fsync on, so
	// what tests and benchmarks measure is a durable commit.
	out, err := c.command(filepath.Join(c.bin, "initdb"), "-D", c.data(), "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync").CombinedOutput()
	if err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	return nil
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	c.account.apply(cmd)
	return cmd
}

// Start starts the server (again, after Stop or Kill) on the cluster's port and waits until it
// accepts connections. The first start picks a free port; restarts keep it, so URLs handed out
// before stay valid.
func (c *Cluster) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd != nil {
		return errors.New("pgtest: server already running")
	}
	if c.port == 0 {
		p, err := freePort()
		if err != nil {
			return err
		}
		c.port = p
	}
	logf, err := os.OpenFile(filepath.Join(c.dir, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := c.command(filepath.Join(c.bin, "postgres"), "-D", c.data(),
		"-p", strconv.Itoa(c.port), "-k", filepath.Join(c.dir, "socket"),
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300",
		"-c", "shared_buffers=64MB", "-c", "log_min_messages=warning")
	cmd.Stdout, cmd.Stderr = logf, logf
	serverProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	c.cmd, c.done = cmd, done
	if err := c.waitReady(done); err != nil {
		_ = cmd.Process.Kill()
		<-done
		c.cmd, c.done = nil, nil
		return fmt.Errorf("%w\n%s", err, c.logTail())
	}
	return nil
}

func (c *Cluster) waitReady(exited <-chan struct{}) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err == nil {
			err = conn.Ping(ctx)
			_ = conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("postgres exited during start")
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready after 60s: %v", err)
		}
	}
}

func (c *Cluster) logTail() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Stop shuts the server down cleanly (SIGINT, PostgreSQL's fast shutdown: clients are
// disconnected, everything committed is on disk) and waits for it.
func (c *Cluster) Stop() error { return c.signal(sigFast) }

// Kill stops the server without a shutdown checkpoint (SIGQUIT, PostgreSQL's immediate
// shutdown, as after a crash): clients are cut off and the next Start runs crash recovery.
func (c *Cluster) Kill() error { return c.signal(sigImmediate) }

// Restart is Stop (or Kill, when immediate) then Start on the same port.
func (c *Cluster) Restart(immediate bool) error {
	stop := c.Stop
	if immediate {
		stop = c.Kill
	}
	if err := stop(); err != nil {
		return err
	}
	return c.Start()
}

func (c *Cluster) signal(how stopSignal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return nil
	}
	if err := how.send(c.cmd); err != nil {
		return err
	}
	select {
	case <-c.done:
	case <-time.After(60 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	c.cmd, c.done = nil, nil
	return nil
}

// Close stops the server and removes the cluster's directory.
func (c *Cluster) Close() error {
	err := c.Stop()
	if e := os.RemoveAll(c.dir); e != nil && err == nil {
		err = e
	}
	return err
}

// URL returns a connection URL for database db over TCP.
func (c *Cluster) URL(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// CreateDB creates a new, empty database and returns its URL.
func (c *Cluster) CreateDB(ctx context.Context) (string, error) {
	name := fmt.Sprintf("t%d_%d", os.Getpid(), c.dbs.Add(1))
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return c.URL(name), nil
}

// DropDB drops a database made by CreateDB, disconnecting whoever still uses it.
func (c *Cluster) DropDB(ctx context.Context, dbURL string) error {
	u, err := url.Parse(dbURL)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()+" WITH (FORCE)")
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// shared is the cluster Main started for the package's tests, or why there is none.
var shared struct {
	c   *Cluster
	err error
}

// Main runs a package's tests with one private cluster shared by all of them, and removes it
// afterwards. Call it from TestMain. When the cluster cannot start, tests calling DB skip (or
// fail, with HERMES_PG=required).
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	shared.c, shared.err = Start()
	if shared.c != nil {
		defer func() {
			if err := shared.c.Close(); err != nil {
				fmt.Fprintln(os.Stderr, "pgtest: stopping the cluster:", err)
			}
		}()
	}
	return m.Run()
}

// Shared returns the cluster Main started, skipping (or failing, with HERMES_PG=required) t
// when there is none.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	if shared.c == nil {
		err := shared.err
		if err == nil {
			err = errors.New("pgtest.Main did not run (call it from TestMain)")
		}
		if Required() {
			t.Fatalf("PostgreSQL required (HERMES_PG=required): %v", err)
		}
		t.Skipf("no PostgreSQL: %v", err)
	}
	return shared.c
}

// DB returns the URL of a new database on the shared cluster, dropped when t ends.
func DB(t testing.TB) string {
	t.Helper()
	c := Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	u, err := c.CreateDB(ctx)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := c.DropDB(ctx, u); err != nil {
			t.Errorf("pgtest: drop database: %v", err)
		}
	})
	return u
}

// account is a user other than the current one that runs the server.
type account struct {
	uid, gid uint32
}

// serverAccount returns the account to run the server as: nil unless this process is root, then
// HERMES_PG_USER or postgres.
func serverAccount() (*account, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	name := os.Getenv("HERMES_PG_USER")
	if name == "" {
		name = "postgres"
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("running as root, and initdb refuses root: no user %q to run PostgreSQL as (set HERMES_PG_USER): %v", name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user %q: uid %q gid %q", name, u.Uid, u.Gid)
	}
	return &account{uid: uint32(uid), gid: uint32(gid)}, nil
}

// own hands dir and everything in it to the account.
func (a *account) own(dir string) error {
	if a == nil {
		return nil
	}
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(a.uid), int(a.gid))
	})
}
