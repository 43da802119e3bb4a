//go:build linux || darwin

package cli

import "syscall"

// raiseOpenFiles raises the soft limit on open files to the hard limit, so a server holding
// many connections is bounded by its own connection cap rather than by a low default, and
// reports the soft limit in force (0 when unknown).
func raiseOpenFiles() (soft uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = raised.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			return uint64(lim.Cur), err
		}
		lim = raised
	}
	return uint64(lim.Cur), nil
}
