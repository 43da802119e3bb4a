// Wire checker for an ACP agent on stdio: it sits between the agent's pipes and the official
// client SDK, sees every line in both directions before the SDK does, and validates each one
// against the JSON Schema the SDK package ships (schema/v1/schema.json, with
// schema.unstable.json for methods only the unstable surface has, such as session/fork).
//
// The SDK alone is not a conformance oracle: it answers a non-JSON line with an error the
// test never sees, drops (and only logs) a session/update that fails its zod parse, and
// passes responses through unvalidated. Here every problem is recorded with the offending
// line, and the suite fails on any.

import { createRequire } from "node:module";
import { Transform, Readable, Writable } from "node:stream";

const require = createRequire(import.meta.url);
// Ajv comes with the MCP SDK's dependency tree; the ACP schema is JSON Schema 2020-12.
const Ajv2020 = require("ajv/dist/2020.js");
const stableSchema = require("@agentclientprotocol/sdk/schema/v1/schema.json");
const unstableSchema = require("@agentclientprotocol/sdk/schema/v1/schema.unstable.json");

const STABLE_ID = "acp:v1/schema.json";
const UNSTABLE_ID = "acp:v1/schema.unstable.json";

/**
 * Validators for one direction of ACP traffic, keyed by who handles the method
 * ("agent" handles client→agent requests, "client" handles agent→client ones) and method.
 */
class Schemas {
  constructor() {
    const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
    ajv.addSchema({ ...stableSchema, $id: STABLE_ID });
    ajv.addSchema({ ...unstableSchema, $id: UNSTABLE_ID });
    this.ajv = ajv;
    // "<side> <method> <Request|Response|Notification>" → validator; stable wins.
    this.byMethod = new Map();
    for (const [id, schema] of [[UNSTABLE_ID, unstableSchema], [STABLE_ID, stableSchema]]) {
      for (const [name, def] of Object.entries(schema.$defs)) {
        const method = def["x-method"];
        if (!method) continue;
        const kind = ["Request", "Response", "Notification"].find((k) => name.endsWith(k));
        if (!kind) continue;
        const side = def["x-side"];
        this.byMethod.set(`${side} ${method} ${kind}`, { name, schemaId: id });
      }
    }
    this.error = ajv.getSchema(`${STABLE_ID}#/$defs/Error`);
    this.cache = new Map();
  }

  /** Returns the validator for a method's params or result, or undefined if unknown. */
  lookup(side, method, kind) {
    const key = `${side} ${method} ${kind}`;
    if (this.cache.has(key)) return this.cache.get(key);
    const ref = this.byMethod.get(key);
    const v = ref && this.ajv.getSchema(`${ref.schemaId}#/$defs/${ref.name}`);
    const out = v && { validate: v, def: ref.name, unstable: ref.schemaId === UNSTABLE_ID };
    this.cache.set(key, out);
    return out;
  }
}

const schemas = new Schemas();

function ajvErrors(v) {
  return (v.errors || [])
    .slice(0, 6)
    .map((e) => `${e.instancePath || "/"} ${e.message}${e.params && e.params.allowedValues ? " " + JSON.stringify(e.params.allowedValues) : ""}`)
    .join("; ");
}

