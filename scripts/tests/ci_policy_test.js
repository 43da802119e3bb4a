// Example suite: the CI policy decides scripted turns end to end, with no model server and
// no cassette. Run from the repository root:
//
//   hermes test scripts/tests                      (pretty)
//   hermes test --reporter junit scripts/tests     (for a CI system)
const assert = require("assert");
const { scripted, toolResults } = require("./helpers.js");

const nobody = () => {
  throw new Error("the policy decides in CI; nobody is asked");
};

describe("ci policy", () => {
  test("denies a flagged command without asking", () => {
    const s = scripted("scripts/policies/ci.js", [
      { tool: "terminal", args: { command: "rm -rf ./no-such-dir" } },
      { text: "I could not delete it." },
    ]);
    const out = s.run("clean up", { approval: nobody });
    assert.equal(out.status, "completed");
    assert.equal(out.text, "I could not delete it.");
    assert.match(toolResults(s)[0], "CI never runs flagged commands");
  });

  test("lets a read-only command run", () => {
    const s = scripted("scripts/policies/ci.js", [
      { tool: "terminal", args: { command: "ls" } },
      { text: "listed" },
    ]);
    assert.equal(s.run("list the files", { approval: nobody }).status, "completed");
    assert.contains(toolResults(s)[0], "ci_policy_test.js");
  });
});
