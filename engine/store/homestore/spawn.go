package homestore

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// Spawn starts exe with args as the detached store process of home: in a session of its own (a
// terminal's hangup or Ctrl-C does not reach it), in the root directory (so it pins no mount;
// give it absolute paths), with this process's environment plus env, stdin from /dev/null,
// stdout and stderr appended to the home's log. It returns once the process has started; the
// caller then dials.
// A goroutine waits for the process so that it is reaped when it exits (its owner is this
// process; it ends when the store process does).
func Spawn(home string, env []string, exe string, args ...string) error {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	logf, err := os.OpenFile(LogPath(home), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open the store log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = "/"
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", exe, err)
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
