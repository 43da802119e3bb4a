//go:build unix

package engine

import (
	"errors"
	"syscall"
)

// pidGone reports whether no process with this id exists on this host.
func pidGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
