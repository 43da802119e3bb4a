package danger

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

const (
	rootWipe = "recursive delete of root filesystem"
	shutdown = "system shutdown/reboot"
)

// TestNormalisation checks that spellings the shell runs identically reach the same verdict.
func TestNormalisation(t *testing.T) {
	for _, tc := range []struct {
		name, cmd, want string // want: hardline reason, "" for not hardline
	}{
		{"fullwidth letters", "ｒｍ　－ｒｆ　／", rootWipe},
		{"fullwidth command word", "ＲＥＢＯＯＴ", shutdown},
		{"ANSI colour inside word", "r\x1b[0mm -rf /", rootWipe},
		{"ANSI CSI with params", "\x1b[1;31mreboot\x1b[0m", shutdown},
		{"OSC title", "\x1b]0;hello\x07reboot", shutdown},
		{"OSC with ST", "\x1b]8;;http://x\x1b\\reboot", shutdown},
		{"8-bit CSI", "\u009b31mreboot", shutdown},
		{"NUL bytes", "r\x00m -rf\x00 /", rootWipe},
		{"backslash inside word", `r\m -rf /`, rootWipe},
		{"empty single quotes", `r''m -rf /`, rootWipe},
		{"empty double quotes", `re""boot`, shutdown},
		{"quoted piece", `"r"m -rf /`, rootWipe},
		{"quoted command word", `'reboot'`, shutdown},
		{"quoted word behind sudo", `sudo -u root "rm" -rf /`, rootWipe},
		{"line continuation", "rm -rf \\\n/", rootWipe},
		{"CRLF continuation", "rm -rf \\\r\n/", rootWipe},
		{"escaped backslash is not a continuation", "echo a\\\\\nreboot", shutdown},
		{"IFS as separator", `rm${IFS}-rf${IFS}/`, rootWipe},
		{"IFS plain", `reboot$IFS`, shutdown},
		{"command substitution", `echo $(reboot)`, shutdown},
		{"command substitution in double quotes", `echo "$(reboot)"`, shutdown},
		{"backticks", "echo `reboot`", shutdown},
		{"nested substitution", `echo "$(echo "$(reboot)")"`, shutdown},
		{"sudo prefix", `sudo reboot`, shutdown},
		{"sudo with value option", `sudo -u root shutdown -h now`, shutdown},
		{"env prefix", `env X=1 reboot`, shutdown},
		{"assignment prefix", `X=1 Y=2 reboot`, shutdown},
		{"nohup prefix", `nohup reboot`, shutdown},
		{"exec prefix", `exec reboot`, shutdown},
		{"setsid and time", `setsid time reboot`, shutdown},
		{"absolute path", `/usr/sbin/reboot`, shutdown},
		{"wrapper chain", `sudo env X=1 nice -n 5 timeout 10 reboot`, shutdown},
		{"subshell", `(reboot)`, shutdown},
		{"brace group", `{ shutdown -h now; }`, shutdown},
		{"after &&", `make && reboot`, shutdown},
		{"keyword then", `if true; then reboot; fi`, shutdown},
		{"arithmetic shift is not a heredoc", "echo $((1<<2))\nreboot", shutdown},
		{"bash -c payload", `bash -c "reboot"`, shutdown},
		{"sh -c payload", `sh -c 'rm -rf /'`, rootWipe},
		{"nested -c payload", `bash -c "sh -c 'reboot'"`, shutdown},
		{"eval payload", `eval "reboot"`, shutdown},
		{"heredoc into a shell is code", "cat <<EOF | bash\nreboot\nEOF", shutdown},
		{"heredoc for bash is code", "bash <<EOF\nreboot\nEOF", shutdown},
		{"expanding heredoc runs substitutions", "cat <<EOF\n$(reboot)\nEOF", shutdown},
		{"command after heredoc", "cat <<EOF > x\nhello\nEOF\nreboot", shutdown},
		{"case is ignored", `RM -RF /`, rootWipe},

		{"quoted prose", `echo "reboot"`, ""},
		{"quoted separators", `echo 'a; reboot'`, ""},
		{"commit message", `git commit -m "rm -rf /"`, ""},
		{"multi-line commit message", "git commit -m \"fix\nreboot now\"", ""},
		{"grep pattern", `grep -rn 'shutdown' .`, ""},
		{"single-quoted substitution", `echo '$(reboot)'`, ""},
		{"quoted redirect prose", `echo "cat f > /dev/sda"`, ""},
		{"quoted fork bomb", `echo ':(){ :|:& };:'`, ""},
		{"comment", `ls # ; reboot`, ""},
		{"heredoc body is data", "cat > notes.md <<'EOF'\nreboot the host after upgrading\nrm -rf /\nEOF", ""},
		{"heredoc in commit message", "git commit -m \"$(cat <<'EOF'\nshutdown hook fixed\nEOF\n)\"", ""},
		{"literal heredoc does not expand", "cat <<'EOF'\n$(reboot)\nEOF", ""},
		{"echo argument", `echo reboot`, ""},
		{"command -v", `command -v reboot`, ""},
		{"eval of prose", `eval 'echo reboot'`, ""},
		{"escaped separator", `echo a\;reboot`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.cmd, testOpts)
			if got := map[bool]string{true: r.Reason, false: ""}[r.Hardline]; got != tc.want {
				t.Errorf("Check(%q) hardline reason = %q, want %q\n  variants: %q", tc.cmd, got, tc.want, Variants(tc.cmd, testOpts))
			}
		})
	}
}

