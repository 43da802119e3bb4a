//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package httpapi

import (
	"errors"
	"syscall"
)

const canPeek = true

// peerClosed reports whether the peer of the socket rc closed the connection: a non-blocking
// peek at one byte (MSG_PEEK reads nothing away) finds the end of the stream, or the
// connection was reset. Bytes waiting to be read (a pipelined request, a TLS alert), nothing
// to read yet, and a socket that cannot be looked at (closed already) count as open.
func peerClosed(rc syscall.RawConn) bool {
	closed := false
	// Control, not Read: it neither waits for a read lock nor fails on a passed read deadline
	// (the request's header timeout), and the socket is non-blocking anyway.
	err := rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = (err == nil && n == 0) || errors.Is(err, syscall.ECONNRESET)
	})
	return err == nil && closed
}
