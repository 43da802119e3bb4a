//go:build unix

package pgtest

import (
	"os/exec"
	"syscall"
)

type stopSignal syscall.Signal

// PostgreSQL's shutdown modes, by the signal its postmaster takes.
const (
	sigFast      = stopSignal(syscall.SIGINT)
	sigImmediate = stopSignal(syscall.SIGQUIT)
)

func (s stopSignal) send(cmd *exec.Cmd) error { return cmd.Process.Signal(syscall.Signal(s)) }

// apply runs cmd as the account.
func (a *account) apply(cmd *exec.Cmd) {
	if a == nil {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: a.uid, Gid: a.gid}
}
