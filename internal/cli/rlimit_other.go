//go:build !(linux || darwin)

package cli

// raiseOpenFiles does nothing where the open-file limit is not an rlimit the process can
// raise; 0 means the limit is unknown.
func raiseOpenFiles() (soft uint64, err error) { return 0, nil }
