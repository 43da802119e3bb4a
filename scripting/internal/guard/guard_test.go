package guard

import (
	"context"
	"errors"
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
