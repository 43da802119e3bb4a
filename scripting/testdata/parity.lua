-- The same policy as parity.js: the parity test feeds both the same approval inputs and
-- requires identical decisions.
local re = require "re"
local path = require "path"

local readOnly = [[^\s*(ls|pwd|cat|head|tail|wc|grep|rg|find|echo|which|stat)\b]]
local readOnlyGit = [[^\s*git\s+(status|diff|log|show|branch)\b]]
local builds = [[^\s*(go|npm|cargo|make|pytest)\s+(test|build|vet|run)\b]]

local function includes(list, x)
  for _, v in ipairs(list) do
    if v == x then return true end
  end
  return false
end

function approval(req)
  if req.tool == "terminal" then
    local cmd = req.command
    if re.match([[\bsudo\b]], cmd) then return { decision = "deny", reason = "no sudo" } end
    if re.match([[\b(curl|wget)\b[^|]*\|\s*(sh|bash)\b]], cmd) then
      return { decision = "deny", reason = "no piping downloads into a shell" }
    end
    if req.pattern ~= "" and includes(req.approved, req.pattern) then
      return { decision = "allow", reason = "approved earlier: " .. req.pattern }
    end
    if req.pattern == "recursive delete" and re.match([[^\s*rm\s+-r[f]?\s+(build|dist|node_modules|target)/?\s*$]], cmd) then
      return { decision = "allow", reason = "build output" }
    end
    if req.pattern ~= "" then return { decision = "ask", reason = req.pattern } end
    if re.match(readOnlyGit, cmd) or re.match(readOnly, cmd) then return "allow" end
    if re.match(builds, cmd) then return "allow" end
    if re.match([[^\s*git\s+push\b]], cmd) then return { decision = "ask", reason = "publishes commits" } end
    return "ask"
  end
  if req.tool == "write_file" or req.tool == "patch" then
    local p = req.args.path
    if type(p) ~= "string" or p == "" then return { decision = "deny", reason = "no path" } end
    if not path.within(p, req.cwd) then return { decision = "deny", reason = "write outside the working directory" } end
    local abs = path.resolve(req.cwd, p)
    if re.match([[(^|/)\.git(/|$)]], abs) then return { decision = "deny", reason = "no writes into .git" } end
    if re.match([[\.(env|pem|key)$]], abs) then return { decision = "ask", reason = "secret-looking file" } end
    return "allow"
  end
  if req.tool == "read_file" or req.tool == "search_files" then return "allow" end
  return "ask"
end
