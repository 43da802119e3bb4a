// CI example: drive one recorded turn end to end, answer its approval, check what it did.
//
//   hermes run --grant fs scripts/ci/cassette_turn.js CASSETTE "PROMPT"
//
// The model is replayed from CASSETTE, so the run is offline and repeatable. The script is
// the approver: it allows the one recursive delete it expects and denies anything else.
const hermes = require("hermes");
const assert = require("assert");
const fs = require("fs");

const [cassette, prompt] = hermes.args;
if (!cassette || !prompt) {
  print("usage: hermes run --grant fs cassette_turn.js CASSETTE PROMPT");
  hermes.exit(2);
}

const s = hermes.create({ model: "replay:" + cassette, title: "ci " + Date.now() });
const asked = [];
const out = s.run(prompt, {
  approval: (req) => {
    asked.push(req.command);
    return req.pattern_key === "recursive delete" ? "once" : "deny";
  },
});

assert.equal(out.status, "completed", "turn status");
assert.equal(asked, ["rm -r build"], "approvals asked");
assert.ok(fs.exists("notes/todo.md"), "notes/todo.md was written");
assert.ok(!fs.exists("build"), "build/ was removed");
const tools = s.history().filter((r) => r.role === "tool").length;
print(`session ${s.id} turn ${out.turn_id}: ${out.turn_exit_reason}, ${tools} tool results`);
