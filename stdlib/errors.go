package stdlib

import (
	"errors"
	"fmt"
	"strings"
)

// ScriptError is an error raised by script code (a throw, a failed assertion, a runtime
// error), located in the script. Both bindings produce it, so callers print one format.
type ScriptError struct {
	Message string   // without the location
	File    string   // script file name as loaded
	Line    int      // 0 when unknown
	Stack   []string // innermost first, "at fn (file:line)" style; may be empty
	Cause   error    // a host error the script did not catch (e.g. *AssertionError), or nil
}

func (e *ScriptError) Error() string {
	switch {
	case e.File != "" && e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Message)
	case e.File != "":
		return e.File + ": " + e.Message
	}
	return e.Message
}

// Unwrap exposes the host error, so errors.As finds an *AssertionError.
func (e *ScriptError) Unwrap() error { return e.Cause }

// Trace is the message followed by the stack, one frame a line.
func (e *ScriptError) Trace() string {
	var b strings.Builder
	b.WriteString(e.Error())
	for _, f := range e.Stack {
		b.WriteString("\n    ")
		b.WriteString(f)
	}
	return b.String()
}

// Frames of a long stack kept by ElideStack: the innermost and the outermost.
const (
	stackHead = 10
	stackTail = 5
)

// ElideStack shortens a long stack (a runaway recursion is thousands of frames deep) to its
// first 10 and last 5 frames with a line saying how many were left out between them.
func ElideStack(frames []string) []string {
	if len(frames) <= stackHead+stackTail+1 {
		return frames
	}
	out := append([]string(nil), frames[:stackHead]...)
	out = append(out, fmt.Sprintf("… %d frames omitted", len(frames)-stackHead-stackTail))
	return append(out, frames[len(frames)-stackTail:]...)
}

// IsAssertion reports whether err is (or wraps) a failed assertion.
func IsAssertion(err error) bool {
	var ae *AssertionError
	return errors.As(err, &ae)
}
