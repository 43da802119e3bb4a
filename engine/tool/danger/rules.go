package danger

import (
	"regexp"
	"strings"
	"sync"
)

// Building blocks of the rule table. Every rule is compiled with (?is): matching is
// case-insensitive and `.` crosses newlines, so a rule written for one line also sees a
// multi-line script. Go's RE2 has no lookaround, so "preceded by" conditions are written as
// consumed context (a block device must directly follow `>` or `of=`), "not followed by" and
// "both somewhere" conditions are done in code (unlessTail, allOf), and no quantifier needs to
// be possessive because RE2 matches in linear time anyway.
const (
	// pathPrefix is an optional absolute directory prefix of a command word (/sbin/reboot,
	// /usr/bin/env). Relative prefixes are deliberately not accepted: ./reboot is the user's
	// own script, not the system command.
	pathPrefix = `(?:(?:/[\w.+-]+)*/)?`

	// sudoOpts is sudo's own option region: options that take a value (case-sensitive,
	// sudo -u root vs -U user both take one, -H does not) consume it, so the command that
	// follows is not mistaken for an option argument.
	sudoOpts = `(?:(?-i:-[ugpCDrtUTh])\s+\S+\s+|-\S+\s+)*`

	// wrap consumes command prefixes that run the next word as the command: sudo [opts],
	// env [opts] [VAR=VAL...], exec/nohup/setsid/time/command/builtin and bare VAR=VAL
	// assignments.
	wrap = `(?:` + pathPrefix + `(?:sudo\s+` + sudoOpts + `|env\s+(?:-\S+\s+|\w+=\S*\s+)*|(?:exec|nohup|setsid|time|command|builtin)\s+)|\w+=\S*\s+)*`

	// cmdpos is a command position: rules built with at() are tried at the start of the text
	// and after every newline, then skip blanks and any wrappers. Other command starts (after
	// ; & | ( { $( ` and shell keywords) are turned into newlines by the quote-aware scanner in
	// the marked variant, which is why no separator appears here: listing them here would also
	// fire inside quoted prose.
	cmdpos = `\s*` + wrap + pathPrefix

	// cmdend ends a command word: `reboot.sh` is not `reboot`.
	cmdend = "(?:[\\s;&|)<>\\x60]|$)"

	// Shells whose -c payload, heredoc or piped stdin is executed.
	shells = `(?:bash|sh|zsh|ksh|dash)`
	// shellWord is a shell name used as a word: deploy.sh -c is not sh -c.
	shellWord = "(?:^|[\\s/;&|(\\x60'\"])" + shells
	// pipeShell is `| [sudo] [path/]shell` at the end of a pipeline stage.
	pipeShell = `\|\s*(?:sudo\s+` + sudoOpts + `)?(?:[\w./-]*/)?` + shells + cmdend

	// Raw block devices. Writing one destroys a disk (or the array/volume behind it):
	// Linux SCSI/IDE/virtio/Xen/NVMe/eMMC, md RAID, device-mapper, loop and nbd devices,
	// macOS disks (bare /dev/disk is a directory, so a digit is required) and udev's stable
	// by-* names.
	blockDev = `/dev/(?:(?:sd|hd|vd|xvd|nvme|mmcblk|md|dm-|loop|nbd)[a-z0-9]*` +
		`|r?disk[0-9]+[a-z0-9]*` +
		`|mapper/[^\s;&|<>()"']+` +
		`|disk/by-(?:id|uuid|path|label|partuuid|partlabel)/[^\s;&|<>()"']+)`

	// System configuration; on macOS /etc, /var, /tmp and /home are symlinks into /private.
	sysConfig = `(?:/etc/|/private/(?:etc|var|tmp|home)/)`

	// Home-relative sensitive files. Absolute home prefixes are folded to ~/ (and the
	// profile home to ~/.hermes/) before matching, so these spellings cover them too.
	homeRef     = `(?:~|\$home|\$\{home\})`
	sshPath     = homeRef + `/\.ssh(?:/|$|[\s"';&|)])`
	hermesDir   = `(?:~/\.hermes/|` + homeRef + `/\.hermes/|(?:\$hermes_home|\$\{hermes_home\})/)`
	hermesEnv   = hermesDir + `\.env\b`
	hermesCfg   = hermesDir + `config\.yaml\b`
	shellRC     = homeRef + `/\.(?:bashrc|zshrc|profile|bash_profile|zprofile)\b`
	credentials = homeRef + `/\.(?:netrc|pgpass|npmrc|pypirc)\b`

	// Project files: any .env / .env.<suffix> and any config.yaml, at any depth.
	projectEnv = "(?:(?:/|\\.{1,2}/)?(?:[^\\s/\"'\\x60]+/)*\\.env(?:\\.[^/\\s\"'\\x60]+)*)"
	projectCfg = "(?:(?:/|\\.{1,2}/)?(?:[^\\s/\"'\\x60]+/)*config\\.yaml)"

	sensitiveTarget = `(?:` + sysConfig + `|` + blockDev + `|` + sshPath + `|` + hermesEnv + `|` +
		hermesCfg + `|` + shellRC + `|` + credentials + `)`
	userSensitive    = `(?:` + sshPath + `|` + shellRC + `|` + credentials + `)`
	projectSensitive = `(?:` + projectEnv + `|` + projectCfg + `)`
	hermesSensitive  = `(?:` + hermesCfg + `|` + hermesEnv + `)`

	// writeEnd ends a redirect/tee target at a shell word boundary; `#` is not one, a glued
	// `#` is part of the file name.
	writeEnd = `(?:[\s;&|<>"']|$)`
	// lastArg requires the match to be the last argument of its command (cp/mv/install
	// destination), so reading out of a sensitive path stays unflagged.
	lastArg = `(?:[ \t]*(?:&&|\|\||;|&|\||\n).*)?$`

	// Global options before a subcommand, each with an optional value that is not itself an
	// option (hermes -p work gateway stop, git -C dir push).
	globalFlags = `(?:-\S+(?:\s+[^-\s]\S*)?\s+)*`
	// Docker/compose global options take a value after exactly one blank.
	containerFlags = `(?:-\S+(?:\s[^-\s]\S*)?\s+)*`

	// worldWritable is a chmod mode granting write to others: 777/666, or a symbolic clause
	// whose who-list includes o or a and whose permissions include w (o+w, a+rwx, ugo=rw).
	worldWritable = `(?:0?777|0?666|[ugo]*[oa][ugoa]*[+=][rwxXst]*w[rwxXst]*)`

	// Needle clauses shared by several rules.
	shellNeedle   = "bash sh zsh ksh dash"
	projectNeedle = "*.env* *config.yaml*"

	// sedInPlace is sed with a short -i flag group anywhere in its own arguments.
	sedInPlace     = `\bsed\b[^;&|\n]*\s-[a-z]*i`
	sedInPlaceLong = `\bsed\b[^;&|\n]*\s--in-place\b`
	perlInPlace    = `\b(?:perl|ruby)\b.*(?:^|\s)-\S*i\b`

	// One simple command's remaining text: does not cross a separator.
	sameCmd = `[^;&|\n]*`
	gitCmd  = `\bgit\s+` + globalFlags

	// rm and its arguments for the root/system/home floor (used with at()): flags and plain
	// operands, but no quoted word, so a quoted file name containing " / " does not reach the
	// floor.
	rmPrefix = "rm[ \\t]+(?:[^\\s;&|<>()\"'\\x60]+[ \\t]+)*"
	// rmEnd is what may follow a destructive rm target.
	rmEnd = "(?:[\\s;&|)\\x60]|$)"

	rootPath   = `/(?:(?:\.\.?)?/)*(?:\.\.?)?\**`
	systemDirs = `/(?:home|root|etc|usr|var|bin|sbin|boot|lib)(?:/\**)?`
	homePath   = `(?:~|\$\{?home\}?)(?:/\**)?`
)

