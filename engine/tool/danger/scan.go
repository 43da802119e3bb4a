package danger

import (
	"slices"
	"strings"
)

// scan is the result of one quote-aware pass over a prepared command. It never expands or
// executes anything; it only finds where the shell would start a command and which text is
// data (quoted, or a heredoc body that no shell reads).
type scan struct {
	src     string
	starts  []int  // command starts after ; & | ( { $( ` newline, keywords and `)` of case
	marks   []int  // real command words after wrappers (sudo -u x <here>rm)
	dataNL  []int  // newlines inside quotes or heredoc bodies: data, not separators
	blanks  []span // quoted data, blanked in the masked variant
	words   []edit // command words spelled in pieces ("r"m, r\m) and their plain spelling
	carrier bool   // some command hands quoted text to a shell (eval, sh -c, source)
	// payloads are the command strings of `sh -c STRING` and `eval ARGS`, inspected as
	// commands of their own.
	payloads []string
	// budget bounds the bytes read by the command-word pass. Command starts nested in one long
	// word (`$($($(...`) would otherwise each re-read it, which is quadratic; past the budget
	// the remaining starts keep their newline but are not inspected further.
	budget int
}

type span struct{ from, to int }

// edit replaces src[at:end] with text; at == end inserts.
type edit struct {
	at, end int
	text    string
}

type heredoc struct {
	delim     string
	stripTabs bool
	expand    bool // unquoted delimiter: $( ) and backticks in the body run
}

// frame is one lexical context: the top level, a $( ) or a backtick substitution. A
// substitution inside double quotes starts with fresh quoting, which is why quote state lives
// in the frame.
type frame struct {
	closer    byte // 0 at top level, ')' for $( ), '`' for backticks
	arith     bool // $(( )): << is a shift, not a heredoc
	quote     byte // 0, '\'', '"', or heredoc body: 'h' literal, 'H' expanding
	depth     int  // unmatched ( inside this frame
	blankFrom int  // start of the quoted run being recorded for masking; -1 when none
	lastSig   byte // last significant unquoted byte: a quote after > is a redirect target
	pending   []heredoc
	body      heredoc
}

