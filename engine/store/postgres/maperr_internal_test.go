package postgres

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/hermes-go/hermes/engine/store"
)

// A connection that failed is the store's "unavailable, retry"; an answer this process could
// not read (a scan error, a defect) is not: retrying would not help, and a 503 would hide it.
func TestMapErrScanIsNotAnOutage(t *testing.T) {
	scan := pgx.ScanArgError{ColumnIndex: 1, FieldName: "expires_at", Err: errors.New("cannot scan NULL into *time.Time")}
	if err := mapErr(fmt.Errorf("read lease: %w", scan)); errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a scan error mapped to %v", err)
	}
	if err := mapErr(io.ErrUnexpectedEOF); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a cut connection mapped to %v", err)
	}
}
