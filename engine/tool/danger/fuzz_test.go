package danger

import (
	"reflect"
	"testing"
)

// FuzzCheck: no input panics, the verdict is deterministic, Variants agrees with the variants
// Check used, and the fast path agrees with the plain expressions.
func FuzzCheck(f *testing.F) {
	for _, exs := range hardlineExamples {
		for _, e := range exs {
			f.Add(e.cmd)
		}
	}
	for _, exs := range dangerousExamples {
		for _, e := range exs {
			f.Add(e.cmd)
		}
	}
	for _, s := range []string{
		"", "'", `"`, "`", "$(", "$((", "<<", "<<EOF", "cat <<EOF\n", "\\", "\x1b", "\x1b]", "\u009b",
		"a\x00b", "(((((", ")))))", "{ ; }", "$(echo \"$(x`y`)\")", "cat <<-EOF\n\tx\n\tEOF\n)",
		"bash -c", "eval", "sudo", "sudo -u", "env -u", "timeout", "x=1", "\r\n", "ｒｍ -ｒｆ /",
		"setsid 0gAtewAY run", // a needle once demanded a word boundary the expression does not
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		r1 := Check(cmd, testOpts)
		r2 := Check(cmd, testOpts)
		if !reflect.DeepEqual(r1, r2) {
			t.Fatalf("Check(%q) not deterministic: %+v vs %+v", cmd, r1, r2)
		}
		if r1.Hardline && (r1.Reason == "" || len(r1.Matches) != 0) {
			t.Fatalf("Check(%q) = %+v: hardline needs a reason and no matches", cmd, r1)
		}
		if len(cmd) > MaxCommandBytes {
			return
		}
		vs := Variants(cmd, testOpts)
		if len(vs) == 0 {
			t.Fatalf("Variants(%q) is empty", cmd)
		}
		if err := fastPathAgrees(cmd, testOpts); err != "" {
			t.Fatal(err)
		}
	})
}

func BenchmarkCheck(b *testing.B) {
	for _, bc := range []struct{ name, cmd string }{
		{"safe", `ls -la src && git status --short | head -20`},
		{"safe_quoted", `git commit -m "fix: handle reboot; update docs" && git log --oneline -5`},
		{"dangerous", `cd /srv/app && git reset --hard origin/main && rm -rf build/ && sudo systemctl restart app`},
		{"hardline", `sudo rm -rf /`},
		{"heredoc", "cat > notes.md <<'EOF'\n" + "# Notes\n\nSome text about deployment.\n" + "EOF"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Check(bc.cmd, testOpts)
			}
		})
	}
}
