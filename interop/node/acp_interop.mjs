// ACP interop suite: the official TypeScript client (@agentclientprotocol/sdk) drives the real
// `hermes acp` binary over stdio, and every line either side writes is checked against the
// ACP JSON Schema (acp_wire.mjs).
//
// Environment:
//   HERMES_BIN   the hermes executable, started as `HERMES_BIN acp` with this environment
//   ACP_WORK     absolute working directory for the sessions (tools run there)
//   plus whatever hermes itself needs (HERMES_HOME, HERMES_MODEL, OPENAI_BASE_URL, ...).
//
// The model is a scripted fake: the driving test enqueues one answer per model request, in
// the order the cases below make them. The cases therefore run strictly in sequence, and the
// first failure stops the run (later answers would be consumed out of order). Each case
// prints "ok - name" or "not ok - name" with diagnostics; the exit code is 0 only when every
// case passed and no wire problem was seen.

import * as acp from "@agentclientprotocol/sdk/unstable";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { Wire, selfTest } from "./acp_wire.mjs";

const HERMES_BIN = process.env.HERMES_BIN;
const WORK = process.env.ACP_WORK;
if (!HERMES_BIN || !WORK || !path.isAbsolute(WORK)) {
  console.error("acp_interop: set HERMES_BIN and ACP_WORK (absolute)");
  process.exit(2);
}
// Generous: the agent may be a race-instrumented test binary on a loaded machine. These bound
// a hang so it fails with diagnostics; they are not latency assertions.
const REQUEST_MS = Number(process.env.ACP_REQUEST_TIMEOUT_MS || 90_000);

// Updates that belong to a turn (or a load replay). They must arrive while a session/prompt or
// session/load for their session is outstanding.
const TURN_UPDATES = new Set(["user_message_chunk", "agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan"]);
const TERMINAL = new Set(["completed", "failed"]);

class CheckError extends Error {}

function check(cond, msg) {
  if (!cond) throw new CheckError(msg);
}

function timed(promise, what, ms = REQUEST_MS) {
  let timer;
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new CheckError(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, t]).finally(() => clearTimeout(timer));
}

const text = (t) => [{ type: "text", text: t }];

/** Records what the SDK hands the client, and lets cases wait for an update. */
class Recorder {
  constructor() {
    this.updates = []; // {sessionId, update}
    this.permissions = []; // params
    this.violations = [];
    this.waiters = [];
    this.expectNoPermission();
  }

  /** From now on a permission request is a failure (answered cancelled). */
  expectNoPermission() {
    // Answers session/request_permission: returns an optionId, or null for "cancelled".
    this.answer = (p) => {
      this.violations.push(`unexpected session/request_permission for ${p.toolCall.toolCallId}`);
      return null;
    };
  }

  update(params) {
    this.updates.push(params);
    this.waiters = this.waiters.filter((w) => {
      if (!w.pred(params)) return true;
      w.resolve(params);
      return false;
    });
  }

  async permission(params) {
    this.permissions.push(params);
    let choice = null;
    try {
      choice = await this.answer(params);
    } catch (e) {
      this.violations.push(`permission request ${params.toolCall.toolCallId}: ${e.message}`);
    }
    return choice === null ? { outcome: { outcome: "cancelled" } } : { outcome: { outcome: "selected", optionId: choice } };
  }

  waitFor(pred, what) {
    const hit = this.updates.find(pred);
    if (hit) return Promise.resolve(hit);
    return timed(new Promise((resolve) => this.waiters.push({ pred, resolve })), `waiting for ${what}`);
  }

  mark() {
    return { updates: this.updates.length, permissions: this.permissions.length };
  }

  /** Updates for sessionId since mark, summarized. */
  since(mark, sessionId) {
    const ups = this.updates.slice(mark.updates).filter((u) => u.sessionId === sessionId).map((u) => u.update);
    const tools = new Map();
    let message = "";
    let user = "";
    const config = [];
    const modes = [];
    for (const u of ups) {
      switch (u.sessionUpdate) {
        case "agent_message_chunk":
          if (u.content.type === "text") message += u.content.text;
          break;
        case "user_message_chunk":
          if (u.content.type === "text") user += u.content.text + "\n";
          break;
        case "tool_call":
          tools.set(u.toolCallId, { title: u.title, kind: u.kind, statuses: [u.status || "pending"] });
          break;
        case "tool_call_update": {
          const t = tools.get(u.toolCallId) || { statuses: ["(no tool_call)"] };
          if (u.status) t.statuses.push(u.status);
          tools.set(u.toolCallId, t);
          break;
        }
        case "config_option_update":
          config.push(u.configOptions);
          break;
        case "current_mode_update":
          modes.push(u.currentModeId);
          break;
      }
    }
    const last = (id) => {
      const t = tools.get(id);
      return t && t.statuses[t.statuses.length - 1];
    };
    return {
      updates: ups,
      kinds: ups.map((u) => u.sessionUpdate),
      message,
      user,
      tools,
      last,
      config,
      modes,
      permissions: this.permissions.slice(mark.permissions).filter((p) => p.sessionId === sessionId),
    };
  }
}

