// Headless ACP client: one `hermes acp` process per command, all on one HERMES_HOME, as a
// script or a CI job drives an agent. Each process gets its requests and then an immediate
// end of stdin (the requests are still in flight), so the agent must answer what it has read
// before it exits, and what one process created must be found by the next.
//
//   process 1: initialize + session/new, stdin closed at once → both answered, exit 0
//   process 2: initialize, session/resume, session/prompt, stdin closed at once → the turn runs
//   process 3: initialize + session/list, stdin closed at once → the session, with its title
//
// Every line is schema-checked (acp_wire.mjs). Environment: HERMES_BIN, ACP_WORK, plus what
// hermes needs (HERMES_HOME, HERMES_MODEL, OPENAI_BASE_URL, ...). Prints "ok - …" per step.

import * as acp from "@agentclientprotocol/sdk/unstable";
import { spawn } from "node:child_process";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import { Wire } from "./acp_wire.mjs";

const HERMES_BIN = process.env.HERMES_BIN;
const WORK = process.env.ACP_WORK;
if (!HERMES_BIN || !WORK || !path.isAbsolute(WORK)) {
  console.error("acp_headless: set HERMES_BIN and ACP_WORK (absolute)");
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

const INIT = { protocolVersion: 1, clientCapabilities: {}, clientInfo: { name: "hermes-headless", version: "1.0.0" } };

/**
 * One process: body(agent, endInput, updates) sends requests and awaits endInput(n) once it
 * has issued its last one (n messages in all); the process must then exit 0 on its own.
 */
async function oneProcess(label, body) {
  const child = spawn(HERMES_BIN, ["acp"], { cwd: WORK, env: process.env, stdio: ["pipe", "pipe", "pipe"] });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d) => (stderr = (stderr + d).slice(-8000)));
  const wire = new Wire(label);
  const updates = [];
  // The taps of wire.streams, kept here so the input can be ended behind the last request:
  // ending the client's side of the pipe flushes what it holds into stdin, then closes it.
  const inTap = wire.incoming();
  child.stdout.pipe(inTap);
  const outTap = wire.outgoing();
  outTap.pipe(child.stdin);
  child.stdin.on("error", () => {});
  const readable = Readable.toWeb(inTap);
  const writable = Writable.toWeb(outTap);
  // endInput(n): once the client has written n messages, end stdin.
  const endInput = async (n) => {
    const sent = () => wire.log.filter((x) => x.dir === "out").length >= n;
    await timed(
      new Promise((resolve) => {
        const poll = () => (sent() ? resolve() : setImmediate(poll));
        poll();
      }),
      `${label}: sending ${n} messages`,
    );
    outTap.end();
  };
  const app = acp
    .client({ name: "hermes-headless" })
    .onNotification(acp.methods.client.session.update, ({ params }) => updates.push(params))
    .onRequest(acp.methods.client.session.requestPermission, () => ({ outcome: { outcome: "cancelled" } }));
  let out;
  try {
    await app.connectWith(acp.ndJsonStream(writable, readable), async (agent) => {
      out = await body(agent, endInput, updates);
    });
  } catch (e) {
    child.kill("SIGKILL");
    throw new CheckError(`${label}: ${e.message}\n    wire: ${wire.log.map((x) => `${x.dir} ${JSON.stringify(x.msg).slice(0, 300)}`).join("\n    ")}\n    agent stderr: ${stderr}`);
  }
  const ex = await timed(exited, `${label}: exit after stdin EOF`);
  check(ex.code === 0, `${label}: exited ${ex.code ?? ex.signal}\n${stderr}`);
  check(wire.problems.length === 0, `${label}: wire problem ${wire.problems[0]?.kind} ${wire.problems[0]?.detail}\n    line: ${wire.problems[0]?.line}`);
  console.log(`ok - ${label}`);
  return out;
}

async function main() {
  const sessionId = await oneProcess("process 1: initialize + session/new, stdin closed with both in flight", async (agent, endInput) => {
    const init = agent.request(acp.methods.agent.initialize, INIT);
    const created = agent.request(acp.methods.agent.session.new, { cwd: WORK, mcpServers: [] });
    await endInput(2);
    const [i, n] = await timed(Promise.all([init, created]), "initialize + session/new");
    check(i.protocolVersion === 1, `initialize ${JSON.stringify(i)}`);
    check(typeof n.sessionId === "string" && n.sessionId !== "", `session/new ${JSON.stringify(n)}`);
    return n.sessionId;
  });

  await oneProcess("process 2: session/resume, then session/prompt with stdin closed behind it", async (agent, endInput, updates) => {
    await timed(agent.request(acp.methods.agent.initialize, INIT), "initialize");
    await timed(agent.request(acp.methods.agent.session.resume, { sessionId, cwd: WORK, mcpServers: [] }), "session/resume");
    const p = agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "headless: summarize the build" }] });
    await endInput(3);
    const r = await timed(p, "session/prompt");
    check(r.stopReason === "end_turn", `prompt ${JSON.stringify(r)}`);
    const said = updates
      .filter((u) => u.sessionId === sessionId && u.update.sessionUpdate === "agent_message_chunk")
      .map((u) => u.update.content.text)
      .join("");
    check(said === "Built fine.", `answer ${JSON.stringify(said)}`);
  });

  await oneProcess("process 3: session/list sees the session and its title", async (agent, endInput) => {
    const init = agent.request(acp.methods.agent.initialize, INIT);
    const list = agent.request(acp.methods.agent.session.list, { cwd: WORK });
    await endInput(2);
    const [, l] = await timed(Promise.all([init, list]), "initialize + session/list");
    const s = l.sessions.find((x) => x.sessionId === sessionId);
    check(s, `session/list lacks ${sessionId}: ${JSON.stringify(l)}`);
    check(s.title === "headless: summarize the build", `title ${JSON.stringify(s.title)}`);
  });
  return 0;
}

try {
  process.exitCode = await main();
} catch (e) {
  console.log(`not ok - ${String(e.stack || e).split("\n").join("\n    ")}`);
  process.exitCode = 1;
}