// lex scans s. All syntax of interest is ASCII, so it walks bytes; UTF-8 continuation bytes
// never equal a metacharacter.
func lex(s string) *scan {
	sc := &scan{src: s, budget: 4*len(s) + 4096}
	st := []frame{{blankFrom: -1}}
	n := len(s)
	for i := 0; i < n; {
		f := &st[len(st)-1]
		c := s[i]
		switch f.quote {
		case '\'':
			switch c {
			case '\'':
				sc.closeBlank(f, i)
				f.quote = 0
				f.lastSig = c
			case '\n':
				sc.dataNL = append(sc.dataNL, i)
			}
			i++
			continue
		case 'h', 'H':
			if c == '\n' {
				sc.dataNL = append(sc.dataNL, i)
				if end, ok := heredocEnd(s, i+1, f); ok {
					sc.closeBlank(f, i+1)
					f.quote = 0
					i = end
					continue
				}
				i++
				continue
			}
			if f.quote == 'h' {
				i++
				continue
			}
			fallthrough // an expanding body runs substitutions like a double-quoted string
		case '"':
			switch {
			case c == '\\' && i+1 < n:
				i += 2
				continue
			case c == '"' && f.quote == '"':
				sc.closeBlank(f, i)
				f.quote = 0
				f.lastSig = c
			case c == '\n':
				sc.dataNL = append(sc.dataNL, i)
			case c == '$' && i+1 < n && s[i+1] == '(', c == '`':
				sc.closeBlank(f, i)
				st = sc.push(st, s, i)
				i = sc.openLen(s, i)
				continue
			}
			i++
			continue
		}

		// Unquoted.
		switch c {
		case ' ', '\t', '\r':
			i++
			continue
		case '\\':
			f.lastSig = c
			i += 2
			continue
		case '\'', '"':
			f.quote = c
			if f.lastSig != '>' { // a quoted redirect target is a path, not prose
				f.blankFrom = i + 1
			}
			f.lastSig = c
			i++
			continue
		case '#':
			if i == 0 || isBlank(s[i-1]) || strings.IndexByte(";&|()<>\n", s[i-1]) >= 0 {
				for i < n && s[i] != '\n' {
					i++
				}
				continue
			}
		case '$':
			if i+1 < n && s[i+1] == '(' {
				st = sc.push(st, s, i)
				i = sc.openLen(s, i)
				continue
			}
		case '`':
			if f.closer == '`' {
				st = sc.pop(st, i+1)
			} else {
				st = sc.push(st, s, i)
			}
			i++
			continue
		case '(':
			f.depth++
			sc.starts = append(sc.starts, i+1)
		case ')':
			switch {
			case f.depth > 0:
				f.depth--
			case f.closer == ')':
				if f.arith && i+1 < n && s[i+1] == ')' {
					i++ // $(( )) closes with two parentheses
				}
				st = sc.pop(st, i+1)
				i++
				continue
			default: // a case pattern: `x) cmd`
				sc.starts = append(sc.starts, i+1)
			}
		case '{':
			if (i == 0 || isBlank(s[i-1]) || strings.IndexByte(";&|()\n", s[i-1]) >= 0) && (i+1 == n || isSpace(s[i+1])) {
				sc.starts = append(sc.starts, i+1)
			}
		case ';':
			sc.starts = append(sc.starts, i+1)
		case '&':
			switch {
			case i > 0 && (s[i-1] == '>' || s[i-1] == '<'): // >&2
			case i+1 < n && s[i+1] == '>': // &> file
			case i+1 < n && s[i+1] == '&':
				i++
				sc.starts = append(sc.starts, i+1)
			default:
				sc.starts = append(sc.starts, i+1)
			}
		case '|':
			if i > 0 && s[i-1] == '>' { // >| file
				break
			}
			if i+1 < n && (s[i+1] == '|' || s[i+1] == '&') {
				i++
			}
			sc.starts = append(sc.starts, i+1)
		case '<':
			if i+1 < n && s[i+1] == '<' {
				if i+2 < n && s[i+2] == '<' { // here-string
					f.lastSig = '<'
					i += 3
					continue
				}
				if h, end, ok := readHeredocOp(s, i+2); ok && !f.arith {
					f.pending = append(f.pending, h)
					f.lastSig = 'w'
					i = end
					continue
				}
			}
		case '\n':
			if len(f.pending) > 0 {
				f.body, f.pending = f.pending[0], f.pending[1:]
				if lineHasCarrier(s, i) {
					f.pending = nil // every body started on this line is code
				} else {
					f.quote = 'h'
					if f.body.expand {
						f.quote = 'H'
					}
					f.blankFrom = i + 1
					sc.dataNL = append(sc.dataNL, i)
					if end, ok := heredocEnd(s, i+1, f); ok {
						sc.closeBlank(f, i+1)
						f.quote = 0
						i = end
						continue
					}
					i++
					continue
				}
			}
			sc.starts = append(sc.starts, i+1)
		}
		f.lastSig = c
		i++
	}
	sc.commandWords()
	return sc
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' }
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// openLen is the index just after the substitution opener at i.
func (sc *scan) openLen(s string, i int) int {
	if s[i] == '`' {
		return i + 1
	}
	if i+2 < len(s) && s[i+2] == '(' {
		return i + 3
	}
	return i + 2
}

// push opens a substitution at i and records the command start inside it.
func (sc *scan) push(st []frame, s string, i int) []frame {
	f := frame{blankFrom: -1}
	if s[i] == '`' {
		f.closer = '`'
	} else {
		f.closer = ')'
		f.arith = i+2 < len(s) && s[i+2] == '('
	}
	sc.starts = append(sc.starts, sc.openLen(s, i))
	return append(st, f)
}

// pop closes the innermost substitution; a quoted run of the enclosing frame resumes at resume.
func (sc *scan) pop(st []frame, resume int) []frame {
	if len(st) == 1 {
		return st
	}
	st = st[:len(st)-1]
	if p := &st[len(st)-1]; p.quote != 0 && p.quote != 'h' {
		p.blankFrom = resume
	}
	return st
}

func (sc *scan) closeBlank(f *frame, to int) {
	if f.blankFrom >= 0 && to > f.blankFrom {
		sc.blanks = append(sc.blanks, span{f.blankFrom, to})
	}
	f.blankFrom = -1
}

// maxDelimiter bounds the heredoc delimiter word; real ones are a few letters.
const maxDelimiter = 256

// readHeredocOp reads the `[-]WORD` after `<<` at i. Only plain delimiters (letters, digits,
// _ . -; optionally quoted) that start with a letter or underscore are accepted: anything else
// is more likely arithmetic or a typo, and treating it as a heredoc would hide the rest of the
// script from the rules.
func readHeredocOp(s string, i int) (heredoc, int, bool) {
	var h heredoc
	if i < len(s) && s[i] == '-' {
		h.stripTabs = true
		i++
	}
	for i < len(s) && isBlank(s[i]) {
		i++
	}
	w := readWord(s, i, maxDelimiter)
	d := w.val
	if w.end == i || !w.clean || d == "" {
		return h, 0, false
	}
	if c := d[0]; !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
		return h, 0, false
	}
	for j := 0; j < len(d); j++ {
		c := d[j]
		if !(c == '_' || c == '.' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return h, 0, false
		}
	}
	h.delim, h.expand = d, !w.quoted
	return h, w.end, true
}