// rmTarget matches alt bare or wholly quoted, followed by a word end.
func rmTarget(alt string) string {
	return `(?:["'](?:` + alt + `)["']|(?:` + alt + `))` + rmEnd
}

// matcher reports whether a rule matches one variant; lower is the variant ASCII-lowercased.
type matcher interface {
	match(v, lower string) bool
}

type reMatcher struct{ re *regexp.Regexp }

func (m reMatcher) match(v, _ string) bool { return m.re.MatchString(v) }

// leadMatcher runs an expression anchored with ^ at each occurrence of its leading literal,
// for expressions every match of which starts with one of those literals. Go's regexp has to
// try every offset of an unanchored search; this tries the few offsets where a match can start.
type leadMatcher struct {
	lead clause
	re   *regexp.Regexp
	full *fallback
}

// maxAnchoredTries bounds the anchored attempts per variant. Each attempt may scan to the end
// of the text, so a text with very many candidate offsets goes to the unanchored expression,
// which is linear.
const maxAnchoredTries = 16

func (m leadMatcher) match(v, lower string) bool {
	tries := 0
	for _, t := range m.lead {
		for i := t.index(lower, 0); i >= 0; i = t.index(lower, i+1) {
			if tries++; tries > maxAnchoredTries {
				return m.full.get().MatchString(v)
			}
			if m.re.MatchString(v[i:]) {
				return true
			}
		}
	}
	return false
}

