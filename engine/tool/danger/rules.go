package danger

import (
	"regexp"
	"strings"
)

// Building blocks of the rule table. Every rule is compiled with (?is): matching is
// case-insensitive and `.` crosses newlines, so a rule written for one line also sees a
// multi-line script. Go's RE2 has no lookaround, so the reference's lookbehinds are written as
// consumed context (a block device must directly follow `>` or `of=`), its "not followed by"
// checks are done in code (see matcher), and possessive quantifiers are unnecessary because
// RE2 matches in linear time anyway.
const (
	// path is an optional absolute directory prefix of a command word (/sbin/reboot,
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

	// cmdpos anchors a rule to a command position: start of text or a newline, then any
	// wrappers. Other command starts (after ; & | ( { $( ` and shell keywords) are turned into
	// newlines by the quote-aware scanner in the marked variant, which is why the class here
	// holds no separators: putting them here would also fire inside quoted prose.
	cmdpos = `(?:^|\n)\s*` + wrap + pathPrefix

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

	// sedInPlace is sed with a short -i flag group anywhere in its own arguments.
	sedInPlace     = `\bsed\b[^;&|\n]*\s-[a-z]*i`
	sedInPlaceLong = `\bsed\b[^;&|\n]*\s--in-place\b`
	perlInPlace    = `\b(?:perl|ruby)\b.*(?:^|\s)-\S*i\b`

	// One simple command's remaining text: does not cross a separator.
	sameCmd = `[^;&|\n]*`
	gitCmd  = `\bgit\s+` + globalFlags

	// rm and its arguments for the root/system/home floor: flags and plain operands, but no
	// quoted word, so a quoted file name containing " / " does not reach the floor.
	rmPrefix = cmdpos + "rm[ \\t]+(?:[^\\s;&|<>()\"'\\x60]+[ \\t]+)*"
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

// matcher reports whether a rule matches one variant.
type matcher interface {
	match(v string) bool
}

type reMatcher struct{ re *regexp.Regexp }

func (m reMatcher) match(v string) bool { return m.re.MatchString(v) }

// allOf matches when every expression matches somewhere (independent conditions, the
// reference's pair of whole-input lookaheads).
type allOf []*regexp.Regexp

func (m allOf) match(v string) bool {
	for _, re := range m {
		if !re.MatchString(v) {
			return false
		}
	}
	return true
}

// unlessTail matches when re matches and, for at least one match, the text captured by group
// 1 does not match forbid (the reference's negative lookahead).
type unlessTail struct{ re, forbid *regexp.Regexp }

func (m unlessTail) match(v string) bool {
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
	// needles are lowercase literals of which at least one occurs in every text the rule
	// matches; a variant holding none of them is skipped without running the expression.
	needles []string
	m       matcher
	// masked rules have no command word to anchor (a redirect, a function definition): they
	// run on the quote-masked variant so quoted prose cannot trip them.
	masked bool
}

func compile(expr string) *regexp.Regexp { return regexp.MustCompile(`(?is)` + expr) }

func rx(key, expr string, needles ...string) rule {
	return rule{key: key, needles: needles, m: reMatcher{compile(expr)}}
}

func (r rule) quoteMasked() rule { r.masked = true; return r }

// candidate reports whether lower (an ASCII-lowercased variant) can match the rule.
func (r *rule) candidate(lower string) bool {
	if len(r.needles) == 0 {
		return true
	}
	for _, n := range r.needles {
		if strings.Contains(lower, n) {
			return true
		}
	}
	return false
}

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
var hardline = []rule{
	rx(reasonRoot, rmPrefix+rmTarget(rootPath), "rm"),
	rx("recursive delete of system directory", rmPrefix+rmTarget(systemDirs), "rm"),
	rx("recursive delete of home directory", rmPrefix+rmTarget(homePath), "rm"),
	rx("format filesystem (mkfs)", cmdpos+`(?:mkfs(?:\.[a-z0-9]+)?|mke2fs)`+cmdend, "mkfs", "mke2fs"),
	rx("dd to raw block device", cmdpos+`dd\s[^\n]*\bof=["']?`+blockDev, "dd"),
	rx("redirect to raw block device", `>\s*["']?`+blockDev, "/dev/").quoteMasked(),
	rx("fork bomb", `:\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:`, ":").quoteMasked(),
	rx("kill all processes", cmdpos+`kill(?:[ \t]+[^\s;&|]+)*?[ \t]+-1`+cmdend, "kill"),
	rx("system shutdown/reboot", cmdpos+`(?:shutdown|reboot|halt|poweroff)`+cmdend,
		"shutdown", "reboot", "halt", "poweroff"),
	rx("init 0/6 (shutdown/reboot)", cmdpos+`init\s+[06]`+cmdend, "init"),
	rx("systemctl poweroff/reboot", cmdpos+`systemctl\s+(?:-\S+\s+)*(?:poweroff|reboot|halt|kexec)`+cmdend, "systemctl"),
	rx("telinit 0/6 (shutdown/reboot)", cmdpos+`telinit\s+[06]`+cmdend, "telinit"),
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
var dangerous = []rule{
	rx("delete in root path", `\brm\s+(?:-\S*\s+)*/`, "rm"),
	rx("recursive delete", `\brm\s+(?:-\S*\s+)*-[a-z]*r`, "rm"),
	rx("recursive delete (long flag)", `\brm\s+(?:-\S*\s+)*--recursive\b`, "rm"),
	// GNU rm permutes options, so `rm build/ -rf` is as recursive as `rm -rf build/`. The
	// operand run stops at separators and quotes and never crosses a bare `--` (after which
	// -rf is a file name).
	rx("recursive delete (flags after operands)",
		`\brm\s+(?:(?:[^\s"';|&-][^\s"';|&]*|-(?:[^\s"';|&-][^\s"';|&]*)?|--[^\s"';|&]+)[ \t]+)+`+
			`(?:-[a-z]*r[a-z]*|--recursive)(?:[\s;&|]|$)`, "rm"),
	rx("Windows cmd destructive delete", `\bcmd(?:\.exe)?\s+/(?:c|k)\s+.*\b(?:del|erase|rd|rmdir)\b`, "cmd"),
	rx("Windows PowerShell destructive delete",
		`\b(?:powershell|pwsh)(?:\.exe)?\b(?:\s+-\S+)*\s+(?:-(?:command|c)\s+)?["']?(?:remove-item|rmdir|erase|del|rd|ri|rm)\b`,
		"powershell", "pwsh"),
	rx("PowerShell encoded command execution", `\b(?:powershell|pwsh)(?:\.exe)?\b.*\s-(?:encodedcommand|enc|e)\b`,
		"powershell", "pwsh"),
	rx("world/other-writable permissions", `\bchmod\s+(?:-\S*\s+)*(?:0?777|0?666|o\+[rwx]*w|a\+[rwx]*w)\b`, "chmod"),
	rx("recursive world/other-writable (long flag)", `\bchmod\s+--recursive\b.*(?:777|666|o\+[rwx]*w|a\+[rwx]*w)`, "chmod"),
	rx("recursive chown to root", `\bchown\s+(?:-\S*)?r\s+root`, "chown"),
	rx("recursive chown to root (long flag)", `\bchown\s+--recur[a-z]*\b.*root`, "chown"),
	rx("format filesystem", cmdpos+`mkfs\b`, "mkfs"),
	rx("disk copy", cmdpos+`dd\s+.*if=`, "dd"),
	rx("write to block device", `>\s*["']?`+blockDev, "/dev/"),
	rx("SQL DROP", `\bdrop\s+(?:table|database)\b`, "drop"),
	// WHERE must be in the same statement: on the same line and before any `;`.
	{key: "SQL DELETE without WHERE", needles: []string{"delete"},
		m: unlessTail{compile(`\bdelete\s+from\b([^\n;]*)`), compile(`\bwhere\b`)}},
	rx("SQL TRUNCATE", `\btruncate\s+(?:table)?\s*\w`, "truncate"),
	rx("overwrite system config", `>\s*["']?`+sysConfig, "/etc/", "/private/"),
	rx("stop/restart system service", `\bsystemctl\s+(?:-\S+\s+)*(?:stop|restart|disable|mask)\b`, "systemctl"),
	rx("kill all processes", `\bkill\s+-9\s+-1\b`, "kill"),
	rx("force kill processes", `\bpkill\s+-9\b`, "pkill"),
	rx("force kill processes (killall -KILL)", `\bkillall\s+(?:-\S*\s+)*-(?:9|kill|sigkill)\b`, "killall"),
	rx("force kill processes (killall -s KILL)", `\bkillall\s+(?:-\S*\s+)*-s\s+(?:kill|sigkill|9)\b`, "killall"),
	rx("kill processes by regex (killall -r)", `\bkillall\s+(?:-\S*\s+)*-r\b`, "killall"),
	rx("fork bomb", `:\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:`, ":"),
	// A flag group containing c (-c, -lc, -xc); --norc and --rcfile are not.
	rx("shell command via -c/-lc flag", shellWord+`\s+(?:-\S+\s+)*-[a-z]*c[a-z]*(?:\s|$)`,
		"sh"),
	rx("script execution via -e/-c flag",
		"(?:^|[\\s/;&|(\\x60'\"])(?:python[0-9.]*|perl|ruby|node|nodejs)\\s+(?:-\\S+\\s+)*(?:-[a-z]*[ec]\\b|--eval\\b|--print\\b)",
		"python", "perl", "ruby", "node"),
	rx("pipe remote content to shell", `\b(?:curl|wget)\b.*`+pipeShell, "curl", "wget"),
	rx("execute remote script via process substitution", `\b`+shells+`\s+<\s*<?\s*\(\s*(?:curl|wget)\b`, "curl", "wget"),
	rx("execute remote content via command substitution",
		"(?:\\beval\\b|\\bsource\\b|\\.)\\s*\"?(?:\\$\\(\\s*|\\x60\\s*)(?:curl|wget)\\b", "curl", "wget"),
	rx("pipe decoded content to shell (possible command obfuscation)",
		`\b(?:base64|base32|base16)\s+(?:-\S+\s+)*(?:-[a-z]*d[a-z]*|--decode)\b.*`+pipeShell, "base"),
	rx("pipe xxd-decoded content to shell (possible command obfuscation)",
		`\bxxd\s+(?:-\S+\s+)*-[a-z]*r[a-z]*\b.*`+pipeShell, "xxd"),
	rx("pipe tr-transformed output to shell (possible command obfuscation)",
		`\b(?:echo|printf)\b[^|]*\|\s*\btr\b[^|]*`+pipeShell, "tr"),
	rx("pipe openssl-decoded content to shell (possible command obfuscation)",
		`\bopenssl\b.*\b(?:base64|enc)\b[^|]*\s-d\b[^|]*`+pipeShell, "openssl"),
	rx("overwrite system file via tee", `\btee\b[^;&|<>\n]*[\s"']`+sensitiveTarget, "tee"),
	rx("overwrite system file via redirection", `>>?\s*["']?`+sensitiveTarget, ">"),
	rx("overwrite project env/config via tee", `\btee\b[^;&|<>\n]*[\s"']`+projectSensitive+`["']?`+writeEnd, "tee"),
	rx("overwrite project env/config via redirection", `>>?\s*["']?`+projectSensitive+`["']?`+writeEnd, ">"),
	rx("xargs with rm", `\bxargs\s+.*\brm\b`, "xargs"),
	rx("find -exec/-execdir rm", `\bfind\b.*-exec(?:dir)?\s+(?:/\S*/)?rm\b`, "find"),
	rx("find -delete", `\bfind\b.*-delete\b`, "find"),
	rx("stop/restart hermes gateway (kills running agents)", `\bhermes\s+`+globalFlags+`gateway\s+(?:stop|restart)\b`, "hermes"),
	rx("hermes update (restarts gateway, kills running agents)", `\bhermes\s+`+globalFlags+`update\b`, "hermes"),
	rx("docker compose restart/stop/kill/down (container lifecycle)",
		`\bdocker(?:-compose|\s+compose)\s+`+containerFlags+`(?:restart|stop|kill|down)\b`, "docker"),
	rx("docker restart/stop/kill (container lifecycle)",
		`\b(?:docker|podman)\s+`+containerFlags+`(?:container\s+)?(?:restart|stop|kill)\b`, "docker", "podman"),
	rx(KeyGatewayOutsideSystemd, `gateway\s+run\b.*(?:&[ \t]*(?:$|;|\n)|\bdisown\b|\bsetsid\b)`, "gateway"),
	rx(KeyGatewayOutsideSystemd, `\b(?:nohup|setsid)\b.*gateway\s+run\b`, "gateway"),
	rx("kill hermes/gateway process (self-termination)", `\b(?:pkill|killall)\b.*\b(?:hermes|gateway|cli\.py)\b`, "kill"),
	rx("kill process via pgrep/pidof expansion (self-termination)", `\bkill\b.*\$\(\s*(?:pgrep|pidof)\b`, "kill"),
	rx("kill process via backtick pgrep/pidof expansion (self-termination)", "\\bkill\\b.*\\x60\\s*(?:pgrep|pidof)\\b", "kill"),
	// Two independent conditions: a loop may name the label before the launchctl verb.
	{key: "stop/restart hermes launchd service (kills running agents)", needles: []string{"launchctl"},
		m: allOf{
			compile(`\blaunchctl\s+(?:stop|kickstart|bootout|unload|kill|disable|remove)\b`),
			compile(`\b(?:hermes|ai\.hermes)\b`),
		}},
	rx("copy/move file into system config path", `\b(?:cp|mv|install)\b.*\s["']?`+sysConfig, "cp", "mv", "install"),
	rx("overwrite project env/config file",
		`\b(?:cp|mv|install)\b.*\s["']?`+projectSensitive+`["']?`+lastArg, "cp", "mv", "install"),
	rx("copy/move file into sensitive credential/SSH/shell-rc path",
		`\b(?:cp|mv|install)\b.*\s["']?`+sensitiveTarget+`[^\s"']*["']?`+lastArg, "cp", "mv", "install"),
	rx("in-place edit of sensitive credential/SSH/shell-rc path", sedInPlace+`.*`+userSensitive, "sed"),
	rx("in-place edit of sensitive credential/SSH/shell-rc path (long flag)", sedInPlaceLong+`.*`+userSensitive, "sed"),
	rx("in-place edit of sensitive credential/SSH/shell-rc path (perl/ruby)", perlInPlace+`.*`+userSensitive, "perl", "ruby"),
	rx("in-place edit of system config", sedInPlace+`.*\s["']?`+sysConfig, "sed"),
	rx("in-place edit of system config (long flag)", sedInPlaceLong+`.*\s["']?`+sysConfig, "sed"),
	rx("in-place edit of Hermes config/env", sedInPlace+`.*`+hermesSensitive, "sed"),
	rx("in-place edit of Hermes config/env (long flag)", sedInPlaceLong+`.*`+hermesSensitive, "sed"),
	rx("in-place edit of Hermes config/env (perl/ruby)", perlInPlace+`.*`+hermesSensitive, "perl", "ruby"),
	rx("script execution via heredoc",
		"(?:^|[\\s/;&|(\\x60'\"])(?:python[0-9.]*|perl|ruby|node|nodejs)\\s+(?:-\\S*\\s+)*<<", "<<"),
	rx("shell execution via heredoc", shellWord+`\s+(?:-\S*\s+)*<<`, "<<"),
	// Any unambiguous prefix of --hard (--h, --ha, --har) selects hard mode; --help does not.
	rx(KeyGitResetHard, gitCmd+`reset\b`+sameCmd+`\s--h(?:a(?:r(?:d)?)?)?\b`, "git"),
	// --force, --force-with-lease and a +refspec all rewrite the remote branch.
	rx(KeyGitForcePush, gitCmd+`push\b`+sameCmd+`(?:\s--forc[a-z]*\b|\s\+[^\s+])`, "git"),
	rx(KeyGitForcePushShort, gitCmd+`push\b`+sameCmd+`\s-[a-z]*f[a-z]*\b`, "git"),
	rx(KeyGitClean, gitCmd+`clean\b`+sameCmd+`\s(?:-[a-z]*f|--force\b)`, "git"),
	// Only the capital -D is force-delete; -d refuses to drop an unmerged branch. Variants keep
	// the author's case, so this one group opts out of case folding.
	rx("git branch force delete", gitCmd+`branch\b`+sameCmd+`\s(?-i:-[a-zA-Z]*D)`, "git"),
	rx("git branch force delete (long flags)",
		gitCmd+`branch\b`+sameCmd+`\s(?:-d|--delete)\b`+sameCmd+`\s(?:-f|--force)\b`, "git"),
	rx("git branch force delete (long flags, force-first)",
		gitCmd+`branch\b`+sameCmd+`\s(?:-f|--force)\b`+sameCmd+`\s(?:-d|--delete)\b`, "git"),
	rx("chmod +x followed by immediate execution", `\bchmod\s+(?:-\S+\s+)*[ugoa]*\+[rw]*x[rw]*\b.*[;&|]+\s*\./`, "chmod"),
	// Only sudo's own options count (sudo du -s is du's flag): stdin (-S, --stdin), askpass
	// (-A, --askpass), shell (-s, --shell) and list (-l is harmless; -a is BSD auth type).
	rx("sudo with privilege flag (stdin/askpass/shell/list)",
		`\bsudo\s+`+sudoOpts+`(?:-s|--st[a-z]*|--sh[a-z]*|-a|--a[a-z]*)(?:[\s;&|]|$)`, "sudo"),
	rx("sudo with combined-flag privilege escalation",
		`\bsudo\s+`+sudoOpts+`-(?:[a-z]+[sa][a-z]*|[sa][a-z]+)(?:[\s;&|]|$)`, "sudo"),
}

// sudoStdin is the sudo stdin guard: an explicit -S (case-sensitive: -s is a shell) in sudo's
// option region, at a command position.
var sudoStdin = compile(`(?:^|\n)\s*` + wrap + pathPrefix + `sudo\s+` + sudoOpts + `(?:(?-i:-[a-zA-Z]*S[a-zA-Z]*)|--stdin)(?:[\s;&|]|$)`)
