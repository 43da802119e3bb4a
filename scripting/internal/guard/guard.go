// Package guard stops script code that overruns: a deadline, the caller going away, or the Go
// heap growing by more than a budget while the code runs. Script VMs (goja, gopher-lua) have no
// memory limit of their own, and a native call cannot be preempted, so one watchdog goroutine
// samples the clock and the heap while any guarded code runs and interrupts the VM at fault.
//
// Sampling cannot see one native call that builds a huge string, nor stop it once it runs, so
// the natives that build strings and buffers charge what they are about to allocate first
// (Slot.Reserve): a charge that does not fit the budget trips the run before the allocation.
//
// Memory is attributed by growth: each run remembers the heap size when the watchdog first
// saw it, and is interrupted when the heap has grown by more than the budget since, confirmed
// by a garbage collection so short-lived garbage does not count. A heap that grows because of
// other work in the process counts against every run in progress; runs are short, so in
// practice the run that allocates is the one that overruns.
package guard

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Reasons a guarded run is interrupted.
var (
	ErrTimeout     = errors.New("script deadline exceeded")
	ErrMemoryLimit = errors.New("script memory limit exceeded")
	ErrStackLimit  = errors.New("script call stack limit exceeded")
)

// Interrupter stops a VM from another goroutine.
type Interrupter interface{ Interrupt(reason error) }

// Meter is what counted natives charge before they allocate: Reserve returns an error
// wrapping ErrMemoryLimit, after interrupting the run, when n more bytes do not fit.
type Meter interface{ Reserve(n int64) error }

// reserveQuantum is how many bytes of small charges add up before Reserve reads the heap.
const reserveQuantum = 1 << 20

// Guard is the watchdog. Interval is how often it looks while code runs.
type Guard struct {
	interval time.Duration
	limit    uint64 // heap growth budget in bytes; 0 = no memory check

	active atomic.Int64
	wake   chan struct{}
	quit   chan struct{}
	wg     sync.WaitGroup

	mu    sync.Mutex
	slots []*Slot
	once  sync.Once
}

// New starts a watchdog. memLimit <= 0 disables the memory check.
func New(interval time.Duration, memLimit int64) *Guard {
	if interval <= 0 {
		interval = 5 * time.Millisecond
	}
	g := &Guard{interval: interval, wake: make(chan struct{}, 1), quit: make(chan struct{})}
	if memLimit > 0 {
		g.limit = uint64(memLimit)
	}
	g.wg.Add(1)
	go g.run()
	return g
}

// Close stops the watchdog and waits for it.
func (g *Guard) Close() {
	g.once.Do(func() { close(g.quit) })
	g.wg.Wait()
}

// Slot is one place where guarded code runs (one per VM worker). Begin and End must be called
// by the goroutine that owns the VM.
type Slot struct {
	g        *Guard
	mu       sync.Mutex
	running  bool
	gen      uint64
	vm       Interrupter
	ctx      context.Context
	deadline time.Time
	heapBase uint64
	reason   error
	pending  int64 // bytes charged since Reserve last read the heap
}

// NewSlot registers a slot with the watchdog.
func (g *Guard) NewSlot() *Slot {
	s := &Slot{g: g}
	g.mu.Lock()
	g.slots = append(g.slots, s)
	g.mu.Unlock()
	return s
}

// Remove unregisters a slot.
func (g *Guard) Remove(s *Slot) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, x := range g.slots {
		if x == s {
			g.slots = append(g.slots[:i], g.slots[i+1:]...)
			return
		}
	}
}

// Begin marks vm as running code for ctx until deadline (zero: no deadline).
func (s *Slot) Begin(vm Interrupter, ctx context.Context, deadline time.Time) {
	s.mu.Lock()
	s.running, s.vm, s.ctx, s.deadline, s.heapBase, s.reason, s.pending = true, vm, ctx, deadline, 0, nil, 0
	s.gen++
	s.mu.Unlock()
	if s.g.active.Add(1) == 1 {
		select {
		case s.g.wake <- struct{}{}:
		default:
		}
	}
}

// End marks the run finished and returns why it was interrupted, or nil. A VM that was
// interrupted must not be reused as it was: its state may be half-updated.
func (s *Slot) End() error {
	s.mu.Lock()
	r := s.reason
	s.running, s.vm, s.ctx = false, nil, nil
	s.mu.Unlock()
	s.g.active.Add(-1)
	return r
}