// fallback is the unanchored form of an anchored expression, compiled on first use: most
// processes never see a command that needs it.
type fallback struct {
	once sync.Once
	expr string
	re   *regexp.Regexp
}

func (f *fallback) get() *regexp.Regexp {
	f.once.Do(func() { f.re = regexp.MustCompile(f.expr) })
	return f.re
}

// lineMatcher tries an expression anchored with ^ at the start of the text and after each
// newline. That is the (?:^|\n) alternation done by hand: a regexp that has to try every
// offset costs several times more than one that may only start at a handful.
type lineMatcher struct {
	re   *regexp.Regexp
	full *fallback
}

func (m lineMatcher) match(v, _ string) bool {
	for off, tries := 0, 1; ; tries++ {
		if tries > maxAnchoredTries {
			return m.full.get().MatchString(v)
		}
		if m.re.MatchString(v[off:]) {
			return true
		}
		i := strings.IndexByte(v[off:], '\n')
		if i < 0 {
			return false
		}
		off += i + 1
	}
}

// allOf matches when every expression matches somewhere: independent conditions that may
// appear in either order.
type allOf []*regexp.Regexp

func (m allOf) match(v, _ string) bool {
	for _, re := range m {
		if !re.MatchString(v) {
			return false
		}
	}
	return true
}

// unlessTail matches when re matches and, for at least one match, the text captured by group
// 1 does not match forbid: a "not followed by" condition.
type unlessTail struct{ re, forbid *regexp.Regexp }

func (m unlessTail) match(v, _ string) bool {
	for _, loc := range m.re.FindAllStringSubmatchIndex(v, -1) {
		if loc[2] < 0 || !m.forbid.MatchString(v[loc[2]:loc[3]]) {
			return true
		}
	}
	return false
}

// rule is one entry of the hardline or dangerous table.
type rule struct {
	key string // the description: shown to users, remembered by "approve for session"
	// needles is a literal prefilter implied by every match: a variant failing it is skipped
	// without running the expression, which is what keeps Check cheap for ordinary commands.
	needles needles
	m       matcher
	// masked rules have no command word to anchor (a redirect, a function definition): they
	// run on the quote-masked variant so quoted prose cannot trip them.
	masked bool
}

func compile(expr string) *regexp.Regexp { return regexp.MustCompile(`(?is)` + expr) }

