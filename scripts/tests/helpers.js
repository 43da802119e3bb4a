// Helpers shared by the example tests (a module: require("./helpers.js")).
const hermes = require("hermes");

// A session run by a scripted model under the given policy file; paths are relative to the
// repository root, where the suite runs from (hermes test scripts/tests).
exports.scripted = (policy, replies) =>
  hermes.create({ model: hermes.fake_model(replies), policy, cwd: "scripts/tests" });

// The text of the session's tool results, in order.
exports.toolResults = (s) => s.history().filter((r) => r.role === "tool").map((r) => r.content);
