//go:build !linux

package homestore

import (
	"net"
	"os"
)

// peerUID cannot read the peer's credentials here (SO_PEERCRED is Linux's); the socket's mode
// (0600, inside the owner-only home) is then what keeps other users out.
func peerUID(*net.UnixConn) (uid, pid int, err error) { return os.Getuid(), 0, nil }
