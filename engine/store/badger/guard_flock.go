package badgerstore

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"

	"github.com/hermes-go/hermes/engine/store"
)

// Table options shared by Open and checkTables; the check must parse tables exactly the way
// badger will.
const (
	tableCompression = options.Snappy
	tableBlockSize   = 4 << 10
)

// checkTables parses the index of every table file in dir before badger sees it. badger opens
// tables on goroutines of its own, where a damaged file panics (taking the whole process down,
// beyond any recover of ours) or fails its index checksum (and is then silently skipped, losing
// its rows). Parsing here, on our goroutine, turns both into store.ErrCorrupt. Only the index and
// the last block of each table are read, through a read-only mapping, so this stays cheap.
func checkTables(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read store directory: %w", err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".sst") {
			continue
		}
		if err := checkTable(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("%w: %v", store.ErrCorrupt, err)
		}
	}
	return nil
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