// heredocEnd reports whether the line at i closes the body of f, and the index after the
// delimiter. Inside $( ) bash also accepts the delimiter directly followed by `)`.
func heredocEnd(s string, i int, f *frame) (int, bool) {
	j := i
	if f.body.stripTabs {
		for j < len(s) && s[j] == '\t' {
			j++
		}
	}
	if !strings.HasPrefix(s[j:], f.body.delim) {
		return 0, false
	}
	k := j + len(f.body.delim)
	if k == len(s) || s[k] == '\n' || s[k] == '\r' || (f.closer == ')' && s[k] == ')') {
		return k, true
	}
	return 0, false
}

// carriers read their input or arguments as shell code.
var carriers = map[string]bool{
	"sh": true, "bash": true, "zsh": true, "ksh": true, "dash": true, "fish": true, "csh": true,
	"tcsh": true, "eval": true, "source": true, ".": true, "xargs": true, "su": true, "ssh": true,
}

// lineHasCarrier reports whether the line ending at nl names a shell-like program anywhere, in
// which case a heredoc started on it is code (`cat <<EOF | bash`), not data.
func lineHasCarrier(s string, nl int) bool {
	line := s[strings.LastIndexByte(s[:nl], '\n')+1 : nl]
	for _, tok := range strings.FieldsFunc(line, func(r rune) bool {
		return r == ' ' || r == '\t' || strings.ContainsRune(";&|()<>'\"`$", r)
	}) {
		if carriers[strings.ToLower(tok[strings.LastIndexByte(tok, '/')+1:])] {
			return true
		}
	}
	return false
}

// word is one shell word read without expansion.
type word struct {
	end    int
	val    string // quotes and escapes removed
	quoted bool   // held a quote or backslash
	clean  bool   // no expansion and no unterminated quote: val is what the shell sees
}