/** One `hermes acp` process with the SDK client connected through the wire checker. */
async function withAgent(label, body) {
  const child = spawn(HERMES_BIN, ["acp"], { cwd: WORK, env: process.env, stdio: ["pipe", "pipe", "pipe"] });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  const spawnFailed = new Promise((_, reject) => child.on("error", (e) => reject(new CheckError(`spawn ${HERMES_BIN}: ${e.message}`))));
  spawnFailed.catch(() => {});
  let stderrTail = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d) => {
    stderrTail = (stderrTail + d).slice(-8000);
    for (const l of d.split("\n")) if (l) console.error(`[${label} stderr] ${l}`);
  });
  const wire = new Wire(label);
  const rec = new Recorder();
  const { readable, writable } = wire.streams(child);
  const unadvertised = (method) => () => {
    rec.violations.push(`agent called ${method}, which the client did not advertise`);
    throw acp.RequestError.methodNotFound(method);
  };
  const app = acp
    .client({ name: "hermes-interop" })
    .onNotification(acp.methods.client.session.update, ({ params }) => rec.update(params))
    .onRequest(acp.methods.client.session.requestPermission, ({ params }) => rec.permission(params))
    .onRequest(acp.methods.client.fs.readTextFile, unadvertised("fs/read_text_file"))
    .onRequest(acp.methods.client.fs.writeTextFile, unadvertised("fs/write_text_file"))
    .onRequest(acp.methods.client.terminal.create, unadvertised("terminal/create"));
  const ctx = { label, wire, rec, child };
  try {
    await Promise.race([
      spawnFailed,
      app.connectWith(acp.ndJsonStream(writable, readable), async (agent) => {
        ctx.agent = agent;
        await body(ctx);
      }),
    ]);
  } catch (e) {
    e.wire = wire;
    e.stderrTail = stderrTail;
    child.kill("SIGKILL");
    throw e;
  }
  // The client hangs up: stdin EOF must end the agent cleanly.
  child.stdin.end();
  const ex = await timed(exited, `${label}: exit after stdin EOF`);
  check(ex.code === 0, `${label}: agent exited with ${ex.code ?? ex.signal} after stdin EOF\n${stderrTail}`);
  lifecycle(wire);
  check(rec.violations.length === 0, `${label}: ${rec.violations.join("; ")}`);
  check(wire.problems.length === 0, `${label}: ${wire.problems.length} wire problem(s), first: ${wire.problems[0]?.kind} ${wire.problems[0]?.detail}\n    line: ${wire.problems[0]?.line}`);
  return ctx;
}

/**
 * Protocol-order checks over the whole recorded exchange of one process: turn updates only
 * while a prompt or load for their session is outstanding; every tool_call_update refers to a
 * tool_call shown before; no status change after a terminal one; every tool call terminal by
 * the time the prompt (or load) that showed it is answered; permission requests refer to a
 * visible, still open tool call.
 */
