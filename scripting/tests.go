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
// describe blocks around it ("outer > inner > name").
type TestCase struct {
	Name string
	fn   stdlib.Callable
}

// Tests collects the tests a file registers: its Globals are test(name, fn) and
// describe(name, fn). describe runs its function at once, so the tests inside register with the
// block's name in front; test only records. The runner then calls each test on its own.
type Tests struct {
	prefix  []string
	cases   []TestCase
	seen    map[string]int
	running bool
}

// ErrTestRegistration is a misuse of test or describe (a test registered while tests run).
var ErrTestRegistration = errors.New("test registration")

// Globals are the functions a test file sees as globals.
func (t *Tests) Globals() map[string]any {
	reg := func(what string) stdlib.Func {
		return func(ctx context.Context, a stdlib.Args) (any, error) {
			name, err := a.String(0)
			if err != nil {
				return nil, fmt.Errorf("%s(name, fn): %w", what, err)
			}
			fn, err := a.Callable(1)
			if err != nil {
				return nil, fmt.Errorf("%s(name, fn): %w", what, err)
			}
			if t.running {
				return nil, fmt.Errorf("%w: %s(%q) inside a running test; register tests at the top level or in describe", ErrTestRegistration, what, name)
			}
			full := strings.Join(append(append([]string(nil), t.prefix...), name), " > ")
			if what == "describe" {
				t.prefix = append(t.prefix, name)
				defer func() { t.prefix = t.prefix[:len(t.prefix)-1] }()
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
			t.cases = append(t.cases, TestCase{Name: full, fn: fn})
			return nil, nil
		}
	}
	return map[string]any{"test": reg("test"), "describe": reg("describe")}
}

// Cases lists the registered tests in registration order.
func (t *Tests) Cases() []TestCase { return t.cases }

// Run calls one test on rt (the runtime that loaded the file) under its timeout and memory
// limit, and reports how it ended.
func (t *Tests) Run(ctx context.Context, rt *Runtime, c TestCase) error {
	t.running = true
	defer func() { t.running = false }()
	return rt.Call(ctx, c.fn)
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

// Pass reports whether the test passed.
func (r TestResult) Pass() bool { return r.Err == nil }

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
	if r.Err == nil {
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
	case r.Err == nil:
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
	if r.Err != nil {
		return r.Err.Error()
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
