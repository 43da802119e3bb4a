//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package httpapi

import "syscall"

// canPeek is false: this platform has no peek at a socket here, so a stream notices a gone
// client only when a write fails.
const canPeek = false

func peerClosed(syscall.RawConn) bool { return false }
