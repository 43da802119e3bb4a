// MCP interop: the official TypeScript client (@modelcontextprotocol/sdk) drives the real
// `hermes mcp serve`, over stdio or streamable HTTP.
//
//   node mcp_client.mjs stdio     starts `$HERMES_BIN mcp serve` with this environment
//   node mcp_client.mjs http URL  connects to a running `hermes mcp serve --http`
//
// Environment: HERMES_BIN (stdio), MCP_WORK (absolute working directory for the session),
// MCP_EXPECT_ANSWER (the text the fake model answers the prompt with), plus whatever hermes
// needs (HERMES_HOME, HERMES_MODEL, OPENAI_BASE_URL, ...). The driving test enqueues exactly
// one model answer. Each step prints "ok - name" or "not ok - name" with diagnostics; the exit
// code is 0 only when every step passed.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, url] = process.argv.slice(2);
const WORK = process.env.MCP_WORK;
const ANSWER = process.env.MCP_EXPECT_ANSWER;
if (!WORK || !ANSWER || !(mode === "stdio" ? process.env.HERMES_BIN : mode === "http" && url)) {
  console.error("usage: HERMES_BIN=... MCP_WORK=... MCP_EXPECT_ANSWER=... node mcp_client.mjs stdio | http URL");
  process.exit(2);
}
// Bounds a hang so it fails with diagnostics (the server may be a race-instrumented test
// binary on a loaded machine); not a latency assertion.
const TIMEOUT_MS = 120_000;

class CheckError extends Error {}
function check(cond, msg) {
  if (!cond) throw new CheckError(msg);
}

let failed = false;
async function step(name, fn) {
  try {
    const v = await fn();
    console.log(`ok - ${name}`);
    return v;
  } catch (err) {
    failed = true;
    console.log(`not ok - ${name}`);
    console.log(`  ${err instanceof CheckError ? err.message : err.stack || err}`);
    throw err;
  }
}

function textOf(result) {
  return (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
}

async function callTool(client, name, args) {
  return client.callTool({ name, arguments: args }, undefined, { timeout: TIMEOUT_MS });
}

const transport =
  mode === "stdio"
    ? new StdioClientTransport({
        command: process.env.HERMES_BIN,
        args: ["mcp", "serve"],
        env: { ...process.env }, // the SDK passes only a safe subset unless told otherwise
        cwd: WORK,
        stderr: "inherit",
      })
    : new StreamableHTTPClientTransport(new URL(url));
const client = new Client({ name: "hermes-interop", version: "1.0.0" });

try {
  await step(`${mode}: connect (initialize)`, async () => {
    await client.connect(transport, { timeout: TIMEOUT_MS });
    const info = client.getServerVersion();
    check(info?.name === "hermes", `server info ${JSON.stringify(info)}`);
    check(client.getServerCapabilities()?.tools, `no tools capability: ${JSON.stringify(client.getServerCapabilities())}`);
  });

  await step(`${mode}: tools/list`, async () => {
    const { tools } = await client.listTools(undefined, { timeout: TIMEOUT_MS });
    const names = tools.map((t) => t.name).sort();
    check(names.join(",") === "create_session,get_history,list_sessions,prompt", `tools ${names}`);
    const prompt = tools.find((t) => t.name === "prompt");
    check(prompt.inputSchema.type === "object" && prompt.inputSchema.required?.includes("session_id"), `prompt schema ${JSON.stringify(prompt.inputSchema)}`);
  });

  const id = await step(`${mode}: create_session`, async () => {
    const r = await callTool(client, "create_session", { cwd: WORK, title: `from the ${mode} client` });
    check(!r.isError, `error: ${textOf(r)}`);
    const sid = r.structuredContent?.session_id;
    check(typeof sid === "string" && sid !== "", `structured ${JSON.stringify(r.structuredContent)}`);
    check(r.structuredContent.cwd === WORK, `cwd ${r.structuredContent.cwd}`);
    check(JSON.parse(textOf(r)).session_id === sid, `text ${textOf(r)}`);
    return sid;
  });

  await step(`${mode}: prompt`, async () => {
    const r = await callTool(client, "prompt", { session_id: id, text: `hello over ${mode}` });
    check(!r.isError, `error: ${textOf(r)}`);
    check(textOf(r) === ANSWER, `answer ${JSON.stringify(textOf(r))}, want ${JSON.stringify(ANSWER)}`);
    check(r.structuredContent?.status === "completed" && r.structuredContent.session_id === id, `structured ${JSON.stringify(r.structuredContent)}`);
  });

  await step(`${mode}: list_sessions`, async () => {
    const r = await callTool(client, "list_sessions", { limit: 10 });
    check(!r.isError, `error: ${textOf(r)}`);
    const mine = r.structuredContent?.sessions?.find((s) => s.session_id === id);
    check(mine && mine.source === "mcp" && mine.title === `from the ${mode} client`, `sessions ${JSON.stringify(r.structuredContent)}`);
  });

  await step(`${mode}: get_history`, async () => {
    const r = await callTool(client, "get_history", { session_id: id });
    check(!r.isError, `error: ${textOf(r)}`);
    const rows = r.structuredContent?.rows ?? [];
    check(rows.length === 2, `rows ${JSON.stringify(rows)}`);
    check(rows[0].role === "user" && rows[0].content === `hello over ${mode}`, `first row ${JSON.stringify(rows[0])}`);
    check(rows[1].role === "assistant" && rows[1].content === ANSWER, `last row ${JSON.stringify(rows[1])}`);
  });

  await step(`${mode}: errors are tool results`, async () => {
    const r = await callTool(client, "get_history", { session_id: "no-such-session" });
    check(r.isError === true && textOf(r).includes("no-such-session"), `result ${JSON.stringify(r)}`);
  });
} catch {
  // reported by step
} finally {
  await client.close().catch((err) => {
    failed = true;
    console.log(`not ok - ${mode}: close: ${err}`);
  });
}
process.exit(failed ? 1 : 0);