func TestVariants(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		want []string
	}{
		{`ls -la`, []string{`ls -la`}},
		{"ｌｓ\x1b[0m", []string{`ls`}},
		{`(reboot)`, []string{"(reboot)", "(\nreboot)"}},
		{`echo "a;b"`, []string{`echo "a;b"`, `echo "   "`}},
		{`sudo "rm" x`, []string{`sudo "rm" x`, "sudo \nrm x", `sudo "  " x`}},
		{"a \\\nb", []string{"a b"}},
		{`cat /home/alice/.bashrc`, []string{`cat ~/.bashrc`}},
		{`bash -c 'ls'`, []string{`bash -c 'ls'`, "bash -c 'ls'", `ls`}},
	} {
		got := Variants(tc.cmd, testOpts)
		// The flat, marked and masked spellings merge when identical; compare as sets in order.
		want := slices.Compact(tc.want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Variants(%q) = %q, want %q", tc.cmd, got, want)
		}
	}
}

func TestHomeFolding(t *testing.T) {
	const redir = "overwrite system file via redirection"
	for _, tc := range []struct {
		cmd  string
		o    Options
		want bool
	}{
		{`echo x >> /home/alice/.bashrc`, testOpts, true},
		{`echo x >> //home/alice/.bashrc`, testOpts, true},
		{`echo x >> /HOME/ALICE/.bashrc`, testOpts, true},
		{`echo x >> /home/alice/.bashrc`, Options{}, false},
		{`echo x >> /home/alicex/.bashrc`, testOpts, false},
		{`echo x >> /srv/home/alice/.bashrc`, testOpts, false},
		{`echo x > /opt/hermes/config.yaml`, Options{HermesHome: "/opt/hermes/"}, true},
		{`echo x > /opt/hermes/config.yaml`, Options{Home: "/opt"}, false},
		{`echo x > /home/alice/.ssh/authorized_keys`, Options{Home: "/home/alice/"}, true},
		{`echo x > /home/alice/.ssh/authorized_keys`, Options{Home: "/"}, false},
		{`echo x > /home/alice/.ssh/authorized_keys`, Options{Home: "relative/alice"}, false},
	} {
		r := Check(tc.cmd, tc.o)
		got := slices.ContainsFunc(r.Matches, func(m Match) bool { return m.Key == redir })
		if got != tc.want {
			t.Errorf("Check(%q, %+v) redirect match = %v, want %v (variants %q)", tc.cmd, tc.o, got, tc.want, Variants(tc.cmd, tc.o))
		}
	}
}

