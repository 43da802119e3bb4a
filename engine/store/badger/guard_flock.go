//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package badgerstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"

	"github.com/hermes-go/hermes/engine/store"
)

// checkTables parses the index of every table file in dir before badger sees it. badger opens
// tables on goroutines of its own, where a damaged file panics (taking the whole process down,
// beyond any recover of ours) or fails its index checksum (and is then silently skipped, losing
// its rows). Parsing here, on our goroutine, turns both into store.ErrCorrupt. Only the index and
// the last block of each table are read, through a read-only mapping, so this stays cheap.
//
// Only the tables the MANIFEST lists are checked: a process killed while writing a table (a
// memtable flush or a compaction) leaves a file the MANIFEST never got, often empty, which
// badger deletes when it opens.
func checkTables(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read store directory: %w", err)
	}
	listed := manifestTables(dir)
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".sst") {
			continue
		}
		if id, ok := table.ParseFileID(e.Name()); ok && listed != nil {
			if _, ok := listed[id]; !ok {
				continue
			}
		}
		if err := checkTable(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("%w: %v", store.ErrCorrupt, err)
		}
	}
	return nil
}

// manifestTables returns the ids of the tables dir's MANIFEST lists, or nil when it cannot be
// read (then every table is checked, and badger reports the manifest itself).
func manifestTables(dir string) map[uint64]badger.TableManifest {
	f, err := os.Open(filepath.Join(dir, "MANIFEST"))
	if err != nil {
		return nil
	}
	defer f.Close()
	mf, _, err := badger.ReplayManifestFile(f, 0, badger.DefaultOptions(dir))
	if err != nil {
		return nil
	}
	return mf.Tables
}

func checkTable(path string) (err error) {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() == 0 || fi.Size() > 1<<31 {
		return fmt.Errorf("table %s has implausible size %d", filepath.Base(path), fi.Size())
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("map table %s: %w", filepath.Base(path), err)
	}
	defer syscall.Munmap(data) //nolint:errcheck // read-only mapping; nothing to flush
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("table %s is damaged: %v", filepath.Base(path), firstLine(r))
		}
	}()
	// An in-memory table owns no file, so nothing inside badger will try to close, truncate or
	// delete ours; the mapping is released above.
	_, err = table.OpenInMemoryTable(data, 0, &table.Options{
		Compression: tableCompression,
		BlockSize:   tableBlockSize,
		ChkMode:     options.NoVerification,
	})
	if err != nil {
		return fmt.Errorf("table %s: %v", filepath.Base(path), err)
	}
	return nil
}

// firstLine keeps a recovered panic value readable: badger's table panics carry a hex dump.
func firstLine(v any) string {
	s := strings.TrimSpace(fmt.Sprint(v))
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "==") {
			return line
		}
	}
	return s
}

// dirLock is an exclusive flock on the store directory, held for the store's lifetime. It is the
// same lock badger takes (badger's own guard is then bypassed), so a plain badger process and
// this store still exclude each other; taking it ourselves lets Open check the table files while
// no other process can be writing them, and report a busy directory without parsing badger's
// error text.
type dirLock struct{ f *os.File }

// lockDir takes the directory lock, failing with store.ErrLocked when another process (or
// another Open in this one) holds it.
func lockDir(dir string) (*dirLock, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("open store directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", store.ErrLocked, dir)
		}
		return nil, fmt.Errorf("lock store directory %s: %w", dir, err)
	}
	return &dirLock{f: f}, nil
}

// release drops the lock; nil-safe.
func (l *dirLock) release() error {
	if l == nil {
		return nil
	}
	return l.f.Close()
}