function validId(id) {
  return typeof id === "string" || (typeof id === "number" && Number.isInteger(id)) || id === null;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Wire taps both pipes of one agent process. Every message is recorded in `log` in the order
 * the client saw it ({seq, dir: "in"|"out", msg}); every violation in `problems`.
 */
export class Wire {
  constructor(label, { quiet = false } = {}) {
    this.label = label;
    this.quiet = quiet;
    this.log = [];
    this.problems = [];
    this.seq = 0;
    this.pendingFromClient = new Map(); // request id → method (client → agent)
    this.pendingFromAgent = new Map(); // request id → method (agent → client)
    this.deliberate = new Set(); // methods the suite sends on purpose although ACP lacks them
  }

  /** Lets the client send method, which ACP does not define, to probe the agent's error path. */
  allowClientMethod(method) {
    this.deliberate.add(method);
  }

  problem(kind, detail, line) {
    const p = { kind, detail, line: line === undefined ? undefined : String(line).slice(0, 2000) };
    this.problems.push(p);
    if (!this.quiet) console.error(`[${this.label}] WIRE PROBLEM ${kind}: ${detail}${p.line !== undefined ? "\n    line: " + p.line : ""}`);
  }

  /** A Transform placed between the agent's stdout and the SDK: lines pass unchanged. */
  incoming() {
    return this.#tap("in");
  }

  /** A Transform placed between the SDK and the agent's stdin. */
  outgoing() {
    return this.#tap("out");
  }

  /** Web streams for acp.ndJsonStream over a child process's stdio, with both taps in place. */
  streams(child) {
    const inTap = this.incoming();
    child.stdout.pipe(inTap);
    const outTap = this.outgoing();
    outTap.pipe(child.stdin);
    // A write after the agent exited must not crash the harness; the exit is checked anyway.
    child.stdin.on("error", () => {});
    return { readable: Readable.toWeb(inTap), writable: Writable.toWeb(outTap) };
  }

  #tap(dir) {
    let buf = Buffer.alloc(0);
    const wire = this;
    return new Transform({
      transform(chunk, _enc, done) {
        buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
        let nl;
        while ((nl = buf.indexOf(0x0a)) >= 0) {
          wire.#line(dir, buf.subarray(0, nl));
          buf = buf.subarray(nl + 1);
        }
        done(null, chunk);
      },
      flush(done) {
        if (buf.length) wire.problem("unterminated-line", `${dir === "in" ? "agent" : "client"} stream ended inside a line`, buf.toString("utf8"));
        done();
      },
    });
  }

  #line(dir, bytes) {
    const from = dir === "in" ? "agent" : "client";
    let text;
    try {
      text = utf8.decode(bytes);
    } catch {
      this.problem("not-utf8", `${from} wrote a line that is not UTF-8`, bytes.toString("latin1"));
      return;
    }
    if (text.endsWith("\r")) this.problem("crlf", `${from} line ends in CR`, text);
    if (text.trim() === "") {
      this.problem("empty-line", `${from} wrote an empty line`, JSON.stringify(text));
      return;
    }
    let msg;
    try {
      msg = JSON.parse(text);
    } catch (e) {
      this.problem("not-json", `${from} line does not parse: ${e.message}`, text);
      return;
    }
    const seq = ++this.seq;
    this.log.push({ seq, dir, msg });
    this.#check(dir, msg, text);
  }

  #check(dir, msg, text) {
    const from = dir === "in" ? "agent" : "client";
    // The side that handles a request this peer sends.
    const handler = dir === "in" ? "client" : "agent";
    const pendingMine = dir === "in" ? this.pendingFromAgent : this.pendingFromClient;
    const pendingTheirs = dir === "in" ? this.pendingFromClient : this.pendingFromAgent;
    if (msg === null || typeof msg !== "object" || Array.isArray(msg)) {
      this.problem("not-object", `${from} message is not a JSON object`, text);
      return;
    }
    if (msg.jsonrpc !== "2.0") this.problem("jsonrpc-version", `${from} message lacks "jsonrpc":"2.0"`, text);
    if ("method" in msg) {
      if (typeof msg.method !== "string") {
        this.problem("bad-method", `${from} method is not a string`, text);
        return;
      }
      if ("result" in msg || "error" in msg) this.problem("mixed-envelope", `${from} request carries result/error`, text);
      const isRequest = "id" in msg;
      if (isRequest && !validId(msg.id)) this.problem("bad-id", `${from} request id is not an integer, string or null`, text);
      const kind = isRequest ? "Request" : "Notification";
      let v = schemas.lookup(handler, msg.method, kind);
      if (!v && !isRequest) v = schemas.lookup("protocol", msg.method, kind);
      if (!v) {
        if (!msg.method.startsWith("_") && !(dir === "out" && this.deliberate.has(msg.method))) this.problem("unknown-method", `${from} sent ${kind.toLowerCase()} ${msg.method}, which ${handler}s do not handle in ACP v1`, text);
      } else if (!v.validate(msg.params)) {
        this.problem("invalid-params", `${from} ${msg.method} params fail ${v.def}: ${ajvErrors(v.validate)}`, text);
      }
      if (isRequest) {
        if (pendingMine.has(msg.id)) this.problem("duplicate-id", `${from} reused request id ${JSON.stringify(msg.id)} while it was pending`, text);
        pendingMine.set(msg.id, msg.method);
      }
      return;
    }
    if (!("id" in msg)) {
      this.problem("bad-envelope", `${from} message is neither request, notification nor response`, text);
      return;
    }
    const hasResult = "result" in msg;
    const hasError = "error" in msg;
    if (hasResult === hasError) {
      this.problem("bad-response", `${from} response must carry exactly one of result and error`, text);
      return;
    }
    if (!pendingTheirs.has(msg.id)) {
      // -32700/-32600 answers may carry id null for a request that could not be read.
      if (!(hasError && msg.id === null)) this.problem("unsolicited-response", `${from} answered id ${JSON.stringify(msg.id)}, which is not pending`, text);
      if (hasError && !schemas.error(msg.error)) this.problem("invalid-error", `${from} error object: ${ajvErrors(schemas.error)}`, text);
      return;
    }
    const method = pendingTheirs.get(msg.id);
    pendingTheirs.delete(msg.id);
    if (hasError) {
      if (!schemas.error(msg.error)) this.problem("invalid-error", `${from} error for ${method}: ${ajvErrors(schemas.error)}`, text);
      return;
    }
    const v = schemas.lookup(from, method, "Response");
    if (!v) {
      if (!method.startsWith("_")) this.problem("unknown-method", `${from} answered ${method}, which has no result schema`, text);
    } else if (!v.validate(msg.result)) {
      this.problem("invalid-result", `${from} ${method} result fails ${v.def}: ${ajvErrors(v.validate)}`, text);
    }
  }

  /** Messages the agent sent, in order. */
  fromAgent() {
    return this.log.filter((e) => e.dir === "in");
  }

  /** The seq of the client request sent with method and matching params, and of its answer. */
  exchange(method, match = () => true) {
    const out = [];
    for (const e of this.log) {
      if (e.dir === "out" && e.msg.method === method && "id" in e.msg && match(e.msg.params || {})) {
        const resp = this.log.find((r) => r.dir === "in" && r.seq > e.seq && !("method" in r.msg) && r.msg.id === e.msg.id);
        out.push({ request: e, response: resp });
      }
    }
    return out;
  }
}

