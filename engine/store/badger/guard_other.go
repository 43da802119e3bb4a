//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly)

package badgerstore

// On platforms without the flock and mmap calls guard_flock.go uses, badger's own directory
// guard takes the lock and table files are left for badger to check.

type dirLock struct{}

func lockDir(string) (*dirLock, error) { return nil, nil }

func (*dirLock) release() error { return nil }

func checkTables(string) error { return nil }