function lifecycle(wire) {
  const pending = new Map(); // client request id → {method, sessionId}
  const active = new Map(); // sessionId → outstanding prompt/load count
  const tools = new Map(); // sessionId → Map(toolCallId → status)
  const toolsOf = (sid) => {
    if (!tools.has(sid)) tools.set(sid, new Map());
    return tools.get(sid);
  };
  for (const { seq, dir, msg } of wire.log) {
    if (dir === "out" && "id" in msg && (msg.method === "session/prompt" || msg.method === "session/load")) {
      const sid = msg.params.sessionId;
      pending.set(msg.id, { method: msg.method, sessionId: sid });
      active.set(sid, (active.get(sid) || 0) + 1);
      if (msg.method === "session/load") tools.set(sid, new Map()); // the replay shows them anew
      continue;
    }
    if (dir !== "in") continue;
    if (!("method" in msg) && pending.has(msg.id)) {
      const { method, sessionId } = pending.get(msg.id);
      pending.delete(msg.id);
      active.set(sessionId, active.get(sessionId) - 1);
      if ("result" in msg) {
        for (const [id, status] of toolsOf(sessionId)) {
          if (!TERMINAL.has(status)) wire.problem("tool-left-open", `${method} for ${sessionId} answered (seq ${seq}) while tool call ${id} is ${status}`);
        }
      }
      continue;
    }
    if (msg.method === "session/request_permission") {
      const id = msg.params?.toolCall?.toolCallId;
      const st = toolsOf(msg.params?.sessionId).get(id);
      if (st === undefined) wire.problem("permission-before-tool-call", `permission request (seq ${seq}) for tool call ${id} that was never shown`);
      else if (TERMINAL.has(st)) wire.problem("permission-for-closed-call", `permission request (seq ${seq}) for tool call ${id}, already ${st}`);
      continue;
    }
    if (msg.method !== "session/update") continue;
    const sid = msg.params?.sessionId;
    const u = msg.params?.update || {};
    if (TURN_UPDATES.has(u.sessionUpdate) && !(active.get(sid) > 0)) {
      wire.problem("update-outside-turn", `${u.sessionUpdate} for ${sid} (seq ${seq}) while no session/prompt or session/load of it is outstanding`, JSON.stringify(msg));
    }
    const ts = toolsOf(sid);
    if (u.sessionUpdate === "tool_call") {
      if (ts.has(u.toolCallId)) wire.problem("tool-call-repeated", `tool_call ${u.toolCallId} shown twice (seq ${seq})`);
      ts.set(u.toolCallId, u.status || "pending");
    } else if (u.sessionUpdate === "tool_call_update") {
      const prev = ts.get(u.toolCallId);
      if (prev === undefined) {
        wire.problem("update-before-tool-call", `tool_call_update for unknown ${u.toolCallId} (seq ${seq})`);
        continue;
      }
      if (u.status && TERMINAL.has(prev) && u.status !== prev) wire.problem("status-after-terminal", `tool call ${u.toolCallId}: ${prev} then ${u.status} (seq ${seq})`);
      if (u.status && !TERMINAL.has(prev)) ts.set(u.toolCallId, u.status);
    }
  }
}

/** Seq of the first wire message matching pred, searching from seq `after`. */
function seqOf(wire, pred, after = 0) {
  const e = wire.log.find((e) => e.seq > after && pred(e.msg, e.dir));
  return e ? e.seq : -1;
}

function lastExchange(wire, method, sessionId) {
  const ex = wire.exchange(method, (p) => p.sessionId === sessionId);
  return ex[ex.length - 1];
}

// ---------------------------------------------------------------------------------------------

const results = [];
const state = {}; // ids carried between cases and processes

async function runCase(ctx, name, fn) {
  try {
    await fn(ctx);
    results.push({ name, ok: true });
    console.log(`ok - ${name}`);
  } catch (e) {
    results.push({ name, ok: false });
    console.log(`not ok - ${name}\n    ${String(e.stack || e).split("\n").join("\n    ")}`);
    e.reported = true;
    throw e;
  }
}

async function prompt(agent, sessionId, t, what = `prompt ${JSON.stringify(t)}`) {
  return timed(agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: text(t) }), what);
}

async function newSession(agent) {
  const r = await timed(agent.request(acp.methods.agent.session.new, { cwd: WORK, mcpServers: [] }), "session/new");
  check(typeof r.sessionId === "string" && r.sessionId !== "", `session/new returned no sessionId: ${JSON.stringify(r)}`);
  return r;
}

function modelOption(configOptions) {
  return (configOptions || []).find((o) => o.category === "model");
}

function mkdirs(...names) {
  for (const n of names) fs.mkdirSync(path.join(WORK, n), { recursive: true });
}
const exists = (n) => fs.existsSync(path.join(WORK, n));

