// CI example: review a stored session after the fact. Lists every tool call with its result
// and fails (exit 1) when one was blocked, so a job can require a clean run.
//
//   hermes run scripts/ci/review_session.js SESSION_ID
const hermes = require("hermes");
const assert = require("assert");

const id = hermes.args[0];
if (!id) {
  print("usage: hermes run review_session.js SESSION_ID");
  hermes.exit(2);
}
const s = hermes.open(id);
const calls = {};
const blocked = [];
for (const row of s.history()) {
  if (row.role === "assistant" && row.tool_calls) {
    for (const c of row.tool_calls) calls[c.id] = c;
  }
  if (row.role === "tool") {
    const c = calls[row.tool_call_id] || { name: row.tool_name, arguments: "" };
    const ok = !row.content.startsWith("BLOCKED");
    print(`${ok ? "ok     " : "BLOCKED"} ${c.name} ${c.arguments}`);
    if (!ok) blocked.push(`${c.name} ${c.arguments}: ${row.content}`);
  }
}
assert.equal(blocked, [], "blocked tool calls in session " + id);
