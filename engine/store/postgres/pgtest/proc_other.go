//go:build !linux

package pgtest

import "os/exec"

// serverProcAttr: only Linux can tie the server's life to this process; elsewhere Close stops it.
func serverProcAttr(*exec.Cmd) {}
