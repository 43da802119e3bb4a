-- Helpers shared by the Lua example tests (require "lib.helpers").
local hermes = require "hermes"
local M = {}

function M.scripted(policy, replies)
  return hermes.create({ model = hermes.fake_model(replies), policy = policy, cwd = "scripts/tests" })
end

function M.tool_results(s)
  local out = {}
  for _, r in ipairs(s:history()) do
    if r.role == "tool" then out[#out + 1] = r.content end
  end
  return out
end

return M