func TestSudoStdinGuard(t *testing.T) {
	for _, tc := range []struct {
		cmd     string
		blocked bool
	}{
		{`sudo -S apt update`, true},
		{`echo guess | sudo -S true`, true},
		{`sudo -u root -S id`, true},
		{`sudo -kS ls`, true},
		{`sudo --stdin id`, true},
		{`env LANG=C sudo -S id`, true},
		{`ls && sudo -S id`, true},
		{`sudo -s`, false},            // a shell, not stdin: needs approval instead
		{`echo "sudo -S id"`, false},  // prose
		{`sudo apt -S x`, false},      // apt's flag, not sudo's
		{`grep 'sudo -S' log`, false}, // data
	} {
		r := Check(tc.cmd, testOpts)
		got := r.Hardline && r.Reason == ReasonSudoStdin
		if got != tc.blocked {
			t.Errorf("Check(%q) = %+v, want sudo guard %v", tc.cmd, r, tc.blocked)
		}
		withPw := Check(tc.cmd, Options{SudoPasswordConfigured: true})
		if withPw.Hardline && withPw.Reason == ReasonSudoStdin {
			t.Errorf("Check(%q) with a configured password still blocked by the sudo guard", tc.cmd)
		}
	}
	// With a password configured an explicit -S still needs approval.
	r := Check(`sudo -S apt update`, Options{SudoPasswordConfigured: true})
	if r.Hardline || !slices.Contains(keysOf(r), "sudo with privilege flag (stdin/askpass/shell/list)") {
		t.Errorf("Check(sudo -S) with password = %+v, want the sudo privilege-flag approval", r)
	}
}

func TestCheckResultShape(t *testing.T) {
	if r := Check(`ls -la && git status`, testOpts); r.Hardline || r.Reason != "" || len(r.Matches) != 0 {
		t.Errorf("safe command: %+v", r)
	}
	if r := Check("", testOpts); r.Hardline || len(r.Matches) != 0 {
		t.Errorf("empty command: %+v", r)
	}
	// Matches are deduplicated (two expressions share this key) and in rule order.
	r := Check(`nohup hermes gateway run & disown; git push -f && rm -rf build`, testOpts)
	want := []string{"recursive delete", KeyGatewayOutsideSystemd, KeyGitForcePushShort}
	if got := keysOf(r); !reflect.DeepEqual(got, want) {
		t.Errorf("Matches = %q, want %q", got, want)
	}
	// Hardline wins and carries no approval matches.
	r = Check(`git push --force; rm -rf /`, testOpts)
	if !r.Hardline || r.Reason != rootWipe || r.Matches != nil {
		t.Errorf("hardline result = %+v", r)
	}
}

func TestTooLong(t *testing.T) {
	long := strings.Repeat("a", MaxCommandBytes+1)
	if r := Check(long, testOpts); !r.Hardline || r.Reason != ReasonTooLong {
		t.Errorf("Check(long) = %+v, want %q", r, ReasonTooLong)
	}
	if v := Variants(long, testOpts); v != nil {
		t.Errorf("Variants(long) = %d variants, want none", len(v))
	}
	ok := "echo " + strings.Repeat("a", MaxCommandBytes-5)
	if r := Check(ok, testOpts); r.Hardline {
		t.Errorf("Check(at limit) = %+v, want not blocked", r.Reason)
	}
}