async function processOne(ctx) {
  const { agent, wire, rec } = ctx;

  await runCase(ctx, "initialize: protocol v1, honest capabilities, auth methods", async () => {
    const r = await timed(
      agent.request(acp.methods.agent.initialize, {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false, auth: { terminal: true } },
        clientInfo: { name: "hermes-interop", title: "Hermes interop suite", version: "1.0.0" },
      }),
      "initialize",
    );
    check(r.protocolVersion === 1, `protocolVersion ${r.protocolVersion}`);
    const caps = r.agentCapabilities || {};
    check(caps.loadSession === true, "loadSession not advertised");
    check(caps.promptCapabilities?.image === true && caps.promptCapabilities?.embeddedContext === true, `promptCapabilities ${JSON.stringify(caps.promptCapabilities)}`);
    check(!caps.promptCapabilities?.audio, "audio advertised, but audio prompts are refused");
    const sc = caps.sessionCapabilities || {};
    for (const k of ["list", "resume", "close", "fork"]) check(sc[k] && typeof sc[k] === "object", `sessionCapabilities.${k} missing: ${JSON.stringify(sc)}`);
    check(r.agentInfo?.name === "hermes" && r.agentInfo?.version, `agentInfo ${JSON.stringify(r.agentInfo)}`);
    const methods = r.authMethods || [];
    const agentAuth = methods.find((m) => (m.type === undefined || m.type === "agent") && m.id === "agent");
    const termAuth = methods.find((m) => m.type === "terminal");
    check(agentAuth, `no agent-type auth method: ${JSON.stringify(methods)}`);
    check(termAuth && termAuth.id === "hermes-setup" && JSON.stringify(termAuth.args) === '["--setup"]', `terminal auth method: ${JSON.stringify(termAuth)}`);
    const auth = await timed(agent.request(acp.methods.agent.authenticate, { methodId: "agent" }), "authenticate");
    check(auth && typeof auth === "object", `authenticate result ${JSON.stringify(auth)}`);
  });

  await runCase(ctx, "session/new: a session with the model selector", async () => {
    const r = await newSession(agent);
    state.s1 = r.sessionId;
    const m = modelOption(r.configOptions);
    check(m && m.type === "select" && m.currentValue === process.env.HERMES_MODEL, `model option ${JSON.stringify(r.configOptions)}`);
    const values = (m.options || []).flatMap((o) => (o.options ? o.options : [o])).map((o) => o.value);
    check(values.includes("openai:other"), `model choices ${JSON.stringify(values)} lack openai:other`);
  });

  await runCase(ctx, "prompt: chunks stream before the response, stopReason end_turn", async () => {
    const mark = rec.mark();
    let seenAtResponse = -1;
    const r = await prompt(agent, state.s1, "stream: say hello").then((r) => {
      seenAtResponse = rec.updates.length - mark.updates;
      return r;
    });
    check(r.stopReason === "end_turn", `stopReason ${r.stopReason}`);
    const s = rec.since(mark, state.s1);
    const chunks = s.updates.filter((u) => u.sessionUpdate === "agent_message_chunk");
    // The model streams three fragments; more than one chunk shows they were not buffered
    // into one message (adjacent fragments may legitimately be merged).
    check(chunks.length >= 2, `want the streamed fragments as separate chunks, got ${chunks.length}: ${JSON.stringify(s.kinds)}`);
    check(s.message === "Hello from Hermes.", `streamed text ${JSON.stringify(s.message)}`);
    check(seenAtResponse === s.updates.length, `${s.updates.length - seenAtResponse} update(s) reached the client after the prompt response`);
    // On the wire: every chunk precedes the response line.
    const ex = lastExchange(wire, "session/prompt", state.s1);
    check(ex && ex.response, "no prompt response on the wire");
    const after = wire.log.filter((e) => e.seq > ex.response.seq && e.msg.method === "session/update" && e.msg.params.sessionId === state.s1);
    check(after.length === 0, `updates after the response on the wire: ${after.map((e) => e.seq)}`);
  });

  await runCase(ctx, "permission: allow once runs the call, shown as a tool call first", async () => {
    mkdirs("build-once");
    const mark = rec.mark();
    rec.answer = (p) => {
      const kinds = p.options.map((o) => o.kind);
      check(kinds.includes("allow_once") && kinds.includes("reject_once") && kinds.includes("allow_always"), `options ${JSON.stringify(p.options)}`);
      return p.options.find((o) => o.kind === "allow_once").optionId;
    };
    const r = await prompt(agent, state.s1, "allow-once: remove build-once");
    check(r.stopReason === "end_turn", `stopReason ${r.stopReason}`);
    const s = rec.since(mark, state.s1);
    check(s.permissions.length === 1, `permission requests: ${s.permissions.length}`);
    const p = s.permissions[0];
    check(p.toolCall.toolCallId === "call_once", `permission for ${p.toolCall.toolCallId}`);
    check(s.tools.has("call_once") && s.tools.get("call_once").kind === "execute", `tool calls ${JSON.stringify([...s.tools])}`);
    check(s.tools.get("call_once").title.includes("rm -r build-once"), `title ${s.tools.get("call_once").title}`);
    // pending while asked, in_progress once allowed, then completed — never back to pending.
    const st = s.tools.get("call_once").statuses.join(",");
    check(st === "pending,in_progress,completed", `call_once statuses ${st}`);
    check(!exists("build-once"), "build-once still exists: the allowed command did not run");
    check(s.message.includes("Removed build-once."), `message ${JSON.stringify(s.message)}`);
    const toolSeq = seqOf(wire, (m) => m.method === "session/update" && m.params.update.sessionUpdate === "tool_call" && m.params.update.toolCallId === "call_once");
    const permSeq = seqOf(wire, (m) => m.method === "session/request_permission" && m.params.toolCall.toolCallId === "call_once");
    check(toolSeq > 0 && toolSeq < permSeq, `tool_call (seq ${toolSeq}) must precede its permission request (seq ${permSeq})`);
  });

  await runCase(ctx, "permission: allow for session, the next matching call is not asked", async () => {
    mkdirs("build-s1", "build-s2");
    const mark = rec.mark();
    rec.answer = (p) => {
      const o = p.options.find((o) => o.optionId === "allow_session");
      check(o && o.kind === "allow_always", `no allow_session option: ${JSON.stringify(p.options)}`);
      return o.optionId;
    };
    const r = await prompt(agent, state.s1, "allow-session: remove build-s1 and build-s2");
    check(r.stopReason === "end_turn", `stopReason ${r.stopReason}`);
    const s = rec.since(mark, state.s1);
    check(s.permissions.length === 1 && s.permissions[0].toolCall.toolCallId === "call_s1", `want one permission request (call_s1), got ${JSON.stringify(s.permissions.map((p) => p.toolCall.toolCallId))}`);
    check(s.last("call_s1") === "completed" && s.last("call_s2") === "completed", `statuses s1=${s.tools.get("call_s1")?.statuses} s2=${s.tools.get("call_s2")?.statuses}`);
    check(!exists("build-s1") && !exists("build-s2"), "a session-approved command did not run");
  });

  await runCase(ctx, "permission: deny fails the tool call and the command does not run", async () => {
    // A new session: the previous one approved this command pattern for itself.
    state.s2 = (await newSession(agent)).sessionId;
    mkdirs("keep");
    const mark = rec.mark();
    rec.answer = (p) => p.options.find((o) => o.kind === "reject_once").optionId;
    const r = await prompt(agent, state.s2, "deny: remove keep");
    check(r.stopReason === "end_turn", `stopReason ${r.stopReason}`);
    const s = rec.since(mark, state.s2);
    check(s.permissions.length === 1 && s.permissions[0].toolCall.toolCallId === "call_deny", `permissions ${JSON.stringify(s.permissions.map((p) => p.toolCall.toolCallId))}`);
    check(s.last("call_deny") === "failed", `call_deny statuses ${s.tools.get("call_deny")?.statuses}`);
    check(exists("keep"), "keep was removed although the call was denied");
    check(s.message.includes("Left keep alone."), `message ${JSON.stringify(s.message)}`);
  });

  await runCase(ctx, "cancel mid-tool: stopReason cancelled, every tool call closed", async () => {
    rec.expectNoPermission();
    const mark = rec.mark();
    const pending = prompt(agent, state.s2, "cancel: wait");
    await rec.waitFor((u) => u.sessionId === state.s2 && u.update.toolCallId === "call_sleep" && u.update.status === "in_progress", "call_sleep in progress");
    await agent.notify(acp.methods.agent.session.cancel, { sessionId: state.s2 });
    const r = await pending;
    check(r.stopReason === "cancelled", `stopReason ${r.stopReason}`);
    const s = rec.since(mark, state.s2);
    check(s.tools.size >= 1, "no tool call shown");
    for (const [id, t] of s.tools) check(TERMINAL.has(t.statuses[t.statuses.length - 1]), `tool call ${id} left ${t.statuses}`);
    check(s.last("call_sleep") === "failed", `a cancelled call must end failed: ${s.tools.get("call_sleep").statuses}`);
  });

  await runCase(ctx, "cancel while a permission is pending: answered cancelled, the call fails", async () => {
    // The client's side of a cancel (spec): send session/cancel, then answer every pending
    // permission request of the turn with the cancelled outcome.
    const mark = rec.mark();
    let asked;
    const seen = new Promise((resolve) => {
      rec.answer = (p) => new Promise((answer) => resolve({ p, answer }));
    });
    const pending = prompt(agent, state.s2, "cancel-permission: remove keep");
    asked = await timed(seen, "the permission request");
    check(asked.p.toolCall.toolCallId === "call_perm", `permission for ${asked.p.toolCall.toolCallId}`);
    await agent.notify(acp.methods.agent.session.cancel, { sessionId: state.s2 });
    asked.answer(null);
    const r = await pending;
    check(r.stopReason === "cancelled", `stopReason ${r.stopReason}`);
    const s = rec.since(mark, state.s2);
    check(s.last("call_perm") === "failed", `call_perm statuses ${s.tools.get("call_perm")?.statuses}`);
    check(exists("keep"), "keep was removed although the turn was cancelled before approval");
    rec.expectNoPermission();
  });

  await runCase(ctx, "prompt content: resource_link, embedded resource and image reach the model", async () => {
    // A 1x1 PNG.
    const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
    const mark = rec.mark();
    const r = await timed(
      agent.request(acp.methods.agent.session.prompt, {
        sessionId: state.s2,
        prompt: [
          { type: "text", text: "blocks: look at these" },
          { type: "resource_link", uri: `file://${WORK}/notes.md`, name: "notes.md" },
          { type: "resource", resource: { uri: `file://${WORK}/spec.txt`, text: "EMBEDDED-CONTEXT-MARKER", mimeType: "text/plain" } },
          { type: "image", data: png, mimeType: "image/png" },
        ],
      }),
      "prompt with content blocks",
    );
    check(r.stopReason === "end_turn" && rec.since(mark, state.s2).message === "Seen.", `content-block turn: ${r.stopReason}`);
  });

  await runCase(ctx, "second concurrent prompt: the default busy mode interrupts the running turn", async () => {
    // Documented default (busy_input_mode: interrupt): a prompt sent while a turn runs
    // interrupts it; the interrupted prompt answers cancelled with its tool calls closed, and
    // the new prompt's request renders the turn that replaces it.
    state.s3 = (await newSession(agent)).sessionId;
    const mark = rec.mark();
    const first = prompt(agent, state.s3, "busy: first", "first prompt");
    await rec.waitFor((u) => u.sessionId === state.s3 && u.update.toolCallId === "call_busy" && u.update.status === "in_progress", "call_busy in progress");
    const second = prompt(agent, state.s3, "busy: second", "second prompt");
    const [r1, r2] = await Promise.all([first, second]);
    check(r1.stopReason === "cancelled", `first prompt: ${r1.stopReason}`);
    check(r2.stopReason === "end_turn", `second prompt: ${r2.stopReason}`);
    const s = rec.since(mark, state.s3);
    check(s.last("call_busy") === "failed", `interrupted call statuses ${s.tools.get("call_busy")?.statuses}`);
    check(s.message.includes("Second prompt wins."), `message ${JSON.stringify(s.message)}`);
    // The second turn's text precedes the second prompt's response on the wire.
    const ex = wire.exchange("session/prompt", (p) => p.sessionId === state.s3 && p.prompt[0].text === "busy: second")[0];
    check(ex && ex.response, "the second prompt's exchange is not on the wire");
    const textSeq = seqOf(wire, (m, d) => d === "in" && m.method === "session/update" && m.params.sessionId === state.s3 && m.params.update.content?.text?.includes("wins"));
    check(textSeq > ex.request.seq && textSeq < ex.response.seq, `second turn text at seq ${textSeq}, request ${ex.request.seq}, response ${ex.response.seq}`);
  });

  await runCase(ctx, "/model typed as a prompt, then the model config option", async () => {
    let mark = rec.mark();
    let r = await prompt(agent, state.s1, "/model openai:other");
    check(r.stopReason === "end_turn", `stopReason ${r.stopReason}`);
    let s = rec.since(mark, state.s1);
    check(s.message.includes("openai:other"), `/model reply ${JSON.stringify(s.message)}`);
    check(s.config.length === 1 && modelOption(s.config[0])?.currentValue === "openai:other", `config_option_update ${JSON.stringify(s.config)}`);
    mark = rec.mark();
    r = await prompt(agent, state.s1, "model: which model?");
    check(r.stopReason === "end_turn" && rec.since(mark, state.s1).message === "Answered by other.", "turn on openai:other");
    const set = await timed(agent.request(acp.methods.agent.session.setConfigOption, { sessionId: state.s1, configId: "model", value: "openai:fake" }), "session/set_config_option");
    check(modelOption(set.configOptions)?.currentValue === "openai:fake", `set_config_option result ${JSON.stringify(set)}`);
    mark = rec.mark();
    r = await prompt(agent, state.s1, "model: and now?");
    check(r.stopReason === "end_turn" && rec.since(mark, state.s1).message === "Answered by fake.", "turn on openai:fake");
    let err;
    await timed(agent.request(acp.methods.agent.session.setConfigOption, { sessionId: state.s1, configId: "model", value: "nosuchprovider:x" }), "session/set_config_option (unknown model)").catch((e) => (err = e));
    check(err && err.code === -32602, `an unknown model must be invalid params, got ${err ? err.code + " " + err.message : "success"}`);
  });

  await runCase(ctx, "approval modes: offered as modes and a config option, set_mode keeps both in sync", async () => {
    let mark = rec.mark();
    await timed(agent.request(acp.methods.agent.session.setMode, { sessionId: state.s1, modeId: "read_only" }), "session/set_mode");
    let s = rec.since(mark, state.s1);
    check(s.modes.join(",") === "read_only", `current_mode_update ${JSON.stringify(s.modes)}`);
    const modeOpt = (opts) => (opts || []).find((o) => o.id === "mode");
    check(s.config.length === 1 && modeOpt(s.config[0])?.currentValue === "read_only", `config_option_update ${JSON.stringify(s.config)}`);
    mark = rec.mark();
    const set = await timed(agent.request(acp.methods.agent.session.setConfigOption, { sessionId: state.s1, configId: "mode", value: "default" }), "session/set_config_option (mode)");
    check(modeOpt(set.configOptions)?.currentValue === "default", `set_config_option result ${JSON.stringify(set)}`);
    s = rec.since(mark, state.s1);
    check(s.modes.join(",") === "default", `current_mode_update after the config option ${JSON.stringify(s.modes)}`);
    let err;
    await timed(agent.request(acp.methods.agent.session.setMode, { sessionId: state.s1, modeId: "yolo" }), "session/set_mode (unknown)").catch((e) => (err = e));
    check(err && err.code === -32602, `an unknown mode must be invalid params, got ${err ? err.code + " " + err.message : "success"}`);
  });

  await runCase(ctx, "fork: a new session carrying the history", async () => {
    const r = await timed(agent.request(acp.methods.agent.session.fork, { sessionId: state.s1, cwd: WORK, mcpServers: [] }), "session/fork");
    check(typeof r.sessionId === "string" && r.sessionId !== state.s1, `fork result ${JSON.stringify(r)}`);
    state.fork = r.sessionId;
    const mark = rec.mark();
    const p = await prompt(agent, state.fork, "fork: continue");
    check(p.stopReason === "end_turn" && rec.since(mark, state.fork).message === "Forked reply.", "turn on the fork");
  });

  await runCase(ctx, "list: every conversation of this directory", async () => {
    const r = await timed(agent.request(acp.methods.agent.session.list, { cwd: WORK }), "session/list");
    const ids = r.sessions.map((s) => s.sessionId);
    for (const k of ["s1", "s2", "s3", "fork"]) check(ids.includes(state[k]), `session/list lacks ${k} (${state[k]}): ${JSON.stringify(ids)}`);
    for (const s of r.sessions) {
      check(s.cwd === WORK, `listed session ${s.sessionId} has cwd ${s.cwd}`);
      check(!s.updatedAt || !Number.isNaN(Date.parse(s.updatedAt)), `updatedAt ${s.updatedAt}`);
    }
  });

  await runCase(ctx, "close: a closed session refuses prompts with a JSON-RPC error", async () => {
    await timed(agent.request(acp.methods.agent.session.close, { sessionId: state.s3 }), "session/close");
    let err;
    await prompt(agent, state.s3, "after close").catch((e) => (err = e));
    check(err && Number.isInteger(err.code), `prompt on a closed session: ${err ? err.message : "succeeded"}`);
    err = undefined;
    await prompt(agent, "no-such-session", "hello").catch((e) => (err = e));
    check(err && err.code === -32602, `prompt on an unknown session: ${err ? err.code + " " + err.message : "succeeded"}`);
  });

  await runCase(ctx, "unknown methods: -32601 for a request, an extension notification ignored", async () => {
    let err;
    ctx.wire.allowClientMethod("session/frobnicate");
    await timed(agent.request("session/frobnicate", { sessionId: state.s1 }), "session/frobnicate").catch((e) => (err = e));
    check(err && err.code === -32601, `unknown method: ${err ? err.code + " " + err.message : "succeeded"}`);
    await agent.notify("_hermes-interop/ping", { n: 1 });
    const r = await timed(agent.request(acp.methods.agent.session.list, { cwd: WORK }), "session/list after an extension notification");
    check(Array.isArray(r.sessions), "the agent stopped answering after an extension notification");
  });
}

