package engine

import (
	"testing"
	"time"
)

// A write whose wall-clock budget was spent before it could try again (its process was
// stopped with the write in flight, and continued past storeTimeout) still makes
// minStoreAttempts attempts in all, then gives up; one within its budget goes on.
func TestWriteRetryCountsAttempts(t *testing.T) {
	spent := &writeRetry{deadline: time.Now().Add(-time.Minute), wait: time.Microsecond}
	for i := 1; i < minStoreAttempts; i++ {
		if !spent.again() {
			t.Fatalf("gave up after %d attempts with its budget spent while stopped; want %d", i, minStoreAttempts)
		}
	}
	if spent.again() {
		t.Fatalf("tried a %dth time past its deadline", minStoreAttempts+1)
	}
	fresh := &writeRetry{deadline: time.Now().Add(time.Hour), wait: time.Microsecond}
	for i := range 2 * minStoreAttempts {
		if !fresh.again() {
			t.Fatalf("gave up after %d attempts within its budget", i+1)
		}
	}
}
