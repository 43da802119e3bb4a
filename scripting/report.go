package scripting

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"
	"unicode"
)

// Reporter prints test results: Result after each test, End once with the totals.
type Reporter interface {
	Result(r TestResult)
	End(s Summary) error
}

// Summary is the totals of a test run.
type Summary struct {
	Passed, Failed int
	Files          int
	Duration       time.Duration
}

// Reporters names the formats NewReporter knows.
var Reporters = []string{"pretty", "tap", "junit", "json"}

// CapturesOutput reports whether a reporter format wants what tests print captured per test
// (the machine formats, whose stdout must stay parseable) rather than passed through.
func CapturesOutput(format string) bool { return format != "pretty" }

// NewReporter returns the reporter for format (pretty, tap, junit, json) writing to w.
func NewReporter(format string, w io.Writer) (Reporter, error) {
	switch format {
	case "pretty":
		return &prettyReporter{w: w}, nil
	case "tap":
		fmt.Fprintln(w, "TAP version 14")
		return &tapReporter{w: w}, nil
	case "junit":
		return &junitReporter{w: w}, nil
	case "json":
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		return &jsonReporter{enc: enc}, nil
	}
	return nil, fmt.Errorf("unknown reporter %q (want %s)", format, strings.Join(Reporters, ", "))
}

func label(r TestResult) string {
	if r.Name == "" {
		return r.File + " (loading the file)"
	}
	return r.File + ": " + r.Name
}

func ms(d time.Duration) string { return fmt.Sprintf("%dms", d.Milliseconds()) }

type prettyReporter struct{ w io.Writer }

func (p *prettyReporter) Result(r TestResult) {
	if r.Pass() {
		fmt.Fprintf(p.w, "ok   %s (%s)\n", label(r), ms(r.Duration))
		return
	}
	fmt.Fprintf(p.w, "FAIL %s (%s)\n", label(r), ms(r.Duration))
	for _, l := range strings.Split(r.Trace(), "\n") {
		fmt.Fprintf(p.w, "     %s\n", l)
	}
	if r.Output != "" {
		fmt.Fprintf(p.w, "     output:\n")
		for _, l := range strings.Split(strings.TrimRight(r.Output, "\n"), "\n") {
			fmt.Fprintf(p.w, "       %s\n", l)
		}
	}
}

func (p *prettyReporter) End(s Summary) error {
	verdict := "ok"
	if s.Failed > 0 {
		verdict = "FAILED"
	}
	_, err := fmt.Fprintf(p.w, "\n%s: %d passed, %d failed (%d files, %s)\n", verdict, s.Passed, s.Failed, s.Files, ms(s.Duration))
	return err
}

// tapReporter writes TAP 14: a line a test, YAML diagnostics under a failure, the plan last.
type tapReporter struct {
	w io.Writer
	n int
}

func (t *tapReporter) Result(r TestResult) {
	t.n++
	desc := tapText(strings.NewReplacer("#", "\\#", "\n", " ").Replace(label(r)))
	if r.Pass() {
		fmt.Fprintf(t.w, "ok %d - %s\n", t.n, desc)
	} else {
		fmt.Fprintf(t.w, "not ok %d - %s\n", t.n, desc)
		file, line := r.Location()
		fmt.Fprintln(t.w, "  ---")
		fmt.Fprintf(t.w, "  message: %s\n", yamlString(r.Message()))
		fmt.Fprintf(t.w, "  severity: fail\n  type: %s\n", r.Kind())
		fmt.Fprintf(t.w, "  at:\n    file: %s\n    line: %d\n", yamlString(file), line)
		fmt.Fprintf(t.w, "  duration_ms: %d\n", r.Duration.Milliseconds())
		fmt.Fprintln(t.w, "  stack: |-")
		for _, l := range strings.Split(r.Trace(), "\n") {
			fmt.Fprintf(t.w, "    %s\n", tapText(l))
		}
		fmt.Fprintln(t.w, "  ...")
	}
	for _, l := range strings.Split(strings.TrimRight(r.Output, "\n"), "\n") {
		if l != "" {
			fmt.Fprintf(t.w, "# %s\n", tapText(l))
		}
	}
}

