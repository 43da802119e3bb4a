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

// Summary is the totals of a test run. The reporters count Passed, Failed, Skipped and Only
// from the results they were given, and add the Filtered they counted to the Filtered the
// runner counted (tests it left out by --filter without reporting them).
type Summary struct {
	Passed, Failed int
	Skipped        int
	Filtered       int
	Only           bool // a test was marked only: the run fails
	Files          int
	Duration       time.Duration
}

// ErrOnlyUsed is what a reporter's End returns after writing its output when a test was
// marked only, so that the run fails even when every test passed.
var ErrOnlyUsed = fmt.Errorf("%w (test.only or describe.only), so the run fails; remove it to run every test", ErrOnly)

// tally counts the results a reporter was given.
type tally struct {
	passed, failed, skipped, filtered int
	only                              bool
}

func (t *tally) add(r TestResult) {
	switch {
	case r.Filtered():
		t.filtered++
	case r.Skipped():
		t.skipped++
	case r.Pass():
		t.passed++
	default:
		t.failed++
	}
	t.only = t.only || r.Only()
}

// summary is s with the reporter's counts.
func (t *tally) summary(s Summary) Summary {
	s.Passed, s.Failed, s.Skipped = t.passed, t.failed, t.skipped
	s.Filtered += t.filtered
	s.Only = s.Only || t.only
	return s
}

// end is what End returns once the output is written.
func end(s Summary, err error) error {
	if err == nil && s.Only {
		return ErrOnlyUsed
	}
	return err
}

// counts is the summary's ", K skipped, F filtered out", each part only when not zero.
func (s Summary) counts() string {
	var b strings.Builder
	if s.Skipped > 0 {
		fmt.Fprintf(&b, ", %d skipped", s.Skipped)
	}
	if s.Filtered > 0 {
		fmt.Fprintf(&b, ", %d filtered out", s.Filtered)
	}
	return b.String()
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

type prettyReporter struct {
	w io.Writer
	tally
}

func (p *prettyReporter) Result(r TestResult) {
	p.add(r)
	switch {
	case r.Filtered():
		return
	case r.Skipped():
		fmt.Fprintf(p.w, "skip %s\n", label(r))
		return
	case r.Pass():
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
	s = p.summary(s)
	verdict := "ok"
	if s.Failed > 0 || s.Only {
		verdict = "FAILED"
	}
	_, err := fmt.Fprintf(p.w, "\n%s: %d passed, %d failed%s (%d files, %s)\n", verdict, s.Passed, s.Failed, s.counts(), s.Files, ms(s.Duration))
	return end(s, err)
}

// tapReporter writes TAP 14: a line a test, YAML diagnostics under a failure, the plan last.
type tapReporter struct {
	w io.Writer
	n int
	tally
}

func (t *tapReporter) Result(r TestResult) {
	t.add(r)
	if r.Filtered() {
		return
	}
	t.n++
	desc := tapText(strings.NewReplacer("#", "\\#", "\n", " ").Replace(label(r)))
	switch {
	case r.Skipped():
		fmt.Fprintf(t.w, "ok %d - %s # SKIP\n", t.n, desc)
	case r.Pass():
		fmt.Fprintf(t.w, "ok %d - %s\n", t.n, desc)
	default:
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
	s = t.summary(s)
	_, err := fmt.Fprintf(t.w, "1..%d\n# pass %d\n# fail %d\n", t.n, s.Passed, s.Failed)
	if err == nil && s.Skipped > 0 {
		_, err = fmt.Fprintf(t.w, "# skip %d\n", s.Skipped)
	}
	if err == nil && s.Filtered > 0 {
		_, err = fmt.Fprintf(t.w, "# filtered out %d\n", s.Filtered)
	}
	if err == nil && s.Only {
		_, err = fmt.Fprintf(t.w, "# %s\n", ErrOnly)
	}
	return end(s, err)
}

// junitReporter writes the JUnit XML that GitHub Actions, GitLab and Jenkins read: a
// testsuite per file, a testcase per test, failure with the message and stack.
type junitReporter struct {
	w      io.Writer
	suites []*junitSuite
	tally
}

type junitSuites struct {
	XMLName  xml.Name      `xml:"testsuites"`
	Name     string        `xml:"name,attr"`
	Tests    int           `xml:"tests,attr"`
	Failures int           `xml:"failures,attr"`
	Errors   int           `xml:"errors,attr"`
	Skipped  int           `xml:"skipped,attr,omitempty"`
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
	Skipped   *struct{}     `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

func secs(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

func (j *junitReporter) Result(r TestResult) {
	j.add(r)
	if r.Filtered() {
		return
	}
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
	if r.Skipped() {
		c.Skipped = &struct{}{}
		s.Skipped++
	}
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
	s = j.summary(s)
	all := junitSuites{Name: "hermes test", Time: secs(s.Duration), Suites: j.suites}
	for _, su := range j.suites {
		all.Tests += su.Tests
		all.Failures += su.Failures
		all.Errors += su.Errors
		all.Skipped += su.Skipped
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
	return end(s, err)
}

// jsonReporter writes one JSON object a line: {"type":"test",…} per test, then
// {"type":"summary",…}.
type jsonReporter struct {
	enc *json.Encoder
	tally
}

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
	j.add(r)
	if r.Filtered() {
		return
	}
	t := jsonTest{Type: "test", File: r.File, Name: r.Name, Status: "pass", DurationMS: r.Duration.Milliseconds(), Output: r.Output}
	if r.Skipped() {
		t.Status = "skipped"
	}
	if !r.Pass() {
		t.Status, t.Error, t.Kind = "fail", r.Message(), r.Kind()
		t.ErrFile, t.ErrLine = r.Location()
		t.Stack = stackOf(r.Err)
	}
	_ = j.enc.Encode(t)
}

func (j *jsonReporter) End(s Summary) error {
	s = j.summary(s)
	m := map[string]any{"type": "summary", "passed": s.Passed, "failed": s.Failed, "files": s.Files,
		"duration_ms": s.Duration.Milliseconds(), "ok": s.Failed == 0 && !s.Only}
	if s.Skipped > 0 {
		m["skipped"] = s.Skipped
	}
	if s.Filtered > 0 {
		m["filtered"] = s.Filtered
	}
	if s.Only {
		m["only"] = true
	}
	return end(s, j.enc.Encode(m))
}
