-- CI example: drive one recorded turn end to end, answer its approval, check what it did.
--
--   hermes run --grant fs scripts/ci/cassette_turn.lua CASSETTE "PROMPT"
--
-- The model is replayed from CASSETTE, so the run is offline and repeatable. The script is
-- the approver: it allows the one recursive delete it expects and denies anything else.
local hermes = require "hermes"
local assert = require "assert"
local fs = require "fs"
local time = require "time"

local cassette, prompt = hermes.args[1], hermes.args[2]
if not cassette or not prompt then
  print("usage: hermes run --grant fs cassette_turn.lua CASSETTE PROMPT")
  hermes.exit(2)
end

local s = hermes.create({ model = "replay:" .. cassette, title = "ci " .. time.now() })
local asked = {}
local out = s:run(prompt, {
  approval = function(req)
    asked[#asked + 1] = req.command
    if req.pattern_key == "recursive delete" then return "once" end
    return "deny"
  end,
})

assert.equal(out.status, "completed", "turn status")
assert.equal(asked, { "rm -r build" }, "approvals asked")
assert.ok(fs.exists("notes/todo.md"), "notes/todo.md was written")
assert.ok(not fs.exists("build"), "build/ was removed")
local tools = 0
for _, r in ipairs(s:history()) do
  if r.role == "tool" then tools = tools + 1 end
end
print(string.format("session %s turn %s: %s, %d tool results", s.id, out.turn_id, out.turn_exit_reason, tools))
