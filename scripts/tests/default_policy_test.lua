-- Example suite in Lua: the default policy asks about a flagged command (the test answers),
-- and lets an unflagged one run without asking.
local assert = require "assert"
local h = require "lib.helpers"

describe("default policy", function()
  test("asks about a recursive delete", function()
    local s = h.scripted("scripts/policies/default.lua", {
      { tool = "terminal", args = { command = "rm -r ./no-such-dir" } },
      { text = "asked first" },
    })
    local asked = {}
    local out = s:run("clean up", { approval = function(req)
      asked[#asked + 1] = req.pattern_key
      return "deny"
    end })
    assert.equal(out.text, "asked first")
    assert.equal(asked, { "recursive delete" })
  end)

  test("does not ask about ls", function()
    local s = h.scripted("scripts/policies/default.lua", {
      { tool = "terminal", args = { command = "ls" } },
      { text = "done" },
    })
    local out = s:run("list", { approval = function() error("not asked for ls") end })
    assert.equal(out.status, "completed")
  end)
end)
