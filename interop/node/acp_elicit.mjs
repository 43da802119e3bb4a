// ACP elicitation with the official client: @agentclientprotocol/sdk advertises
// clientCapabilities.elicitation.form and answers elicitation/create with its own handler,
// against the real `hermes acp`. Every line is schema-checked (acp_wire.mjs), so the form
// request must be the protocol's CreateElicitationRequest (form mode, session scope).
//
//   1. a free-text clarify question arrives as a form for the session and its tool call;
//      accepted, the model gets the text
//   2. the next one is declined; the turn still ends normally
//
// Environment: HERMES_BIN, ACP_WORK, plus what hermes needs (HERMES_HOME, HERMES_MODEL,
// OPENAI_BASE_URL, ...). The driving test scripts the model. Prints "ok - …" per case.

import * as acp from "@agentclientprotocol/sdk/unstable";
import { spawn } from "node:child_process";
import path from "node:path";
import { Wire } from "./acp_wire.mjs";

const HERMES_BIN = process.env.HERMES_BIN;
const WORK = process.env.ACP_WORK;
if (!HERMES_BIN || !WORK || !path.isAbsolute(WORK)) {
  console.error("acp_elicit: set HERMES_BIN and ACP_WORK (absolute)");
  process.exit(2);
}
const REQUEST_MS = Number(process.env.ACP_REQUEST_TIMEOUT_MS || 90_000);

class CheckError extends Error {}
function check(cond, msg) {
  if (!cond) throw new CheckError(msg);
}
function timed(promise, what) {
  let timer;
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new CheckError(`${what}: no answer within ${REQUEST_MS} ms`)), REQUEST_MS);
  });
  return Promise.race([promise, t]).finally(() => clearTimeout(timer));
}

async function main() {
  const child = spawn(HERMES_BIN, ["acp"], { cwd: WORK, env: process.env, stdio: ["pipe", "pipe", "pipe"] });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d) => (stderr = (stderr + d).slice(-8000)));
  const wire = new Wire("agent");
  const { readable, writable } = wire.streams(child);
  const updates = [];
  const forms = [];
  let reply = () => ({ action: "cancel" });
  const app = acp
    .client({ name: "hermes-elicit" })
    .onNotification(acp.methods.client.session.update, ({ params }) => updates.push(params))
    .onRequest(acp.methods.client.session.requestPermission, () => {
      throw new CheckError("a free-text question came as a permission request");
    })
    .onRequest(acp.methods.client.elicitation.create, ({ params }) => {
      forms.push(params);
      return reply(params);
    });
  const said = (sid, from) =>
    updates
      .slice(from)
      .filter((u) => u.sessionId === sid && u.update.sessionUpdate === "agent_message_chunk")
      .map((u) => u.update.content.text)
      .join("");
  try {
    await app.connectWith(acp.ndJsonStream(writable, readable), async (agent) => {
      const init = await timed(
        agent.request(acp.methods.agent.initialize, {
          protocolVersion: 1,
          clientCapabilities: { elicitation: { form: {} } },
          clientInfo: { name: "hermes-elicit", version: "1.0.0" },
        }),
        "initialize",
      );
      check(init.protocolVersion === 1, `initialize ${JSON.stringify(init)}`);
      const { sessionId } = await timed(agent.request(acp.methods.agent.session.new, { cwd: WORK, mcpServers: [] }), "session/new");

      reply = (p) => ({ action: "accept", content: { [Object.keys(p.requestedSchema.properties)[0]]: "api-gateway" } });
      let from = updates.length;
      let r = await timed(agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "elicit: create the service" }] }), "first prompt");
      check(r.stopReason === "end_turn", `first prompt ${JSON.stringify(r)}`);
      check(forms.length === 1, `${forms.length} forms`);
      const f = forms[0];
      check(f.mode === "form" && f.sessionId === sessionId && f.message === "What should the service be called?", `form ${JSON.stringify(f)}`);
      const call = updates.find((u) => u.update.sessionUpdate === "tool_call" && u.update.title === "clarify");
      check(call && f.toolCallId === call.update.toolCallId, `form toolCallId ${f.toolCallId}, clarify call ${call && call.update.toolCallId}`);
      const field = f.requestedSchema.properties[f.requestedSchema.required[0]];
      check(f.requestedSchema.type === "object" && field && field.type === "string", `schema ${JSON.stringify(f.requestedSchema)}`);
      check(said(sessionId, from) === "Named it api-gateway.", `answer ${JSON.stringify(said(sessionId, from))}`);
      console.log("ok - a free-text question is a form for the session and its tool call; accepted, the model gets the text");

      reply = () => ({ action: "decline" });
      from = updates.length;
      r = await timed(agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "elicit: expose it" }] }), "second prompt");
      check(r.stopReason === "end_turn" && forms.length === 2, `second prompt ${JSON.stringify(r)}, ${forms.length} forms`);
      const failed = updates.slice(from).find((u) => u.update.sessionUpdate === "tool_call_update" && u.update.status === "failed");
      check(failed, "the declined question's tool call did not fail");
      check(said(sessionId, from) === "Using 8080.", `answer ${JSON.stringify(said(sessionId, from))}`);
      console.log("ok - declined, the question is withdrawn and the turn goes on");
    });
  } catch (e) {
    child.kill("SIGKILL");
    throw new CheckError(`${e.message}\n    wire: ${wire.log.map((x) => `${x.dir} ${JSON.stringify(x.msg).slice(0, 400)}`).join("\n    ")}\n    agent stderr: ${stderr}`);
  }
  child.stdin.end();
  const ex = await timed(exited, "exit after stdin EOF");
  check(ex.code === 0, `exited ${ex.code ?? ex.signal}\n${stderr}`);
  check(wire.problems.length === 0, `wire problem ${wire.problems[0]?.kind} ${wire.problems[0]?.detail}\n    line: ${wire.problems[0]?.line}`);
  console.log(`ok - ${wire.log.length} messages schema-checked, 0 wire problems`);
  return 0;
}

try {
  process.exitCode = await main();
} catch (e) {
  console.log(`not ok - ${String(e.stack || e).split("\n").join("\n    ")}`);
  process.exitCode = 1;
}
