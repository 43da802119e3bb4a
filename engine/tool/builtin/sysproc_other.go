//go:build !unix

package builtin

import (
	"os"
	"os/exec"
)

// Without process groups only the shell itself can be stopped; its children may outlive it.

func ownGroup(*exec.Cmd) {}

func terminateGroup(*os.Process) error { return nil }

func killGroup(p *os.Process) error {
	if err := p.Kill(); err != nil && err != os.ErrProcessDone {
		return err
	}
	return nil
}

func exitStatus(ps *os.ProcessState) int { return ps.ExitCode() }