// rx builds a rule from an expression and its needle clauses (see parseNeedles).
func rx(key, expr string, clauses ...string) rule {
	return rule{key: key, needles: parseNeedles(clauses), m: reMatcher{compile(expr)}}
}

// lead builds a rule whose matches all start at an occurrence of a term of the first clause
// (the expression begins with it), and runs the expression only there.
func lead(key, expr string, clauses ...string) rule {
	n := parseNeedles(clauses)
	return rule{key: key, needles: n, m: leadMatcher{lead: n[0], re: anchored(expr), full: &fallback{expr: `(?is)` + expr}}}
}

// at builds a rule whose expression must match at a command position (see cmdpos).
func at(key, expr string, clauses ...string) rule {
	return rule{key: key, needles: parseNeedles(clauses), m: newLineMatcher(cmdpos + expr)}
}

func newLineMatcher(expr string) lineMatcher {
	return lineMatcher{re: anchored(expr), full: &fallback{expr: `(?is)(?:^|\n)` + expr}}
}

func anchored(expr string) *regexp.Regexp { return regexp.MustCompile(`(?is)^` + expr) }

func (r rule) quoteMasked() rule { r.masked = true; return r }

// Hardline reasons. Exported as constants where callers are expected to branch on them.
const (
	reasonRoot = "recursive delete of root filesystem"
	// ReasonSudoStdin is Result.Reason when the sudo stdin guard blocks a command.
	ReasonSudoStdin = "sudo password guessing via stdin (sudo -S)"
	// ReasonTooLong is Result.Reason for a command longer than MaxCommandBytes.
	ReasonTooLong = "command parser limit exceeded"
)

// hardline rules never run, whatever the approval mode. They are deliberately few: only
// operations with no recovery path (root wipe, raw disk writes, shutdown, denial of service).
// The tables are compiled on first use, not at program start: every hermes command links this
// package, and most (version, acp initialize, config) never check a command.
// Building them also fills wordIndex, so they are built together, once, before any variant
// of a command is computed (see Check).
var tables = sync.OnceValue(func() ruleTables {
	return ruleTables{hardline: hardlineTable(), dangerous: dangerousTable(), sudoStdin: sudoStdinMatcher()}
})

type ruleTables struct {
	hardline, dangerous []rule
	sudoStdin           lineMatcher
}

func hardline() []rule  { return tables().hardline }
func dangerous() []rule { return tables().dangerous }

func hardlineTable() []rule {
	return []rule{
		at(reasonRoot, rmPrefix+rmTarget(rootPath), "rm", "/"),
		at("recursive delete of system directory", rmPrefix+rmTarget(systemDirs),
			"rm", "/home /root /etc /usr /var /bin /sbin /boot /lib"),
		at("recursive delete of home directory", rmPrefix+rmTarget(homePath), "rm", "~ home"),
		at("format filesystem (mkfs)", `(?:mkfs(?:\.[a-z0-9]+)?|mke2fs)`+cmdend, "mkfs mke2fs"),
		at("dd to raw block device", `dd\s[^\n]*\bof=["']?`+blockDev, "dd", "of=", "/dev/"),
		lead("redirect to raw block device", `>\s*["']?`+blockDev, ">", "/dev/").quoteMasked(),
		lead("fork bomb", `:\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:`, ":()").quoteMasked(),
		at("kill all processes", `kill(?:[ \t]+[^\s;&|]+)*?[ \t]+-1`+cmdend, "kill", "-1"),
		at("system shutdown/reboot", `(?:shutdown|reboot|halt|poweroff)`+cmdend,
			"shutdown reboot halt poweroff"),
		at("init 0/6 (shutdown/reboot)", `init\s+[06]`+cmdend, "init"),
		at("systemctl poweroff/reboot", `systemctl\s+(?:-\S+\s+)*(?:poweroff|reboot|halt|kexec)`+cmdend,
			"systemctl", "poweroff reboot halt kexec"),
		at("telinit 0/6 (shutdown/reboot)", `telinit\s+[06]`+cmdend, "telinit"),
	}
}

