package scripting

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hermes-go/hermes/scripting/internal/guard"
)

// hookVM is one policy loaded in one VM (JS or Lua). Only its worker goroutine calls it,
// except Interrupt.
type hookVM interface {
	Has(hook string) bool
	// Functions lists the functions the policy exports (hooks and anything else).
	Functions() []string
	Call(ctx context.Context, hook string, in any) (out any, line int, err error)
	Export(name string) (any, error)
	Interrupt(reason error)
	Close()
	// SetMeter gives the VM's counted natives the memory budget of its worker's runs.
	SetMeter(m guard.Meter)
	// Tripped is the limit the last call hit inside the VM (call depth, a counted native),
	// or nil; the call's result is then void.
	Tripped() error
}

type result struct {
	out  any
	line int
	err  error
}

type job struct {
	ctx      context.Context
	hook     string
	in       any
	deadline time.Time
	reply    chan result // buffered: a worker never blocks on a caller that left
}

// pool runs hook calls on a fixed set of workers, each owning one VM for its whole life.
type pool struct {
	newVM   func() (hookVM, error)
	timeout time.Duration
	jobs    chan *job
	quit    chan struct{}
	wg      sync.WaitGroup
	g       *guard.Guard
	once    sync.Once
}

var (
	replies = sync.Pool{New: func() any { return make(chan result, 1) }}
	timers  = sync.Pool{New: func() any {
		t := time.NewTimer(time.Hour)
		t.Stop()
		return t
	}}
)

func newPool(workers int, timeout time.Duration, memLimit int64, first hookVM, newVM func() (hookVM, error)) *pool {
	p := &pool{newVM: newVM, timeout: timeout, jobs: make(chan *job), quit: make(chan struct{}), g: guard.New(0, memLimit)}
	for i := range workers {
		var vm hookVM
		if i == 0 {
			vm = first // created by the loader; owned by worker 0 from here on
		}
		p.wg.Add(1)
		go p.worker(vm)
	}
	return p
}

// close stops the workers (after the calls in progress) and the watchdog.
func (p *pool) close() {
	p.once.Do(func() {
		close(p.quit)
		p.wg.Wait()
		p.g.Close()
	})
}

func (p *pool) worker(vm hookVM) {
	defer p.wg.Done()
	slot := p.g.NewSlot()
	defer p.g.Remove(slot)
	defer func() {
		if vm != nil {
			vm.Close()
		}
	}()
	if vm == nil { // warm up before the first call needs it
		vm, _ = p.newVM()
	}
	if vm != nil {
		vm.SetMeter(slot)
	}
	for {
		select {
		case <-p.quit:
			return
		case j := <-p.jobs:
			if j.ctx.Err() != nil { // the caller left while the job waited
				j.reply <- result{err: context.Cause(j.ctx)}
				continue
			}
			if vm == nil {
				var err error
				if vm, err = p.newVM(); err != nil {
					j.reply <- result{err: err}
					continue
				}
				vm.SetMeter(slot)
			}
			slot.Begin(vm, j.ctx, j.deadline)
			r, panicked := call(vm, j)
			reason := slot.End()
			if reason == nil {
				reason = vm.Tripped()
			}
			if reason != nil || panicked {
				// A limit hit voids whatever the script returned after it (it may have caught
				// the abort); the call fails closed.
				if reason != nil {
					r.out, r.err = nil, reasonError(reason, r.err)
				}
				vm.Close() // its state may be half-updated; the next call gets a fresh VM
				vm = nil
			}
			j.reply <- r
		}
	}
}

func call(vm hookVM, j *job) (r result, panicked bool) {
	defer func() {
		if x := recover(); x != nil {
			r, panicked = result{err: fmt.Errorf("%w: %v", ErrHookPanic, x)}, true
		}
	}()
	r.out, r.line, r.err = vm.Call(j.ctx, j.hook, j.in)
	return r, false
}

// reasonError makes the interrupt reason the error, keeping the script position if any.
func reasonError(reason, err error) error {
	if err == nil || errors.Is(err, reason) {
		if err == nil {
			return reason
		}
		return err
	}
	return fmt.Errorf("%w: %v", reason, err)
}

// do runs hook with in on a free VM, waiting at most until ctx ends or the hook deadline.
func (p *pool) do(ctx context.Context, hook string, in any) (any, int, error) {
	deadline := time.Now().Add(p.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	reply := replies.Get().(chan result)
	j := &job{ctx: ctx, hook: hook, in: in, deadline: deadline, reply: reply}
	select {
	case p.jobs <- j:
	case <-ctx.Done():
		replies.Put(reply)
		return nil, 0, fmt.Errorf("%w: waiting for a free VM: %v", ErrTimeout, context.Cause(ctx))
	case <-p.quit:
		replies.Put(reply)
		return nil, 0, ErrClosed
	}
	// A VM interrupted at its deadline stops within a native call's next look at the
	// interrupt; the caller does not wait for that beyond a grace period.
	late := timers.Get().(*time.Timer)
	late.Reset(time.Until(deadline) + p.timeout/2 + 100*time.Millisecond)
	defer func() {
		late.Stop() // no stale tick is received after Stop returns
		timers.Put(late)
	}()
	select {
	case r := <-reply:
		replies.Put(reply)
		return r.out, r.line, r.err
	case <-ctx.Done():
		// The watchdog interrupts the VM at its next look; the reply channel is left to the
		// worker (buffered), never reused.
		return nil, 0, context.Cause(ctx)
	case <-late.C:
		// The worker discards the VM when it comes back.
		return nil, 0, fmt.Errorf("%w (the hook did not stop at once; its VM is discarded)", ErrTimeout)
	}
}