// readWord reads the word starting at i (which must not be blank), looking at most limit
// bytes ahead: a longer word is cut there and marked unclean.
func readWord(s string, i, limit int) word {
	w := word{clean: true}
	var b []byte
	n := len(s)
	if limit < n-i {
		n = i + limit
	}
loop:
	for i < n {
		c := s[i]
		switch c {
		case ' ', '\t', '\r', '\n', ';', '&', '|', '<', '>', '(', ')':
			break loop
		case '\\':
			w.quoted = true
			if i+1 < n {
				b = append(b, s[i+1])
			}
			i += 2
		case '\'':
			w.quoted = true
			j := strings.IndexByte(s[i+1:n], '\'')
			if j < 0 {
				w.clean = false
				b = append(b, s[i+1:n]...)
				i = n
				break
			}
			b = append(b, s[i+1:i+1+j]...)
			i += j + 2
		case '"':
			w.quoted = true
			i++
			for i < n && s[i] != '"' {
				if s[i] == '\\' && i+1 < n && strings.IndexByte("$`\"\\", s[i+1]) >= 0 {
					b = append(b, s[i+1])
					i += 2
					continue
				}
				if s[i] == '$' || s[i] == '`' {
					w.clean = false
				}
				b = append(b, s[i])
				i++
			}
			if i >= n {
				w.clean = false
			}
			i++
		case '$':
			w.clean = false
			end := i + 1
			if i+1 < n && s[i+1] == '(' {
				end = matchParen(s[:n], i+1)
			}
			b = append(b, s[i:end]...)
			i = end
		case '`':
			w.clean = false
			end := n
			if j := strings.IndexByte(s[i+1:n], '`'); j >= 0 {
				end = i + j + 2
			}
			b = append(b, s[i:end]...)
			i = end
		default:
			b = append(b, c)
			i++
		}
	}
	w.end = min(i, n)
	w.val = string(b)
	if w.end == n && n < len(s) {
		w.clean = false // cut at the limit
	}
	return w
}

// matchParen returns the index after the ) matching the ( at i, or len(s).
func matchParen(s string, i int) int {
	depth := 0
	var q byte
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case q != 0:
			if c == q {
				q = 0
			} else if c == '\\' && q == '"' {
				i++
			}
		case c == '\\':
			i++
		case c == '\'' || c == '"':
			q = c
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return len(s)
}

// keywords are followed by a command.
var keywords = map[string]bool{
	"if": true, "then": true, "else": true, "elif": true, "do": true, "while": true,
	"until": true, "!": true, "{": true,
}

// wrapper describes a command that runs its operand as a command.
type wrapper struct {
	withArg    []string // options that consume the next word
	positional int      // operands before the command (timeout DURATION)
	// query reports whether an option makes the wrapper inspect instead of run
	// (command -v, sudo -l): the next word is then data.
	query func(opt string) bool
}

var wrappers = map[string]wrapper{
	"sudo": {withArg: []string{"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T",
		"--user", "--group", "--host", "--prompt", "--close-from", "--chdir", "--role", "--type",
		"--other-user", "--command-timeout"},
		query: func(o string) bool {
			return slices.Contains([]string{"-l", "-ll", "--list", "-e", "--edit", "-v", "--validate",
				"-V", "--version", "-K", "--remove-timestamp"}, o)
		}},
	"doas":    {withArg: []string{"-u", "-C"}},
	"env":     {withArg: []string{"-u", "--unset", "-C", "--chdir", "-a", "--argv0"}},
	"exec":    {withArg: []string{"-a"}},
	"nohup":   {},
	"setsid":  {},
	"time":    {withArg: []string{"-f", "--format", "-o", "--output"}},
	"command": {query: hasLetter("vV")},
	"builtin": {},
	"nice":    {withArg: []string{"-n", "--adjustment"}},
	"timeout": {withArg: []string{"-s", "--signal", "-k", "--kill-after"}, positional: 1},
	"stdbuf":  {withArg: []string{"-i", "-o", "-e"}},
	"ionice":  {withArg: []string{"-c", "--class", "-n", "--classdata"}, query: hasLetter("p")},
	"chrt":    {positional: 1, query: hasLetter("p")},
	"taskset": {positional: 1, query: hasLetter("p")},
	"chroot":  {withArg: []string{"--userspec", "--groups"}, positional: 1},
}

