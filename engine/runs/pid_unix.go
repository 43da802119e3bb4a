//go:build unix

package runs

import (
	"errors"
	"syscall"
)

// pidExists reports whether a process with this id exists on this host.
func pidExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
