// Package danger decides, before a terminal command runs, whether it must never run
// (hardline), needs the user's approval (dangerous), or may run as is.
//
// Hardline rules cover operations with no recovery path: recursive deletion of /, of a
// protected system root (/home, /root, /etc, /usr, /var, /bin, /sbin, /boot, /lib) or of the
// home directory; mkfs; dd or a redirect onto a raw block device; the classic fork bomb;
// kill -1; shutdown, reboot, halt, poweroff, init/telinit 0|6 and
// systemctl poweroff|reboot|halt|kexec. No approval mode overrides them. The sudo stdin guard (an explicit sudo -S while
// no sudo password is configured, which can only be password guessing) blocks the same way.
//
// Dangerous rules need approval. Each is keyed by its description ("recursive delete",
// "git force push (rewrites remote history)", ...); clients display the key and an approval
// for the session is remembered under it, so keys are stable. They cover destructive file
// operations (rm -r, rm of root paths, find -delete, xargs rm, Windows del/Remove-Item),
// permission changes (chmod 777, chown -R root), disk and filesystem tools, SQL DROP/TRUNCATE
// and DELETE without WHERE, service and process control (systemctl stop, kill -9, killall,
// docker stop, launchctl), shell and interpreter execution (sh -c, python -c, heredocs, remote
// or decoded content piped into a shell), writes to system configuration, credentials, SSH
// keys, shell rc files, project .env/config.yaml and the profile's own config and secrets
// (tee, redirects, cp/mv/install, sed -i, perl -i), self-termination of the agent (stopping
// or killing the gateway, hermes update), destructive git (reset --hard, push --force, clean
// -f, branch -D) and sudo flags that read a password or open a shell. DangerousKeys and
// HardlineRules list them all.
//
// Matching is case-insensitive and runs over several normalised variants of the command; a
// rule that matches any variant counts. Every variant has ANSI/OSC escapes and NUL bytes
// removed, is NFKC-normalised (fullwidth letters fold to ASCII), has line continuations
// joined, absolute home and profile-home prefixes folded to ~/ and ~/.hermes/ (the
// directories come from Options, never from the environment), $IFS turned into a space,
// backslash escapes and empty quote pairs removed, and newlines inside quotes or heredoc bodies
// turned into spaces. On top of that a quote-aware scan produces a marked variant, with a
// newline at every real command start and command words spelled in pieces (r\m, r""m, "r"m)
// written plainly, and a masked variant with quoted data blanked. The command strings of
// sh -c and eval are checked as commands of their own. A heredoc body is data unless its line
// hands it to a shell (bash <<EOF, cat <<EOF | sh).
//
// Several rules fire only at a command position: the start of a line, optionally behind
// sudo, env VAR=VAL, exec, nohup, setsid, time or an absolute path such as /sbin/. This anchor
// is what keeps data from matching: `echo reboot`, `grep shutdown log` or a commit message
// containing "rm -rf /" name the command without running it. The anchor itself lists no
// separators; instead the scanner turns every unquoted ; & | ( { $( ` and shell keyword into
// a newline, and puts the real command word behind any wrapper (nice -n 5, timeout 10, ...)
// on a line of its own, so (reboot) and { shutdown -h now; } anchor while
// `echo "a; reboot"` does not. Rules without a command word to anchor (a redirect onto a
// block device, the fork bomb) run on the masked variant for the same reason, unless the
// command hands quoted text to a shell. The approval-tier rules are deliberately broad and
// mostly unanchored: an extra prompt is cheap, a missed one is not.
//
// Expressions are compiled once, at package initialisation (a rarely needed unanchored form of
// some on first use). Each rule carries literal needles
// that every match contains, so a variant lacking them is skipped without running the
// expression, and most expressions are run only at the offsets where a match can start.
// Work is linear in the command length, which is capped at MaxCommandBytes.
package danger
