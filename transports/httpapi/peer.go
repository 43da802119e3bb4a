package httpapi

import (
	"net"
	"syscall"
)

// peerClosedFunc returns a check of whether the client closed its end of c (peerClosed on
// the socket under c), or nil when c has no socket to look at or the platform offers no such
// look (peer_other.go): a stream over it notices a gone client only when a write fails.
func peerClosedFunc(c net.Conn) func() bool {
	for c != nil {
		switch v := c.(type) {
		case *limitConn:
			c = v.Conn
			continue
		case interface{ NetConn() net.Conn }: // *tls.Conn: its socket carries the records
			c = v.NetConn()
			continue
		}
		break
	}
	sc, ok := c.(syscall.Conn)
	if !ok || !canPeek {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return func() bool { return peerClosed(rc) }
}
