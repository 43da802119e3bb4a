package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// cliDriver runs the build under test as a command, once per step: the surface of `hermes
// run SCRIPT --json` (every engine event of the script's sessions as a JSON line) and of
// commands that must refuse to start.
//
// A client frame is {"args": [...], "env": {"NAME": "value"}, "stdin": "..."}; the command
// runs in the fixture's working directory with its HERMES_HOME, model and policy, plus env
// ("" unsets a variable). Each JSON line it prints on stdout is a frame (a line that is not
// JSON becomes {"stdout": line}), and the last frame is {"exit": code, "stderr": [lines]},
// which answers the step. A command still running after a minute is killed ("exit": -1).
type cliDriver struct{}

func (cliDriver) Name() string     { return "cli" }
func (cliDriver) Dialect() Dialect { return cliDialect{} }

func (cliDriver) Start(env Env) (Server, error) { return &cliServer{env: env}, nil }

type cliServer struct{ env Env }

func (s *cliServer) Connect() (Conn, error) { return &cliConn{env: s.env}, nil }
func (s *cliServer) Close() error           { return nil }

// cliCommand is a client frame of the cli transport.
type cliCommand struct {
	Args  []string          `json:"args"`
	Env   map[string]string `json:"env,omitempty"`
	Stdin string            `json:"stdin,omitempty"`
}

// commandTimeout bounds one command.
const commandTimeout = 60 * time.Second

// cliConn runs each command to its end in Send and queues what it printed.
type cliConn struct {
	env    Env
	frames [][]byte
}

func (c *cliConn) Send(frame []byte) error {
	var cmd cliCommand
	if err := json.Unmarshal(frame, &cmd); err != nil {
		return fmt.Errorf("cli frame: %w", err)
	}
	if len(cmd.Args) == 0 {
		return errors.New(`cli frame: needs "args"`)
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	x := exec.CommandContext(ctx, c.env.Binary, cmd.Args...)
	x.Dir = c.env.Dir
	x.Env = withEnv(append(os.Environ(), c.env.Vars...), cmd.Env)
	x.Stdin = strings.NewReader(cmd.Stdin)
	var stdout, stderr bytes.Buffer
	x.Stdout, x.Stderr = &stdout, &stderr
	err := x.Run()
	code := 0
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		code = -1
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		return fmt.Errorf("run %s: %w", strings.Join(cmd.Args, " "), err)
	}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if json.Valid(line) && bytes.HasPrefix(bytes.TrimSpace(line), []byte("{")) {
			c.frames = append(c.frames, append([]byte(nil), line...))
			continue
		}
		b, _ := json.Marshal(map[string]string{"stdout": string(line)})
		c.frames = append(c.frames, b)
	}
	errLines := []string{}
	for _, l := range strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n") {
		if l != "" {
			errLines = append(errLines, l)
		}
	}
	b, _ := json.Marshal(map[string]any{"exit": code, "stderr": errLines})
	c.frames = append(c.frames, b)
	return nil
}

// withEnv applies set to a KEY=VALUE list: later entries win, "" removes the variable.
func withEnv(base []string, set map[string]string) []string {
	if len(set) == 0 {
		return base
	}
	var out []string
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			out = append(out, kv)
		}
	}
	for k, v := range set {
		if v != "" {
			out = append(out, k+"="+v)
		}
	}
	return out
}

func (c *cliConn) Recv(ctx context.Context) ([]byte, error) {
	if len(c.frames) == 0 {
		return nil, errNothingPending
	}
	f := c.frames[0]
	c.frames = c.frames[1:]
	return f, nil
}

func (c *cliConn) Close() error { return nil }

// cliDialect reads cli frames: the exit frame answers the command (a failure when non-zero);
// events are the engine's, named by "type".
type cliDialect struct{}

func (cliDialect) Reply([]byte) func(map[string]any) (bool, bool) {
	return func(m map[string]any) (bool, bool) {
		code, ok := m["exit"].(float64)
		return ok, ok && code != 0
	}
}

func (cliDialect) ReplyTo(json.RawMessage) func(map[string]any) bool { return nil }

func (d cliDialect) Until(m map[string]any, name string) bool { return d.Event(m) == name }

func (cliDialect) Event(m map[string]any) string {
	t, _ := m["type"].(string)
	return t
}

func (cliDialect) ServerRequest(map[string]any) (any, bool) { return nil, false }

func (cliDialect) Answer(any, json.RawMessage) ([]byte, error) { return nil, ErrNoServerRequests }
