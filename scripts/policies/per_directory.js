// A policy that depends on where the session works: edit RULES to match your directories.
// The first rule whose pattern matches the session's working directory decides its trust:
//
//   open     scratch space: allow everything inside it, flagged commands included
//   normal   ask before flagged commands and writes outside the directory; allow the rest
//   readonly look, do not touch: only reading commands and read tools; deny writes
const re = require("re");
const path = require("path");

const RULES = [
  { cwd: "/(scratch|sandbox|tmp)(/|$)", trust: "open" },
  { cwd: "/(prod|production|deploy|infra|secrets)(/|$)", trust: "readonly" },
  { cwd: "", trust: "normal" }, // everything else
];

const READS = "^\\s*(ls|pwd|cat|head|tail|wc|grep|rg|find|stat|tree|git\\s+(status|diff|log|show))\\b";

function trustOf(cwd) {
  for (const r of RULES) {
    if (re.match(r.cwd, cwd)) return r.trust;
  }
  return "normal";
}

export function approval(req) {
  const trust = trustOf(req.cwd);
  const writes = req.tool === "write_file" || req.tool === "patch";
  if (trust === "readonly") {
    if (req.tool === "read_file" || req.tool === "search_files") return "allow";
    if (req.tool === "terminal" && req.pattern === "" && re.match(READS, req.command) && !re.match("[;&|`$<>]", req.command)) return "allow";
    return { decision: "deny", reason: "read-only directory: " + req.cwd };
  }
  if (writes) {
    const p = req.args.path;
    if (typeof p !== "string" || p === "") return { decision: "deny", reason: "no path given" };
    if (!path.within(p, req.cwd)) return { decision: "ask", reason: "writes outside " + req.cwd };
    return "allow";
  }
  if (req.tool === "terminal" && req.pattern !== "") {
    if (trust === "open") return { decision: "allow", reason: "scratch directory" };
    return { decision: "ask", reason: req.pattern };
  }
  return "allow";
}

export const examples = [
  { name: "scratch rm -r", input: { command: "rm -rf out", pattern: "recursive delete", cwd: "/home/me/scratch/a" }, want: "allow" },
  { name: "project rm -r", input: { command: "rm -rf out", pattern: "recursive delete", cwd: "/home/me/src/app" }, want: "ask" },
  { name: "infra look", input: { command: "git log -3", cwd: "/srv/infra" }, want: "allow" },
  { name: "infra touch", input: { command: "terraform apply", cwd: "/srv/infra" }, want: "deny" },
  { name: "infra write", input: { tool: "write_file", args: { path: "main.tf" }, cwd: "/srv/infra" }, want: "deny" },
  { name: "project write", input: { tool: "write_file", args: { path: "main.go" }, cwd: "/home/me/src/app" }, want: "allow" },
  { name: "write outside", input: { tool: "write_file", args: { path: "/etc/motd" }, cwd: "/home/me/scratch" }, want: "ask" },
];
