//go:build !unix

package pgtest

import "os/exec"

// Without POSIX signals both shutdowns are a kill; the next start runs crash recovery.
type stopSignal int

const (
	sigFast stopSignal = iota
	sigImmediate
)

func (stopSignal) send(cmd *exec.Cmd) error { return cmd.Process.Kill() }

func (*account) apply(*exec.Cmd) {}
