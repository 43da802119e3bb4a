package homestore

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
)

// File names inside a home.
const (
	SocketName = "store.sock"
	LockName   = "store.lock"
	LogName    = "store.log"
)

// SocketPath is the store process's socket in home.
func SocketPath(home string) string { return filepath.Join(home, SocketName) }

// LockPath is the lock file that keeps a home to one store process; it holds the process id.
func LockPath(home string) string { return filepath.Join(home, LockName) }

// LogPath is where the store process of home logs.
func LogPath(home string) string { return filepath.Join(home, LogName) }

// maxSunPath is the longest socket path the kernel takes (sun_path is 108 bytes with its NUL).
const maxSunPath = 107

// withAddr calls fn with an address for the socket at path. A path too long for a unix socket
// address is reached through this process's descriptor of its directory (/proc/self/fd/N/name),
// which Linux resolves like the directory itself; homes in deep temporary directories need it.
func withAddr(path string, fn func(addr string) error) error {
	if len(path) <= maxSunPath {
		return fn(path)
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	addr := "/proc/self/fd/" + strconv.Itoa(int(dir.Fd())) + "/" + filepath.Base(path)
	if len(addr) > maxSunPath {
		return fmt.Errorf("socket path %s is too long for a unix socket", path)
	}
	return fn(addr)
}

// dialSocket connects to the socket at path.
func dialSocket(path string) (*net.UnixConn, error) {
	var c *net.UnixConn
	err := withAddr(path, func(addr string) error {
		var err error
		c, err = net.DialUnix("unix", nil, &net.UnixAddr{Name: addr, Net: "unix"})
		return err
	})
	return c, err
}