// hasLetter reports whether a short option group holds one of letters.
func hasLetter(letters string) func(string) bool {
	return func(o string) bool {
		return len(o) > 1 && o[1] != '-' && strings.ContainsAny(o[1:], letters)
	}
}

// word reads a word for the command-word pass, charging it to the budget.
func (sc *scan) word(i int) word {
	w := readWord(sc.src, i, max(sc.budget, 1))
	sc.budget -= w.end - i + 1
	return w
}

func (sc *scan) skipBlanks(i int) int {
	for i < len(sc.src) && isBlank(sc.src[i]) {
		i++
	}
	return i
}

// commandWords walks every command start: it marks the real command word behind wrappers and
// leading assignments, rewrites a word spelled in pieces to its plain spelling, follows shell
// keywords to the command after them, and collects -c and eval payloads.
func (sc *scan) commandWords() {
	queue := append([]int{0}, sc.starts...)
	seen := make(map[int]bool, len(queue))
	for len(queue) > 0 && sc.budget > 0 {
		p := queue[0]
		queue = queue[1:]
		if p >= len(sc.src) || seen[p] {
			continue
		}
		seen[p] = true
		if next, ok := sc.command(p); ok {
			sc.starts = append(sc.starts, next)
			queue = append(queue, next)
		}
	}
}

// command inspects the command starting at p. It returns the start of a further command when
// the first word is a keyword (`then reboot`).
func (sc *scan) command(p int) (int, bool) {
	s := sc.src
	first := sc.skipBlanks(p)
	pos := first
	var wr *wrapper
	for {
		pos = sc.skipBlanks(pos)
		if pos >= len(s) {
			return 0, false
		}
		if r := redirectLen(s, pos); r > 0 { // `>log cmd`: the target is not the command
			pos = sc.skipBlanks(pos + r)
			if pos < len(s) {
				pos = sc.word(pos).end
			}
			continue
		}
		w := sc.word(pos)
		if w.end == pos {
			return 0, false
		}
		v := w.val
		if w.quoted && w.clean && v != "" && !strings.ContainsAny(v, " \t\n") {
			sc.words = append(sc.words, edit{pos, w.end, v})
		}
		lv := strings.ToLower(v)
		if wr == nil && pos == first && keywords[lv] {
			return w.end, true
		}
		if isAssignment(s[pos:w.end]) {
			pos = w.end
			continue
		}
		if pos != first {
			sc.marks = append(sc.marks, pos)
		}
		base := lv[strings.LastIndexByte(lv, '/')+1:]
		if spec, ok := wrappers[base]; ok {
			next, stop := sc.wrapperArgs(spec, w.end)
			if stop {
				return 0, false
			}
			wr, pos = &spec, next
			continue
		}
		if carriers[base] && base != "xargs" && base != "su" && base != "ssh" {
			sc.carrier = true
		}
		switch base {
		case "sh", "bash", "zsh", "ksh", "dash":
			sc.shellPayload(w.end)
		case "eval":
			sc.evalPayload(w.end)
		}
		return 0, false
	}
}

// redirectLen is the length of a redirection operator at i ([n]>, >>, <, &>, >&, ...), or 0.
func redirectLen(s string, i int) int {
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j < len(s) && s[j] == '&' && j+1 < len(s) && s[j+1] == '>' {
		j++
	}
	if j >= len(s) || (s[j] != '<' && s[j] != '>') {
		return 0
	}
	k := j + 1
	for k < len(s) && k < j+3 && strings.IndexByte("<>&|", s[k]) >= 0 {
		k++
	}
	return k - i
}

