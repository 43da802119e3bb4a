//go:build !unix

package mcptool

import "os/exec"

// Without process groups only the server process itself is stopped (by the transport); its
// children may outlive it.

func ownGroup(*exec.Cmd) {}

func killGroup(int) error { return nil }
