package store

import "context"

// Problem is one stored record a store cannot serve as written: it does not decode, or its
// content disagrees with the key it is stored under.
type Problem struct {
	Kind   string // session | row | lease
	Key    string // the record's key, as stored (raw bytes; quote it before printing)
	Reason string
	// MovedTo is where a quarantine put the record; empty when it was only reported.
	MovedTo string
}

// Doctor is an optional Store ability, found by type assertion: it scans the store for
// records it cannot serve and, with quarantine set, moves each one under a key no listing or
// lookup reads. Nothing is deleted: a quarantined record keeps its bytes for inspection.
// Listings skip such records anyway; quarantining keeps them from being reported again.
type Doctor interface {
	Doctor(ctx context.Context, quarantine bool) ([]Problem, error)
}
