package pgtest

import (
	"os/exec"
	"syscall"
)

// serverProcAttr makes the server stop (fast shutdown) if the test process dies without
// stopping it, so no cluster outlives the run that started it.
func serverProcAttr(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGINT
}