// Key strings where the reference abbreviates them; exported so callers and docs can name
// them without retyping.
const (
	KeyGatewayOutsideSystemd = "start gateway outside systemd (use 'systemctl --user restart hermes-gateway')"
	KeyGitResetHard          = "git reset --hard (destroys uncommitted changes)"
	KeyGitForcePush          = "git force push (rewrites remote history)"
	KeyGitForcePushShort     = "git force push short flag (rewrites remote history)"
	KeyGitClean              = "git clean with force (deletes untracked files)"
)

// dangerous rules need the user's approval. The key is what clients display and what an
// approval is remembered under, so keys must stay stable across releases.
func dangerousTable() []rule {
	return []rule{
		lead("delete in root path", `\brm\s+(?:-\S*\s+)*/`, "rm", "/"),
		lead("recursive delete", `\brm\s+(?:-\S*\s+)*-[a-z]*r`, "rm", "-"),
		lead("recursive delete (long flag)", `\brm\s+(?:-\S*\s+)*--recursive\b`, "rm", "--recursive"),
		// GNU rm permutes options, so `rm build/ -rf` is as recursive as `rm -rf build/`. The
		// operand run stops at separators and quotes and never crosses a bare `--` (after which
		// -rf is a file name).
		lead("recursive delete (flags after operands)",
			`\brm\s+(?:(?:[^\s"';|&-][^\s"';|&]*|-(?:[^\s"';|&-][^\s"';|&]*)?|--[^\s"';|&]+)[ \t]+)+`+
				`(?:-[a-z]*r[a-z]*|--recursive)(?:[\s;&|]|$)`, "rm", "-"),
		lead("Windows cmd destructive delete", `\bcmd(?:\.exe)?\s+/(?:c|k)\s+.*\b(?:del|erase|rd|rmdir)\b`, "cmd", "/c /k"),
		lead("Windows PowerShell destructive delete",
			`\b(?:powershell|pwsh)(?:\.exe)?\b(?:\s+-\S+)*\s+(?:-(?:command|c)\s+)?["']?(?:remove-item|rmdir|erase|del|rd|ri|rm)\b`,
			"powershell pwsh"),
		lead("PowerShell encoded command execution", `\b(?:powershell|pwsh)(?:\.exe)?\b.*\s-(?:encodedcommand|enc|e)\b`,
			"powershell pwsh"),
		lead("world/other-writable permissions", `\bchmod\s+(?:-\S*\s+)*(?:[^\s,]*,)*`+worldWritable+`\b`,
			"chmod", "*777 *666 +* =*"),
		lead("recursive world/other-writable (long flag)", `\bchmod\s+--recursive\b.*`+worldWritable, "chmod", "--recursive"),
		lead("recursive chown to root", `\bchown\s+(?:-\S*)?r\s+root`, "chown", "root*"),
		lead("recursive chown to root (long flag)", `\bchown\s+--recur[a-z]*\b.*root`, "chown", "--recur*", "*root*"),
		at("format filesystem", `mkfs\b`, "mkfs"),
		at("disk copy", `dd\s+.*if=`, "dd", "*if="),
		lead("write to block device", `>\s*["']?`+blockDev, ">", "/dev/"),
		lead("SQL DROP", `\bdrop\s+(?:table|database)\b`, "drop", "table database"),
		// WHERE must be in the same statement: on the same line and before any `;`.
		{key: "SQL DELETE without WHERE", needles: parseNeedles([]string{"delete", "from"}),
			m: unlessTail{compile(`\bdelete\s+from\b([^\n;]*)`), compile(`\bwhere\b`)}},
		lead("SQL TRUNCATE", `\btruncate\s+(?:table)?\s*\w`, "truncate"),
		lead("overwrite system config", `>\s*["']?`+sysConfig, ">", "/etc/ /private/"),
		lead("stop/restart system service", `\bsystemctl\s+(?:-\S+\s+)*(?:stop|restart|disable|mask)\b`,
			"systemctl", "stop restart disable mask"),
		lead("kill all processes", `\bkill\s+-9\s+-1\b`, "kill", "-9", "-1"),
		lead("force kill processes", `\bpkill\s+-9\b`, "pkill", "-9"),
		lead("force kill processes (killall -KILL)", `\bkillall\s+(?:-\S*\s+)*-(?:9|kill|sigkill)\b`, "killall", "-9 -kill -sigkill"),
		lead("force kill processes (killall -s KILL)", `\bkillall\s+(?:-\S*\s+)*-s\s+(?:kill|sigkill|9)\b`, "killall", "-s"),
		lead("kill processes by regex (killall -r)", `\bkillall\s+(?:-\S*\s+)*-r\b`, "killall", "-r"),
		lead("fork bomb", `:\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:`, ":()"),
		// A flag group containing c (-c, -lc, -xc); --norc and --rcfile are not.
		rx("shell command via -c/-lc flag", shellWord+`\s+(?:-\S+\s+)*-[a-z]*c[a-z]*(?:\s|$)`,
			shellNeedle, "-"),
		rx("script execution via -e/-c flag",
			"(?:^|[\\s/;&|(\\x60'\"])(?:python[0-9.]*|perl|ruby|node|nodejs)\\s+(?:-\\S+\\s+)*(?:-[a-z]*[ec]\\b|--eval\\b|--print\\b)",
			"python* perl ruby node nodejs", "-"),
		lead("pipe remote content to shell", `\b(?:curl|wget)\b.*`+pipeShell, "curl wget", "|", shellNeedle),
		lead("execute remote script via process substitution", `\b`+shells+`\s+<\s*<?\s*\(\s*(?:curl|wget)\b`, shellNeedle, "curl wget", "<"),
		lead("execute remote content via command substitution",
			"(?:\\beval\\b|\\bsource\\b|\\.)\\s*\"?(?:\\$\\(\\s*|\\x60\\s*)(?:curl|wget)\\b", "eval source .", "curl wget", "$( `"),
		lead("pipe decoded content to shell (possible command obfuscation)",
			`\b(?:base64|base32|base16)\s+(?:-\S+\s+)*(?:-[a-z]*d[a-z]*|--decode)\b.*`+pipeShell,
			"base64 base32 base16", "|", shellNeedle),
		lead("pipe xxd-decoded content to shell (possible command obfuscation)",
			`\bxxd\s+(?:-\S+\s+)*-[a-z]*r[a-z]*\b.*`+pipeShell, "xxd", "|", shellNeedle),
		lead("pipe tr-transformed output to shell (possible command obfuscation)",
			`\b(?:echo|printf)\b[^|]*\|\s*\btr\b[^|]*`+pipeShell, "echo printf", "tr", "|", shellNeedle),
		lead("pipe openssl-decoded content to shell (possible command obfuscation)",
			`\bopenssl\b.*\b(?:base64|enc)\b[^|]*\s-d\b[^|]*`+pipeShell,
			"openssl", "base64 enc", "|", shellNeedle),
		lead("overwrite system file via tee", `\btee\b[^;&|<>\n]*[\s"']`+sensitiveTarget, "tee", "/"),
		lead("overwrite system file via redirection", `>>?\s*["']?`+sensitiveTarget, ">", "/"),
		lead("overwrite project env/config via tee", `\btee\b[^;&|<>\n]*[\s"']`+projectSensitive+`["']?`+writeEnd, "tee", projectNeedle),
		lead("overwrite project env/config via redirection", `>>?\s*["']?`+projectSensitive+`["']?`+writeEnd, ">", projectNeedle),
		lead("xargs with rm", `\bxargs\s+.*\brm\b`, "xargs", "rm"),
		lead("find -exec/-execdir rm", `\bfind\b.*-exec(?:dir)?\s+(?:/\S*/)?rm\b`, "find", "-exec*", "rm"),
		lead("find -delete", `\bfind\b.*-delete\b`, "find", "-delete"),
		lead("stop/restart hermes gateway (kills running agents)", `\bhermes\s+`+globalFlags+`gateway\s+(?:stop|restart)\b`,
			"hermes", "gateway", "stop restart"),
		lead("hermes update (restarts gateway, kills running agents)", `\bhermes\s+`+globalFlags+`update\b`, "hermes", "update"),
		lead("docker compose restart/stop/kill/down (container lifecycle)",
			`\bdocker(?:-compose|\s+compose)\s+`+containerFlags+`(?:restart|stop|kill|down)\b`,
			"docker", "compose", "restart stop kill down"),
		lead("docker restart/stop/kill (container lifecycle)",
			`\b(?:docker|podman)\s+`+containerFlags+`(?:container\s+)?(?:restart|stop|kill)\b`,
			"docker podman", "restart stop kill"),
		lead(KeyGatewayOutsideSystemd, `gateway\s+run\b.*(?:&[ \t]*(?:$|;|\n)|\bdisown\b|\bsetsid\b)`,
			"*gateway", "run", "& disown setsid"),
		lead(KeyGatewayOutsideSystemd, `\b(?:nohup|setsid)\b.*gateway\s+run\b`, "nohup setsid", "*gateway", "run"),
		lead("kill hermes/gateway process (self-termination)", `\b(?:pkill|killall)\b.*\b(?:hermes|gateway|cli\.py)\b`,
			"pkill killall", "hermes gateway cli.py"),
		lead("kill process via pgrep/pidof expansion (self-termination)", `\bkill\b.*\$\(\s*(?:pgrep|pidof)\b`, "kill", "$(", "pgrep pidof"),
		lead("kill process via backtick pgrep/pidof expansion (self-termination)", "\\bkill\\b.*\\x60\\s*(?:pgrep|pidof)\\b", "kill", "`", "pgrep pidof"),
		// Two independent conditions: a loop may name the label before the launchctl verb.
		{key: "stop/restart hermes launchd service (kills running agents)", needles: parseNeedles([]string{"launchctl", "hermes"}),
			m: allOf{
				compile(`\blaunchctl\s+(?:stop|kickstart|bootout|unload|kill|disable|remove)\b`),
				compile(`\b(?:hermes|ai\.hermes)\b`),
			}},
		lead("copy/move file into system config path", `\b(?:cp|mv|install)\b.*\s["']?`+sysConfig, "cp mv install", "/etc/ /private/"),
		lead("overwrite project env/config file",
			`\b(?:cp|mv|install)\b.*\s["']?`+projectSensitive+`["']?`+lastArg, "cp mv install", projectNeedle),
		lead("copy/move file into sensitive credential/SSH/shell-rc path",
			`\b(?:cp|mv|install)\b.*\s["']?`+sensitiveTarget+`[^\s"']*["']?`+lastArg, "cp mv install", "/"),
		lead("in-place edit of sensitive credential/SSH/shell-rc path", sedInPlace+`.*`+userSensitive, "sed", "~ home"),
		lead("in-place edit of sensitive credential/SSH/shell-rc path (long flag)", sedInPlaceLong+`.*`+userSensitive, "sed", "--in-place", "~ home"),
		lead("in-place edit of sensitive credential/SSH/shell-rc path (perl/ruby)", perlInPlace+`.*`+userSensitive, "perl ruby", "~ home"),
		lead("in-place edit of system config", sedInPlace+`.*\s["']?`+sysConfig, "sed", "/etc/ /private/"),
		lead("in-place edit of system config (long flag)", sedInPlaceLong+`.*\s["']?`+sysConfig, "sed", "--in-place", "/etc/ /private/"),
		lead("in-place edit of Hermes config/env", sedInPlace+`.*`+hermesSensitive, "sed", "hermes*"),
		lead("in-place edit of Hermes config/env (long flag)", sedInPlaceLong+`.*`+hermesSensitive, "sed", "--in-place", "hermes*"),
		lead("in-place edit of Hermes config/env (perl/ruby)", perlInPlace+`.*`+hermesSensitive, "perl ruby", "hermes*"),
		rx("script execution via heredoc",
			"(?:^|[\\s/;&|(\\x60'\"])(?:python[0-9.]*|perl|ruby|node|nodejs)\\s+(?:-\\S*\\s+)*<<", "python* perl ruby node nodejs", "<<"),
		rx("shell execution via heredoc", shellWord+`\s+(?:-\S*\s+)*<<`, shellNeedle, "<<"),
		// Any unambiguous prefix of --hard (--h, --ha, --har) selects hard mode; --help does not.
		lead(KeyGitResetHard, gitCmd+`reset\b`+sameCmd+`\s--h(?:a(?:r(?:d)?)?)?\b`, "git", "reset", "--h*"),
		// --force, --force-with-lease and a +refspec all rewrite the remote branch.
		lead(KeyGitForcePush, gitCmd+`push\b`+sameCmd+`(?:\s--forc[a-z]*\b|\s\+[^\s+])`, "git", "push", "--forc* +"),
		lead(KeyGitForcePushShort, gitCmd+`push\b`+sameCmd+`\s-[a-z]*f[a-z]*\b`, "git", "push", "-"),
		lead(KeyGitClean, gitCmd+`clean\b`+sameCmd+`\s(?:-[a-z]*f|--force\b)`, "git", "clean", "-"),
		// Only the capital -D is force-delete; -d refuses to drop an unmerged branch. Variants keep
		// the author's case, so this one group opts out of case folding.
		lead("git branch force delete", gitCmd+`branch\b`+sameCmd+`\s(?-i:-[a-zA-Z]*D)`, "git", "branch", "-"),
		lead("git branch force delete (long flags)",
			gitCmd+`branch\b`+sameCmd+`\s(?:-d|--delete)\b`+sameCmd+`\s(?:-f|--force)\b`, "git", "branch", "-d --delete", "-f --force"),
		lead("git branch force delete (long flags, force-first)",
			gitCmd+`branch\b`+sameCmd+`\s(?:-f|--force)\b`+sameCmd+`\s(?:-d|--delete)\b`, "git", "branch", "-d --delete", "-f --force"),
		lead("chmod +x followed by immediate execution", `\bchmod\s+(?:-\S+\s+)*[ugoa]*\+[rw]*x[rw]*\b.*[;&|]+\s*\./`, "chmod", "./"),
		// Only sudo's own options count (sudo du -s is du's flag): stdin (-S, --stdin), askpass
		// (-A, --askpass), shell (-s, --shell) and list (-l is harmless; -a is BSD auth type).
		lead("sudo with privilege flag (stdin/askpass/shell/list)",
			`\bsudo\s+`+sudoOpts+`(?:-s|--st[a-z]*|--sh[a-z]*|-a|--a[a-z]*)(?:[\s;&|]|$)`, "sudo", "-"),
		lead("sudo with combined-flag privilege escalation",
			`\bsudo\s+`+sudoOpts+`-(?:[a-z]+[sa][a-z]*|[sa][a-z]+)(?:[\s;&|]|$)`, "sudo", "-"),
	}
}

// sudoStdin is the sudo stdin guard: an explicit -S (case-sensitive: -s is a shell) in sudo's
// option region, at a command position.
func sudoStdinMatcher() lineMatcher {
	return newLineMatcher(cmdpos + `sudo\s+` + sudoOpts + `(?:(?-i:-[a-zA-Z]*S[a-zA-Z]*)|--stdin)(?:[\s;&|]|$)`)
}
