package scripting

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hermes-go/hermes/stdlib"
)

// TestCase is one test a test file registered with test(name, fn), its name prefixed by the
// describe blocks around it ("outer > inner > name"). Skip and Only are set by test.skip and
// test.only, or by a describe.skip or describe.only around it.
type TestCase struct {
	Name       string
	Skip, Only bool
	fn         stdlib.Callable
}

// Tests collects the tests a file registers: its Globals are test(name, fn) and
// describe(name, fn), each with .skip and .only. describe runs its function at once, so the
// tests inside register with the block's name in front; test only records. The runner then
// calls each test on its own.
type Tests struct {
	prefix  []string
	skip    int // describe.skip blocks open
	only    int // describe.only blocks open
	cases   []TestCase
	seen    map[string]int
	running bool
	hasOnly bool
}

// ErrTestRegistration is a misuse of test or describe (a test registered while tests run).
var ErrTestRegistration = errors.New("test registration")

// Outcomes of Tests.Run that are not failures: ErrSkipped for a test marked skip, ErrFiltered
// for a test left out because another was marked only. A test marked only runs, and its
// result wraps the outcome (nil or the failure) in an error that Is ErrOnly, so that the
// reporter fails the run: only must not pass CI by accident.
var (
	ErrSkipped  = errors.New("test skipped")
	ErrFiltered = errors.New("test filtered out")
	ErrOnly     = errors.New("only was used")
)

// onlyError is the result of a test marked only: its failure, or nil when it passed.
type onlyError struct{ err error }

func (e *onlyError) Error() string {
	if e.err == nil {
		return ErrOnly.Error()
	}
	return e.err.Error()
}

func (e *onlyError) Unwrap() error        { return e.err }
func (e *onlyError) Is(target error) bool { return target == ErrOnly }

// Globals are the functions a test file sees as globals.
func (t *Tests) Globals() map[string]any {
	reg := func(what, mode string) stdlib.Func {
		sig := what
		if mode != "" {
			sig += "." + mode
		}
		return func(ctx context.Context, a stdlib.Args) (any, error) {
			name, err := a.String(0)
			if err != nil {
				return nil, fmt.Errorf("%s(name, fn): %w", sig, err)
			}
			fn, err := a.Callable(1)
			if err != nil {
				return nil, fmt.Errorf("%s(name, fn): %w", sig, err)
			}
			if t.running {
				return nil, fmt.Errorf("%w: %s(%q) inside a running test; register tests at the top level or in describe", ErrTestRegistration, sig, name)
			}
			if mode == "only" {
				t.hasOnly = true
			}
			full := strings.Join(append(append([]string(nil), t.prefix...), name), " > ")
			if what == "describe" {
				t.prefix = append(t.prefix, name)
				switch mode {
				case "skip":
					t.skip++
				case "only":
					t.only++
				}
				defer func() {
					t.prefix = t.prefix[:len(t.prefix)-1]
					switch mode {
					case "skip":
						t.skip--
					case "only":
						t.only--
					}
				}()
				_, err := fn(ctx)
				return nil, err
			}
			if t.seen == nil {
				t.seen = map[string]int{}
			}
			t.seen[full]++
			if n := t.seen[full]; n > 1 { // keep both; the report tells them apart
				full = fmt.Sprintf("%s (%d)", full, n)
			}
			t.cases = append(t.cases, TestCase{Name: full, fn: fn, Skip: mode == "skip" || t.skip > 0, Only: mode == "only" || t.only > 0})
			return nil, nil
		}
	}
	fnObj := func(what string) stdlib.FuncObject {
		return stdlib.FuncObject{Call: reg(what, ""), Members: stdlib.Object{"skip": reg(what, "skip"), "only": reg(what, "only")}}
	}
	return map[string]any{"test": fnObj("test"), "describe": fnObj("describe")}
}

// Cases lists the registered tests in registration order.
func (t *Tests) Cases() []TestCase { return t.cases }

// Run calls one test on rt (the runtime that loaded the file) under its timeout and memory
// limit, and reports how it ended. A test marked skip does not run (ErrSkipped), nor, when
// the file marked a test only, a test not marked only (ErrFiltered); a test marked only
// returns its outcome wrapped in an error that Is ErrOnly.
func (t *Tests) Run(ctx context.Context, rt *Runtime, c TestCase) error {
	switch {
	case t.hasOnly && !c.Only:
		return ErrFiltered
	case c.Skip:
		return ErrSkipped
	}
	t.running = true
	defer func() { t.running = false }()
	err := rt.Call(ctx, c.fn)
	if c.Only {
		return &onlyError{err}
	}
	return err
}

// TestResult is the outcome of one test (or of loading a file, when it fails to load: Name is
// then empty).
type TestResult struct {
	File     string
	Name     string
	Err      error // nil: passed
	Duration time.Duration
	Output   string // what the test printed, when the reporter captures it
}

// Pass reports whether the test did not fail: it passed, was skipped or was filtered out.
func (r TestResult) Pass() bool { return r.failure() == nil }

// Skipped reports whether the test was marked skip and did not run.
func (r TestResult) Skipped() bool { return errors.Is(r.Err, ErrSkipped) }

// Filtered reports whether the test was left out (another test was marked only).
func (r TestResult) Filtered() bool { return errors.Is(r.Err, ErrFiltered) }

// Only reports whether the test was marked only.
func (r TestResult) Only() bool { return errors.Is(r.Err, ErrOnly) }

// failure is Err without the outcomes that are not failures.
func (r TestResult) failure() error {
	var oe *onlyError
	switch {
	case r.Err == nil || r.Skipped() || r.Filtered():
		return nil
	case errors.As(r.Err, &oe):
		return oe.err
	}
	return r.Err
}

// Location is where the failure happened (the innermost script frame), or the file.
func (r TestResult) Location() (file string, line int) {
	var se *stdlib.ScriptError
	if errors.As(r.Err, &se) && se.File != "" {
		return se.File, se.Line
	}
	return r.File, 0
}

// Message is the failure without its location; Kind names the failure (AssertionError for
// a failed assertion, Timeout, Error).
func (r TestResult) Message() string {
	if r.Pass() {
		return ""
	}
	var se *stdlib.ScriptError
	if errors.As(r.Err, &se) {
		return se.Message
	}
	return r.Err.Error()
}

// Kind classifies a failure for reporters (the JUnit type attribute).
func (r TestResult) Kind() string {
	switch {
	case r.Pass():
		return ""
	case stdlib.IsAssertion(r.Err):
		return "AssertionError"
	case errors.Is(r.Err, ErrTimeout) || errors.Is(r.Err, context.DeadlineExceeded):
		return "Timeout"
	case r.Name == "":
		return "LoadError"
	}
	return "Error"
}

// Trace is the failure with its location and stack.
func (r TestResult) Trace() string {
	var se *stdlib.ScriptError
	if errors.As(r.Err, &se) {
		return se.Trace()
	}
	if err := r.failure(); err != nil {
		return err.Error()
	}
	return ""
}

func stackOf(err error) []string {
	var se *stdlib.ScriptError
	if errors.As(err, &se) {
		return se.Stack
	}
	return nil
}
