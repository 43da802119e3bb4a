-- A strict policy for CI, where nobody is there to answer: it never asks. Reading, building
-- and testing are allowed, and so are writes inside the working directory (not into .git or
-- secret-looking files); everything else is denied with a reason the model can act on:
-- anything the danger detector flags, the network, installs, pushes, and privilege.
--
--   HERMES_POLICY=scripts/policies/ci.lua hermes run ci.lua
local re = require "re"
local path = require "path"

local READ_ONLY = [[^\s*(ls|pwd|cat|head|tail|wc|grep|rg|find|echo|which|stat|file|diff|sort|uniq|tree)\b]]
local READ_ONLY_GIT = [[^\s*git\s+(status|diff|log|show|branch|rev-parse|ls-files)\b]]
local BUILD = [[^\s*(go\s+(test|build|vet)|npm\s+(test|run\s+(build|test|lint))|cargo\s+(test|build|check|clippy)|make(\s+(test|build|check|lint))?|pytest)\b]]
local CHAIN = "[;&|`$<>]" -- a compound command is judged as a whole: deny

local function terminal(req)
  local cmd = req.command
  if req.pattern ~= "" then return { decision = "deny", reason = "CI never runs flagged commands (" .. req.pattern .. ")" } end
  if re.match(CHAIN, cmd) then return { decision = "deny", reason = "CI runs single commands only, no pipes, chains or redirections" } end
  if re.match(READ_ONLY, cmd) or re.match(READ_ONLY_GIT, cmd) or re.match(BUILD, cmd) then return "allow" end
  return { decision = "deny", reason = "not on the CI allow-list (read, build, test)" }
end

local function write(req)
  local p = req.args.path
  if type(p) ~= "string" or p == "" then return { decision = "deny", reason = "no path given" } end
  local abs = path.resolve(req.cwd, p)
  if not path.within(abs, req.cwd) then return { decision = "deny", reason = "CI writes stay inside the working directory" } end
  if re.match([[(^|/)\.git(/|$)]], abs) then return { decision = "deny", reason = "never write into .git" } end
  if re.match([[(^|/)(\.env(\..*)?|.*\.(pem|key|p12))$]], abs) then return { decision = "deny", reason = "no secrets in CI" } end
  return "allow"
end

function approval(req)
  if req.tool == "terminal" then return terminal(req) end
  if req.tool == "write_file" or req.tool == "patch" then return write(req) end
  if req.tool == "read_file" or req.tool == "search_files" then return "allow" end
  return { decision = "deny", reason = "tool not allowed in CI: " .. req.tool }
end

-- A CI job is one script: anything typed while a turn runs waits for the turn to end.
function busy_input(req)
  return "queue"
end

-- A CI agent works through a big repository in long turns: it compacts a little earlier than
-- the default (room for the next build log), into a summary that keeps what the job needs.
local CI_SUMMARY = "Summarise the work so far for your own future reference: the task, the commands run and their results (failing tests and errors verbatim), the files changed, and what is left to do. This summary replaces the earlier messages."

function compact(req)
  return { threshold = 0.4, prompt = CI_SUMMARY }
end

examples = {
  { input = { command = "go test ./..." }, want = "allow" },
  { input = { command = "git diff --stat" }, want = "allow" },
  { input = { command = "make" }, want = "allow" },
  { input = { command = "go test ./... | tee log" }, want = "deny" },
  { input = { command = "curl https://example.com" }, want = "deny" },
  { input = { command = "git push origin main" }, want = "deny" },
  { input = { command = "rm -r build", pattern = "recursive delete" }, want = { decision = "deny", reason = "CI never runs flagged commands (recursive delete)" } },
  { input = { tool = "write_file", args = { path = "out/report.txt" }, cwd = "/ci/work" }, want = "allow" },
  { input = { tool = "write_file", args = { path = "/etc/hosts" }, cwd = "/ci/work" }, want = "deny" },
  { input = { tool = "delegate_task", args = { goal = "x" }, cwd = "/ci/work" }, want = "deny" },
  { hook = "busy_input", input = { text = "stop" }, want = "queue" },
  { hook = "compact", input = { context_used = 45000, context_max = 100000 }, want = { compact = true, threshold = 0.4 } },
  { hook = "compact", input = { context_used = 30000, context_max = 100000 }, want = false },
}
