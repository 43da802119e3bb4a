package builtin

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"
)

// drainGrace is how long output is still collected after the shell exits. Something it left
// running in the background (`server &`) may hold the output pipe open for ever; after this
// grace the pipe is closed so the call can return.
const drainGrace = 500 * time.Millisecond

// proc is one running shell command in its own process group. Two goroutines serve it: the
// reader copies the combined stdout+stderr pipe into out (and tee), and the waiter reaps the
// shell, lets the reader drain, records the exit status and closes done. The waiter owns the
// reader; whoever starts a proc owns the waiter and must receive from done (directly, or
// through stop).
type proc struct {
	cmd      *exec.Cmd
	pipe     *os.File
	done     chan struct{}
	exitCode int         // valid once done is closed
	drained  atomic.Bool // the pipe reached EOF: nothing in the group holds it any more
	stopMu   sync.Mutex
}

// startProc runs `shell -c command` in dir with the environment env (KEY=VALUE entries; nil
// is an empty environment, never the inherited one). Output goes to out and, when tee is
// non-nil, to tee as well; both see the two streams interleaved in write order because they
// share one pipe.
func startProc(shell, command, dir string, env []string, out io.Writer, tee io.Writer) (*proc, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(shell, "-c", command)
	cmd.Dir = dir
	cmd.Env = env
	if cmd.Env == nil {
		cmd.Env = []string{} // a nil Env would inherit Hermes' whole environment
	}
	cmd.Stdout = pw // an *os.File is handed to the child as is: no copying goroutine in exec
	cmd.Stderr = pw
	ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, err
	}
	pw.Close() // the child holds its own copy; ours would keep the pipe from ever reaching EOF
	p := &proc{cmd: cmd, pipe: pr, done: make(chan struct{})}
	w := out
	if tee != nil {
		w = io.MultiWriter(out, tee)
	}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		_, err := io.Copy(w, pr)
		if err == nil {
			p.drained.Store(true)
		}
	}()
	go func() {
		defer close(p.done)
		_ = cmd.Wait() // the status is in ProcessState; the error only restates it
		timer := time.NewTimer(drainGrace)
		select {
		case <-readerDone:
		case <-timer.C:
			pr.Close() // unblocks the reader's Read
			<-readerDone
		}
		timer.Stop()
		pr.Close()
		p.exitCode = exitStatus(cmd.ProcessState)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop ends the whole process group: SIGTERM, then SIGKILL after grace (or as soon as the shell
// is gone, to reach children that ignored SIGTERM). It returns once the shell has been reaped
// and its output collected, so after stop no goroutine of p is left.
func (p *proc) stop(grace time.Duration) error {
	p.stopMu.Lock()
	defer p.stopMu.Unlock()
	select {
	case <-p.done:
		if p.drained.Load() {
			// The shell is reaped and nothing holds its output pipe: the group is most
			// likely empty, and its id may be reused, so signalling it is not safe.
			return nil
		}
	default:
	}
	errTerm := terminateGroup(p.cmd.Process)
	timer := time.NewTimer(grace)
	select {
	case <-p.done:
	case <-timer.C:
	}
	timer.Stop()
	errKill := killGroup(p.cmd.Process)
	<-p.done
	return errors.Join(errTerm, errKill)
}

// exited reports whether the process has exited, and its status when it has.
func (p *proc) exited() (code int, ok bool) {
	select {
	case <-p.done:
		return p.exitCode, true
	default:
		return 0, false
	}
}