// Reserve charges n bytes a native is about to allocate for the run in progress. When the
// heap growth of the run plus n exceeds the budget (confirmed by a garbage collection, as the
// watchdog does), the run is interrupted with ErrMemoryLimit and the error is returned: the
// caller must not allocate. Outside a run, or without a budget, it always succeeds.
func (s *Slot) Reserve(n int64) error {
	if s.g.limit == 0 || n <= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return nil
	}
	if s.reason != nil {
		return s.reason
	}
	if uint64(n) > s.g.limit {
		return s.tripLocked(n, 0)
	}
	s.pending += n
	if s.pending < reserveQuantum {
		return nil
	}
	s.pending = 0
	h := heap()
	if s.heapBase == 0 {
		s.heapBase = h
	}
	if grown(h, s.heapBase)+uint64(n) <= s.g.limit {
		return nil
	}
	// Only growth that survives a collection counts. The run waits here (only the watchdog
	// could want the lock meanwhile, and the run is the one charging), which is what a run at
	// its budget should do.
	s.mu.Unlock()
	runtime.GC()
	h = heap()
	s.mu.Lock()
	if !s.running || s.reason != nil {
		return s.reason
	}
	if g := grown(h, s.heapBase); g+uint64(n) > s.g.limit {
		return s.tripLocked(n, g)
	}
	return nil
}

func grown(h, base uint64) uint64 {
	if h > base {
		return h - base
	}
	return 0
}

func (s *Slot) tripLocked(n int64, g uint64) error {
	s.interruptLocked(fmt.Errorf("%w (a native call would allocate %d MiB with the heap grown by %d MiB, budget %d MiB)", ErrMemoryLimit, n>>20, g>>20, s.g.limit>>20))
	return s.reason
}

// Trip ends the run in progress with reason (a limit the VM detected itself, such as its
// call depth), so End reports it even if the script carries on.
func (s *Slot) Trip(reason error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.interruptLocked(reason)
}

// interruptLocked stops the run in progress once; s.mu must be held.
func (s *Slot) interruptLocked(reason error) {
	if s.running && s.reason == nil {
		s.reason = reason
		s.vm.Interrupt(reason)
	}
}

func (g *Guard) run() {
	defer g.wg.Done()
	t := time.NewTimer(g.interval)
	defer t.Stop()
	for {
		if g.active.Load() == 0 {
			select {
			case <-g.wake:
			case <-g.quit:
				return
			}
		}
		t.Reset(g.interval)
		select {
		case <-t.C:
		case <-g.quit:
			return
		}
		g.check()
	}
}

var heapSample = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}

// heap reads the bytes held by heap objects (live or not yet swept) without stopping the world.
func heap() uint64 {
	s := make([]metrics.Sample, 1)
	copy(s, heapSample)
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

type suspect struct {
	s   *Slot
	gen uint64
}

func (g *Guard) check() {
	g.mu.Lock()
	slots := append([]*Slot(nil), g.slots...)
	g.mu.Unlock()
	now := time.Now()
	var h uint64
	if g.limit > 0 {
		h = heap()
	}
	var over []suspect
	for _, s := range slots {
		s.mu.Lock()
		switch {
		case !s.running || s.reason != nil:
		case !s.deadline.IsZero() && now.After(s.deadline):
			s.interruptLocked(ErrTimeout)
		case s.ctx.Err() != nil:
			s.interruptLocked(context.Cause(s.ctx))
		case g.limit == 0:
		case s.heapBase == 0:
			s.heapBase = h
		case h > s.heapBase && h-s.heapBase > g.limit:
			over = append(over, suspect{s, s.gen})
		}
		s.mu.Unlock()
	}
	if len(over) == 0 {
		return
	}
	// Garbage counts until it is collected; only growth that survives a collection is real.
	runtime.GC()
	h = heap()
	for _, x := range over {
		x.s.mu.Lock()
		if x.s.gen == x.gen && h > x.s.heapBase && h-x.s.heapBase > g.limit {
			x.s.interruptLocked(fmt.Errorf("%w (heap grew by %d MiB, budget %d MiB)", ErrMemoryLimit, (h-x.s.heapBase)>>20, g.limit>>20))
		}
		x.s.mu.Unlock()
	}
}

// Tally adds up the bytes of a value being handed to host code, checking them as they grow:
// reserve is called with the running total at every TallyStep and by Done.
type Tally struct{ total, checked float64 }

// TallyStep is how much a Tally grows between checks.
const TallyStep = 1 << 20

// Reset starts a new value.
func (t *Tally) Reset() { t.total, t.checked = 0, 0 }

// Add counts n more bytes.
func (t *Tally) Add(n float64, reserve func(float64) error) error {
	t.total += n
	if t.total-t.checked >= TallyStep {
		t.checked = t.total
		return reserve(t.total)
	}
	return nil
}

// Done checks the total.
func (t *Tally) Done(reserve func(float64) error) error {
	if t.total > t.checked && t.total >= TallyStep {
		t.checked = t.total
		return reserve(t.total)
	}
	return nil
}