async function processTwo(ctx) {
  const { agent, wire, rec } = ctx;

  await runCase(ctx, "restart: initialize a new process on the same home (version negotiation)", async () => {
    const r = await timed(
      agent.request(acp.methods.agent.initialize, {
        // A client newer than the agent: the agent answers with the version it speaks.
        protocolVersion: 99,
        clientCapabilities: {},
        clientInfo: { name: "hermes-interop", version: "1.0.0" },
      }),
      "initialize",
    );
    check(r.protocolVersion === 1 && r.agentCapabilities?.loadSession === true, `initialize ${JSON.stringify(r)}`);
    // Terminal auth methods only for a client that set clientCapabilities.auth.terminal (schema).
    const term = (r.authMethods || []).some((m) => m.type === "terminal");
    check(!term, `terminal auth method offered to a client without auth.terminal: ${JSON.stringify(r.authMethods)}`);
  });

  await runCase(ctx, "load: history replayed as updates before the load response", async () => {
    const mark = rec.mark();
    const r = await timed(agent.request(acp.methods.agent.session.load, { sessionId: state.s1, cwd: WORK, mcpServers: [] }), "session/load");
    check(modelOption(r?.configOptions)?.currentValue === "openai:fake", `load result ${JSON.stringify(r)}`);
    const s = rec.since(mark, state.s1);
    for (const u of ["stream: say hello", "allow-once: remove build-once", "allow-session: remove build-s1 and build-s2", "model: and now?"]) {
      check(s.user.includes(u), `replay lacks the user message ${JSON.stringify(u)}: ${JSON.stringify(s.user)}`);
    }
    for (const m of ["Hello from Hermes.", "Removed build-once.", "Removed both.", "Answered by fake."]) check(s.message.includes(m), `replay lacks ${JSON.stringify(m)}`);
    for (const id of ["call_once", "call_s1", "call_s2"]) check(s.last(id) === "completed", `replayed ${id}: ${s.tools.get(id)?.statuses}`);
    // Wire order: replay strictly between the load request and its response.
    const ex = lastExchange(wire, "session/load", state.s1);
    check(ex && ex.response, "no load response on the wire");
    const ups = wire.log.filter((e) => e.msg.method === "session/update" && e.msg.params.sessionId === state.s1);
    check(ups.length > 0 && ups.every((e) => e.seq > ex.request.seq && e.seq < ex.response.seq), `replayed updates at ${ups.map((e) => e.seq)}, load request ${ex.request.seq}, response ${ex.response.seq}`);
  });

  await runCase(ctx, "resume after restart: no replay, and the conversation continues", async () => {
    const mark = rec.mark();
    const r = await timed(agent.request(acp.methods.agent.session.resume, { sessionId: state.s2, cwd: WORK, mcpServers: [] }), "session/resume");
    check(r && typeof r === "object", `resume result ${JSON.stringify(r)}`);
    // No replay: only the session's commands and context meter, never a turn update.
    const told = rec.since(mark, state.s2).updates.map((u) => u.sessionUpdate);
    check(told.every((k) => !TURN_UPDATES.has(k)), `session/resume replayed history: ${told}`);
    check(told.includes("available_commands_update"), `session/resume did not advertise the commands: ${told}`);
    const p = await prompt(agent, state.s2, "resume: still there?");
    const s = rec.since(mark, state.s2);
    check(p.stopReason === "end_turn" && s.message === "Resumed.", `resumed turn: ${p.stopReason} ${JSON.stringify(s.message)}`);
  });

  await runCase(ctx, "list after restart: the sessions are durable", async () => {
    const r = await timed(agent.request(acp.methods.agent.session.list, {}), "session/list");
    const ids = r.sessions.map((s) => s.sessionId);
    for (const k of ["s1", "s2", "s3", "fork"]) check(ids.includes(state[k]), `session/list lacks ${k}: ${JSON.stringify(ids)}`);
  });
}

