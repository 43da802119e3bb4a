//go:build unix

package mcptool

import (
	"errors"
	"os/exec"
	"syscall"
)

// ownGroup starts a server in a new process group whose id is its pid, so shutting it down
// also reaches what it spawned (npx and wrapper scripts start the real server as a child).
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills what is left of the group led by pid. A group already gone is not an error.
func killGroup(pid int) error {
	if pid <= 0 {
		return nil
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