/** Checks that a validator rejects what it must; the suite runs it so a broken oracle fails. */
export function selfTest() {
  const w = new Wire("selftest", { quiet: true });
  const feed = (dir, obj) => {
    const tap = dir === "in" ? w.incoming() : w.outgoing();
    tap.end(Buffer.from((typeof obj === "string" ? obj : JSON.stringify(obj)) + "\n"));
  };
  const bad = [
    "Loading config...",
    { jsonrpc: "2.0", method: "session/update", params: { sessionId: "s", update: { sessionUpdate: "agent_message_chunk", content: { text: "no type" } } } },
    { jsonrpc: "2.0", method: "session/update", params: { sessionId: "s", update: { sessionUpdate: "mystery" } } },
    { jsonrpc: "2.0", method: "session/update", params: { sessionId: "s", update: { sessionUpdate: "tool_call_update", toolCallId: "t", status: "cancelled" } } },
    { jsonrpc: "1.0", method: "session/update", params: { sessionId: "s", update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "x" } } } },
    { jsonrpc: "2.0", method: "fs/read_text_file", id: 1, params: { sessionId: "s" } },
  ];
  const good = [
    { jsonrpc: "2.0", method: "session/update", params: { sessionId: "s", update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "x" } } } },
    { jsonrpc: "2.0", method: "session/update", params: { sessionId: "s", update: { sessionUpdate: "tool_call", toolCallId: "t", title: "ls", kind: "execute", status: "in_progress" } } },
  ];
  const failures = [];
  for (const m of good) {
    const n = w.problems.length;
    feed("in", m);
    if (w.problems.length !== n) failures.push(`accepted message was rejected: ${JSON.stringify(m)}`);
  }
  for (const m of bad) {
    const n = w.problems.length;
    feed("in", m);
    if (w.problems.length === n) failures.push(`invalid message was accepted: ${JSON.stringify(m)}`);
  }
  // A response whose stopReason is outside the closed enum.
  feed("out", { jsonrpc: "2.0", id: 7, method: "session/prompt", params: { sessionId: "s", prompt: [{ type: "text", text: "hi" }] } });
  let n = w.problems.length;
  feed("in", { jsonrpc: "2.0", id: 7, result: { stopReason: "done" } });
  if (w.problems.length === n) failures.push("stopReason \"done\" was accepted");
  n = w.problems.length;
  feed("in", { jsonrpc: "2.0", id: 99, result: {} });
  if (w.problems.length === n) failures.push("an unsolicited response was accepted");
  return failures;
}
