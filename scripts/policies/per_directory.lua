-- A policy that depends on where the session works: edit RULES to match your directories.
-- The first rule whose pattern matches the session's working directory decides its trust:
--
--   open     scratch space: allow everything inside it, flagged commands included
--   normal   ask before flagged commands and writes outside the directory; allow the rest
--   readonly look, do not touch: only reading commands and read tools; deny writes
local re = require "re"
local path = require "path"

local RULES = {
  { cwd = [[/(scratch|sandbox|tmp)(/|$)]], trust = "open" },
  { cwd = [[/(prod|production|deploy|infra|secrets)(/|$)]], trust = "readonly" },
  { cwd = "", trust = "normal" }, -- everything else
}

local READS = [[^\s*(ls|pwd|cat|head|tail|wc|grep|rg|find|stat|tree|git\s+(status|diff|log|show))\b]]

local function trustOf(cwd)
  for _, r in ipairs(RULES) do
    if re.match(r.cwd, cwd) then return r.trust end
  end
  return "normal"
end

function approval(req)
  local trust = trustOf(req.cwd)
  local writes = req.tool == "write_file" or req.tool == "patch"
  if trust == "readonly" then
    if req.tool == "read_file" or req.tool == "search_files" then return "allow" end
    if req.tool == "terminal" and req.pattern == "" and re.match(READS, req.command) and not re.match("[;&|`$<>]", req.command) then
      return "allow"
    end
    return { decision = "deny", reason = "read-only directory: " .. req.cwd }
  end
  if writes then
    local p = req.args.path
    if type(p) ~= "string" or p == "" then return { decision = "deny", reason = "no path given" } end
    if not path.within(p, req.cwd) then return { decision = "ask", reason = "writes outside " .. req.cwd } end
    return "allow"
  end
  if req.tool == "terminal" and req.pattern ~= "" then
    if trust == "open" then return { decision = "allow", reason = "scratch directory" } end
    return { decision = "ask", reason = req.pattern }
  end
  return "allow"
end

examples = {
  { name = "scratch rm -r", input = { command = "rm -rf out", pattern = "recursive delete", cwd = "/home/me/scratch/a" }, want = "allow" },
  { name = "project rm -r", input = { command = "rm -rf out", pattern = "recursive delete", cwd = "/home/me/src/app" }, want = "ask" },
  { name = "infra look", input = { command = "git log -3", cwd = "/srv/infra" }, want = "allow" },
  { name = "infra touch", input = { command = "terraform apply", cwd = "/srv/infra" }, want = "deny" },
  { name = "infra write", input = { tool = "write_file", args = { path = "main.tf" }, cwd = "/srv/infra" }, want = "deny" },
  { name = "project write", input = { tool = "write_file", args = { path = "main.go" }, cwd = "/home/me/src/app" }, want = "allow" },
  { name = "write outside", input = { tool = "write_file", args = { path = "/etc/motd" }, cwd = "/home/me/scratch" }, want = "ask" },
}