func TestPayloadDepthIsBounded(t *testing.T) {
	cmd := "reboot"
	for range 10 {
		cmd = "bash -c " + shellQuote(cmd)
	}
	// Deeper than maxPayloadDepth: the innermost reboot is not reached, but the call returns
	// promptly and still flags the shell -c for approval.
	r := Check(cmd, testOpts)
	if !slices.Contains(keysOf(r), "shell command via -c/-lc flag") && !r.Hardline {
		t.Errorf("Check(nested) = %+v", r)
	}
	if n := len(Variants(cmd, testOpts)); n > maxVariants+3 {
		t.Errorf("nested payloads produced %d variants, want at most %d", n, maxVariants+3)
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func keysOf(r Result) []string {
	out := make([]string, len(r.Matches))
	for i, m := range r.Matches {
		out[i] = m.Key
	}
	return out
}

func TestStripEscapes(t *testing.T) {
	for in, want := range map[string]string{
		"plain":               "plain",
		"\x1b[31mred\x1b[0m":  "red",
		"\x1b]0;t\x07x":       "x",
		"\x1b]0;t\x1b\\x":     "x",
		"\x1b(Bx":             "x",
		"\x1b=x":              "x",
		"\x1b]unterminated x": "unterminated x",
		"\x1b[":               "",
		"a\x1b":               "a",
		"\u009b1mx\u009dt\a!": "x!",
	} {
		if got := stripEscapes(in); got != want {
			t.Errorf("stripEscapes(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFoldHome(t *testing.T) {
	for _, tc := range []struct{ s, dir, repl, want string }{
		{"cat /home/a/x", "/home/a", "~", "cat ~/x"},
		{"cd /home/a", "/home/a", "~", "cd ~"},
		{"cd /home/a;ls", "/home/a", "~", "cd ~;ls"},
		{"x=/home/a/y", "/home/a", "~", "x=~/y"},
		{"/home/ab/x", "/home/a", "~", "/home/ab/x"},
		{"a/home/a/x", "/home/a", "~", "a/home/a/x"},
		{"/home/a/x /home/a/y", "/home/a/", "~", "~/x ~/y"},
		{"/home/a", "", "~", "/home/a"},
	} {
		if got := foldHome(tc.s, tc.dir, tc.repl); got != tc.want {
			t.Errorf("foldHome(%q, %q) = %q, want %q", tc.s, tc.dir, got, tc.want)
		}
	}
}

// TestLargeInputs runs shapes that once made the scanner or the anchored matching quadratic
// (every command start re-reading one long word, every candidate offset re-scanning to the end).
// A regression shows up as this test running for minutes. Each input ends in a real command,
// which must still be found.
func TestLargeInputs(t *testing.T) {
	const n = 4000
	for name, tc := range map[string]struct {
		body string
		want string // hardline reason for body + "\nreboot"
	}{
		"backticks":       {strings.Repeat("`", 2*n), shutdown},
		"substitutions":   {strings.Repeat("$(", n), shutdown},
		"quoted subst":    {strings.Repeat(`"$(`, n) + strings.Repeat(`)"`, n), shutdown},
		"parentheses":     {strings.Repeat("(", n), shutdown},
		"keywords":        {strings.Repeat("if ", n), shutdown},
		"sudo options":    {"sudo " + strings.Repeat("-u x ", n), shutdown},
		"eval words":      {strings.Repeat("eval ", n), shutdown},
		"redirects":       {strings.Repeat("> ", n), shutdown},
		"git candidates":  {strings.Repeat("git push x ", n) + " ++", shutdown},
		"rm lines":        {strings.Repeat("rm -rf /tmp/x\n", n), shutdown},
		"sed candidates":  {strings.Repeat("sed -i x ~/a ", n), shutdown},
		"heredoc markers": {strings.Repeat("cat <<EOF\n", n), ""}, // the reboot line is heredoc data
		"unclosed quote":  {`echo "` + strings.Repeat("a;", n), ""},
	} {
		cmd := tc.body + "\nreboot"
		r := Check(cmd, testOpts)
		if got := map[bool]string{true: r.Reason}[r.Hardline]; got != tc.want {
			t.Errorf("%s: hardline reason %q, want %q", name, got, tc.want)
		}
		if !reflect.DeepEqual(r, Check(cmd, testOpts)) {
			t.Errorf("%s: Check not deterministic", name)
		}
	}
}
