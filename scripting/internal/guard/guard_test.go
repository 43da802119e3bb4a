package guard

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

type fakeVM chan error

func (f fakeVM) Interrupt(reason error) { f <- reason }

func TestDeadline(t *testing.T) {
	g := New(time.Millisecond, 0)
	defer g.Close()
	s := g.NewSlot()
	vm := make(fakeVM, 1)
	s.Begin(vm, context.Background(), time.Now().Add(-time.Second))
	if r := <-vm; !errors.Is(r, ErrTimeout) {
		t.Fatal(r)
	}
	if r := s.End(); !errors.Is(r, ErrTimeout) {
		t.Fatal(r)
	}
}

func TestCallerGone(t *testing.T) {
	g := New(time.Millisecond, 0)
	defer g.Close()
	s := g.NewSlot()
	vm := make(fakeVM, 1)
	cause := errors.New("turn interrupted")
	ctx, cancel := context.WithCancelCause(context.Background())
	s.Begin(vm, ctx, time.Time{})
	cancel(cause)
	if r := <-vm; r != cause {
		t.Fatal(r)
	}
	if r := s.End(); r != cause {
		t.Fatal(r)
	}
}

// TestFinishedRunNotInterrupted: a run that ended is never interrupted afterwards, and the next
// run of the same slot starts clean.
func TestFinishedRunNotInterrupted(t *testing.T) {
	g := New(time.Millisecond, 0)
	defer g.Close()
	s := g.NewSlot()
	vm := make(fakeVM, 1)
	ctx, cancel := context.WithCancel(context.Background())
	s.Begin(vm, ctx, time.Time{})
	if r := s.End(); r != nil {
		t.Fatal(r)
	}
	cancel() // the old run's context ends after the run
	s.Begin(vm, context.Background(), time.Now().Add(-time.Second))
	if r := <-vm; !errors.Is(r, ErrTimeout) { // interrupted for its own deadline only
		t.Fatal(r)
	}
	s.End()
	select {
	case r := <-vm:
		t.Fatalf("extra interrupt %v", r)
	default:
	}
}

var sink [][]byte

func TestMemoryGrowth(t *testing.T) {
	g := New(time.Millisecond, 8<<20)
	defer g.Close()
	s := g.NewSlot()
	vm := make(fakeVM, 1)
	s.Begin(vm, context.Background(), time.Time{})
	defer func() { sink = nil }()
	for {
		select {
		case r := <-vm:
			if !errors.Is(r, ErrMemoryLimit) || !errors.Is(s.End(), ErrMemoryLimit) {
				t.Fatal(r)
			}
			return
		default:
			sink = append(sink, make([]byte, 64<<10)) // retained: survives the confirming GC
		}
	}
}

// TestReserve: a charge that does not fit the budget trips the run before the allocation, and
// so does one that fits alone but not on top of the heap the run already grew.
func TestReserve(t *testing.T) {
	g := New(time.Hour, 8<<20) // the watchdog never looks: only Reserve can trip
	defer g.Close()
	s := g.NewSlot()
	if err := s.Reserve(64 << 20); err != nil {
		t.Fatalf("outside a run: %v", err)
	}

	vm := make(fakeVM, 1)
	s.Begin(vm, context.Background(), time.Time{})
	if err := s.Reserve(1 << 10); err != nil {
		t.Fatal(err)
	}
	if err := s.Reserve(16 << 20); !errors.Is(err, ErrMemoryLimit) {
		t.Fatalf("over the budget alone: %v", err)
	}
	if r := <-vm; !errors.Is(r, ErrMemoryLimit) {
		t.Fatal(r)
	}
	if r := s.End(); !errors.Is(r, ErrMemoryLimit) {
		t.Fatal(r)
	}

	runtime.GC() // garbage of earlier tests must not be freed under the base
	s.Begin(vm, context.Background(), time.Time{})
	if err := s.Reserve(reserveQuantum); err != nil { // reads the heap base
		t.Fatal(err)
	}
	kept := make([][]byte, 0, 24)
	for range 24 {
		kept = append(kept, make([]byte, 1<<20))
	}
	err := s.Reserve(reserveQuantum)
	if !errors.Is(err, ErrMemoryLimit) {
		t.Fatalf("24 MiB kept, 1 MiB more: %v", err)
	}
	<-vm
	s.End()
	runtime.KeepAlive(kept)
}