// wrapperArgs skips a wrapper's options and leading operands and returns where its command
// word starts; stop is set when there is none or the wrapper only inspects it.
func (sc *scan) wrapperArgs(spec wrapper, pos int) (int, bool) {
	s := sc.src
	positional := spec.positional
	for {
		pos = sc.skipBlanks(pos)
		if pos >= len(s) {
			return pos, true
		}
		w := sc.word(pos)
		if w.end == pos {
			return pos, true
		}
		v := w.val
		switch {
		case v == "--":
			pos = w.end
			continue
		case len(v) > 1 && v[0] == '-':
			if spec.query != nil && spec.query(v) {
				return pos, true
			}
			pos = w.end
			if slices.Contains(spec.withArg, v) {
				pos = sc.skipBlanks(pos)
				if pos < len(s) {
					pos = sc.word(pos).end
				}
			}
			continue
		case positional > 0:
			positional--
			pos = w.end
			continue
		}
		return pos, false
	}
}

// shellPayload records the command string of `sh [opts] -c STRING`.
func (sc *scan) shellPayload(pos int) {
	s := sc.src
	for {
		pos = sc.skipBlanks(pos)
		if pos >= len(s) {
			return
		}
		w := sc.word(pos)
		v := w.val
		if w.end == pos || v == "--" || v == "-" || len(v) < 2 || (v[0] != '-' && v[0] != '+') {
			return
		}
		pos = w.end
		switch v {
		case "-o", "+o", "-O", "+O", "--rcfile", "--init-file":
			pos = sc.skipBlanks(pos)
			if pos < len(s) {
				pos = sc.word(pos).end
			}
			continue
		}
		if v[0] == '-' && v[1] != '-' && strings.IndexByte(v, 'c') > 0 {
			pos = sc.skipBlanks(pos)
			if pos < len(s) {
				if p := sc.word(pos); p.end > pos {
					sc.payloads = append(sc.payloads, p.val)
				}
			}
			return
		}
	}
}

// evalPayload records the words of `eval ARGS` joined as the shell would.
func (sc *scan) evalPayload(pos int) {
	s := sc.src
	var parts []string
	for {
		pos = sc.skipBlanks(pos)
		if pos >= len(s) {
			break
		}
		w := sc.word(pos)
		if w.end == pos {
			break
		}
		parts = append(parts, w.val)
		pos = w.end
	}
	if len(parts) > 0 {
		sc.payloads = append(sc.payloads, strings.Join(parts, " "))
	}
}

func isAssignment(raw string) bool {
	eq := strings.IndexByte(raw, '=')
	if eq <= 0 {
		return false
	}
	for i := 0; i < eq; i++ {
		c := raw[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// render applies the scan to its source: data newlines become spaces in every variant;
// marked adds a newline at each command start and before each real command word and plain-
// spells pieced command words; masked blanks quoted data instead. The masked variant keeps the
// text otherwise as written: its rules have no command word to anchor, and an inserted newline
// would split the shapes they look for (`:(){ :|:& };:`).
func (sc *scan) render(marked, masked bool) string {
	s := sc.src
	var es []edit
	for _, i := range sc.dataNL {
		es = append(es, edit{i, i + 1, " "})
	}
	if marked {
		for _, p := range sc.starts {
			if p > 0 && p < len(s) {
				es = append(es, edit{p, p, "\n"})
			}
		}
		for _, p := range sc.marks {
			es = append(es, edit{p, p, "\n"})
		}
		es = append(es, sc.words...)
	}
	if masked {
		for _, b := range sc.blanks {
			es = append(es, edit{b.from, b.to, strings.Repeat(" ", b.to-b.from)})
		}
	}
	if len(es) == 0 {
		return s
	}
	slices.SortStableFunc(es, func(a, b edit) int {
		if a.at != b.at {
			return a.at - b.at
		}
		return (a.end - a.at) - (b.end - b.at) // inserts before replacements
	})
	var out strings.Builder
	out.Grow(len(s) + len(es))
	cur := 0
	lastInsert := -1
	for _, e := range es {
		if e.at < cur || (e.at == e.end && e.at == lastInsert) {
			continue // overlaps an applied replacement, or a duplicate insert
		}
		out.WriteString(s[cur:e.at])
		out.WriteString(e.text)
		cur = e.end
		if e.at == e.end {
			lastInsert = e.at
		}
	}
	out.WriteString(s[cur:])
	return out.String()
}
