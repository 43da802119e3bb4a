// A strict policy for CI, where nobody is there to answer: it never asks. Reading, building
// and testing are allowed, and so are writes inside the working directory (not into .git or
// secret-looking files); everything else is denied with a reason the model can act on:
// anything the danger detector flags, the network, installs, pushes, and privilege.
//
//   HERMES_POLICY=scripts/policies/ci.js hermes run ci.js
const re = require("re");
const path = require("path");

const READ_ONLY = "^\\s*(ls|pwd|cat|head|tail|wc|grep|rg|find|echo|which|stat|file|diff|sort|uniq|tree)\\b";
const READ_ONLY_GIT = "^\\s*git\\s+(status|diff|log|show|branch|rev-parse|ls-files)\\b";
const BUILD = "^\\s*(go\\s+(test|build|vet)|npm\\s+(test|run\\s+(build|test|lint))|cargo\\s+(test|build|check|clippy)|make(\\s+(test|build|check|lint))?|pytest)\\b";
const CHAIN = "[;&|`$<>]"; // a compound command is judged as a whole: deny

function terminal(req) {
  const cmd = req.command;
  if (req.pattern !== "") return { decision: "deny", reason: "CI never runs flagged commands (" + req.pattern + ")" };
  if (re.match(CHAIN, cmd)) return { decision: "deny", reason: "CI runs single commands only, no pipes, chains or redirections" };
  if (re.match(READ_ONLY, cmd) || re.match(READ_ONLY_GIT, cmd) || re.match(BUILD, cmd)) return "allow";
  return { decision: "deny", reason: "not on the CI allow-list (read, build, test)" };
}

function write(req) {
  const p = req.args.path;
  if (typeof p !== "string" || p === "") return { decision: "deny", reason: "no path given" };
  const abs = path.resolve(req.cwd, p);
  if (!path.within(abs, req.cwd)) return { decision: "deny", reason: "CI writes stay inside the working directory" };
  if (re.match("(^|/)\\.git(/|$)", abs)) return { decision: "deny", reason: "never write into .git" };
  if (re.match("(^|/)(\\.env(\\..*)?|.*\\.(pem|key|p12))$", abs)) return { decision: "deny", reason: "no secrets in CI" };
  return "allow";
}

export function approval(req) {
  if (req.tool === "terminal") return terminal(req);
  if (req.tool === "write_file" || req.tool === "patch") return write(req);
  if (req.tool === "read_file" || req.tool === "search_files") return "allow";
  return { decision: "deny", reason: "tool not allowed in CI: " + req.tool };
}

// A CI job is one script: anything typed while a turn runs waits for the turn to end.
export function busy_input(req) {
  return "queue";
}

// A CI agent works through a big repository in long turns: it compacts a little earlier than
// the default (room for the next build log), into a summary that keeps what the job needs.
const CI_SUMMARY = "Summarise the work so far for your own future reference: the task, the commands run and their results (failing tests and errors verbatim), the files changed, and what is left to do. This summary replaces the earlier messages.";

export function compact(req) {
  return { threshold: 0.4, prompt: CI_SUMMARY };
}

export const examples = [
  { input: { command: "go test ./..." }, want: "allow" },
  { input: { command: "git diff --stat" }, want: "allow" },
  { input: { command: "make" }, want: "allow" },
  { input: { command: "go test ./... | tee log" }, want: "deny" },
  { input: { command: "curl https://example.com" }, want: "deny" },
  { input: { command: "git push origin main" }, want: "deny" },
  { input: { command: "rm -r build", pattern: "recursive delete" }, want: { decision: "deny", reason: "CI never runs flagged commands (recursive delete)" } },
  { input: { tool: "write_file", args: { path: "out/report.txt" }, cwd: "/ci/work" }, want: "allow" },
  { input: { tool: "write_file", args: { path: "/etc/hosts" }, cwd: "/ci/work" }, want: "deny" },
  { input: { tool: "delegate_task", args: { goal: "x" }, cwd: "/ci/work" }, want: "deny" },
  { hook: "busy_input", input: { text: "stop" }, want: "queue" },
  { hook: "compact", input: { context_used: 45000, context_max: 100000 }, want: { compact: true, threshold: 0.4 } },
  { hook: "compact", input: { context_used: 30000, context_max: 100000 }, want: false },
];
