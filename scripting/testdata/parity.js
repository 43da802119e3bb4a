// The same policy as parity.lua, line for line in spirit: the parity test feeds both the
// same approval inputs and requires identical decisions.
const re = require("re");
const path = require("path");

const readOnly = "^\\s*(ls|pwd|cat|head|tail|wc|grep|rg|find|echo|which|stat)\\b";
const readOnlyGit = "^\\s*git\\s+(status|diff|log|show|branch)\\b";
const builds = "^\\s*(go|npm|cargo|make|pytest)\\s+(test|build|vet|run)\\b";

export function approval(req) {
  if (req.tool === "terminal") {
    const cmd = req.command;
    if (re.match("\\bsudo\\b", cmd)) return { decision: "deny", reason: "no sudo" };
    if (re.match("\\b(curl|wget)\\b[^|]*\\|\\s*(sh|bash)\\b", cmd)) return { decision: "deny", reason: "no piping downloads into a shell" };
    if (req.pattern !== "" && req.approved.includes(req.pattern)) return { decision: "allow", reason: "approved earlier: " + req.pattern };
    if (req.pattern === "recursive delete" && re.match("^\\s*rm\\s+-r[f]?\\s+(build|dist|node_modules|target)/?\\s*$", cmd)) {
      return { decision: "allow", reason: "build output" };
    }
    if (req.pattern !== "") return { decision: "ask", reason: req.pattern };
    if (re.match(readOnlyGit, cmd) || re.match(readOnly, cmd)) return "allow";
    if (re.match(builds, cmd)) return "allow";
    if (re.match("^\\s*git\\s+push\\b", cmd)) return { decision: "ask", reason: "publishes commits" };
    return "ask";
  }
  if (req.tool === "write_file" || req.tool === "patch") {
    const p = req.args.path;
    if (typeof p !== "string" || p === "") return { decision: "deny", reason: "no path" };
    if (!path.within(p, req.cwd)) return { decision: "deny", reason: "write outside the working directory" };
    const abs = path.resolve(req.cwd, p);
    if (re.match("(^|/)\\.git(/|$)", abs)) return { decision: "deny", reason: "no writes into .git" };
    if (re.match("\\.(env|pem|key)$", abs)) return { decision: "ask", reason: "secret-looking file" };
    return "allow";
  }
  if (req.tool === "read_file" || req.tool === "search_files") return "allow";
  return "ask";
}