async function main() {
  const broken = selfTest();
  if (broken.length) {
    console.log(`not ok - wire checker self-test\n    ${broken.join("\n    ")}`);
    return 1;
  }
  console.log("ok - wire checker self-test (rejects non-JSON, bad content, unknown variants, bad stop reasons)");
  const wires = [];
  try {
    wires.push((await withAgent("agent#1", processOne)).wire);
    wires.push((await withAgent("agent#2", processTwo)).wire);
  } catch (e) {
    if (!e.reported) console.log(`not ok - ${e.message}`);
    if (e.wire) {
      console.log("    last messages on the wire:");
      for (const { seq, dir, msg } of e.wire.log.slice(-25)) console.log(`    ${String(seq).padStart(4)} ${dir === "in" ? "<-" : "->"} ${JSON.stringify(msg).slice(0, 400)}`);
    }
    if (e.stderrTail) console.log(`    agent stderr (tail):\n${e.stderrTail}`);
    return 1;
  }
  if (process.env.ACP_TRACE) {
    for (const w of wires) for (const { seq, dir, msg } of w.log) console.log(`# ${w.label} ${String(seq).padStart(4)} ${dir === "in" ? "<-" : "->"} ${JSON.stringify(msg)}`);
  }
  const n = wires.reduce((a, w) => a + w.log.length, 0);
  const fromAgent = wires.reduce((a, w) => a + w.fromAgent().length, 0);
  console.log(`# ${results.length} cases passed; ${n} messages schema-checked (${fromAgent} from the agent), 0 wire problems`);
  return 0;
}

process.exitCode = await main();