// tapText escapes the control characters of a line of TAP (a test's name, what it printed, a
// stack line) as \xNN, tab kept: a raw escape sequence would drive the terminal or CI log that
// shows it, and YAML block scalars may not hold them.
func tapText(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r != '\t' && unicode.IsControl(r) }) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r != '\t' && unicode.IsControl(r) {
			fmt.Fprintf(&b, "\\x%02x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// yamlString quotes s as a YAML double-quoted scalar (JSON's quoting is valid YAML).
func yamlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func (t *tapReporter) End(s Summary) error {
	_, err := fmt.Fprintf(t.w, "1..%d\n# pass %d\n# fail %d\n", t.n, s.Passed, s.Failed)
	return err
}

// junitReporter writes the JUnit XML that GitHub Actions, GitLab and Jenkins read: a
// testsuite per file, a testcase per test, failure with the message and stack.
type junitReporter struct {
	w      io.Writer
	suites []*junitSuite
}

type junitSuites struct {
	XMLName  xml.Name      `xml:"testsuites"`
	Name     string        `xml:"name,attr"`
	Tests    int           `xml:"tests,attr"`
	Failures int           `xml:"failures,attr"`
	Errors   int           `xml:"errors,attr"`
	Time     string        `xml:"time,attr"`
	Suites   []*junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string       `xml:"name,attr"`
	Tests     int          `xml:"tests,attr"`
	Failures  int          `xml:"failures,attr"`
	Errors    int          `xml:"errors,attr"`
	Skipped   int          `xml:"skipped,attr"`
	Time      string       `xml:"time,attr"`
	Timestamp string       `xml:"timestamp,attr"`
	Cases     []*junitCase `xml:"testcase"`
	dur       time.Duration
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	File      string        `xml:"file,attr,omitempty"`
	Line      int           `xml:"line,attr,omitempty"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Error     *junitFailure `xml:"error,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

func secs(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

func (j *junitReporter) Result(r TestResult) {
	var s *junitSuite
	if n := len(j.suites); n > 0 && j.suites[n-1].Name == r.File {
		s = j.suites[n-1]
	} else {
		s = &junitSuite{Name: r.File, Timestamp: time.Now().UTC().Format("2006-01-02T15:04:05")}
		j.suites = append(j.suites, s)
	}
	name := r.Name
	if name == "" {
		name = "(loading the file)"
	}
	c := &junitCase{Name: name, Classname: strings.TrimSuffix(r.File, filepath.Ext(r.File)), Time: secs(r.Duration), SystemOut: r.Output}
	s.Tests++
	s.dur += r.Duration
	s.Time = secs(s.dur)
	c.File = r.File // a failure's own location below
	if !r.Pass() {
		c.File, c.Line = r.Location()
		f := &junitFailure{Message: r.Message(), Type: r.Kind(), Text: r.Trace()}
		if r.Kind() == "AssertionError" {
			c.Failure = f
			s.Failures++
		} else {
			c.Error = f
			s.Errors++
		}
	}
	s.Cases = append(s.Cases, c)
}

func (j *junitReporter) End(s Summary) error {
	all := junitSuites{Name: "hermes test", Time: secs(s.Duration), Suites: j.suites}
	for _, su := range j.suites {
		all.Tests += su.Tests
		all.Failures += su.Failures
		all.Errors += su.Errors
	}
	if _, err := io.WriteString(j.w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(j.w)
	enc.Indent("", "  ")
	if err := enc.Encode(all); err != nil {
		return err
	}
	_, err := io.WriteString(j.w, "\n")
	return err
}

// jsonReporter writes one JSON object a line: {"type":"test",…} per test, then
// {"type":"summary",…}.
type jsonReporter struct{ enc *json.Encoder }

type jsonTest struct {
	Type       string   `json:"type"`
	File       string   `json:"file"`
	Name       string   `json:"name"`
	Status     string   `json:"status"`
	DurationMS int64    `json:"duration_ms"`
	Error      string   `json:"error,omitempty"`
	Kind       string   `json:"kind,omitempty"`
	ErrFile    string   `json:"error_file,omitempty"`
	ErrLine    int      `json:"error_line,omitempty"`
	Stack      []string `json:"stack,omitempty"`
	Output     string   `json:"output,omitempty"`
}

func (j *jsonReporter) Result(r TestResult) {
	t := jsonTest{Type: "test", File: r.File, Name: r.Name, Status: "pass", DurationMS: r.Duration.Milliseconds(), Output: r.Output}
	if !r.Pass() {
		t.Status, t.Error, t.Kind = "fail", r.Message(), r.Kind()
		t.ErrFile, t.ErrLine = r.Location()
		t.Stack = stackOf(r.Err)
	}
	_ = j.enc.Encode(t)
}

func (j *jsonReporter) End(s Summary) error {
	return j.enc.Encode(map[string]any{"type": "summary", "passed": s.Passed, "failed": s.Failed, "files": s.Files,
		"duration_ms": s.Duration.Milliseconds(), "ok": s.Failed == 0})
}
