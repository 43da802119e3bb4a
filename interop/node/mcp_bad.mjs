// A deliberately misbehaving MCP server on stdio, written without the SDK so it can send what
// the SDK would refuse: malformed tool input schemas, a huge result, bytes that are not UTF-8,
// a line that is not JSON, and a JSON-RPC error. The Go tests use it to check the client
// skips what it cannot use and keeps everything else working.
import { createInterface } from "node:readline";

const goodSchema = { type: "object", properties: { text: { type: "string" } }, required: ["text"] };

const tools = [
  { name: "ok", description: "Echo the text.", inputSchema: goodSchema },
  { name: "string_schema", description: "Schema of type string.", inputSchema: { type: "string" } },
  { name: "array_properties", description: "Properties is an array.", inputSchema: { type: "object", properties: ["a", "b"] } },
  { name: "numeric_type", description: "Type is a number.", inputSchema: { type: 7 } },
  { name: "no_schema", description: "No input schema at all." },
  { name: "huge", description: "A result of several megabytes.", inputSchema: { type: "object", properties: {} } },
  { name: "binary", description: "A result whose text is not UTF-8.", inputSchema: { type: "object", properties: {} } },
  { name: "garbage", description: "A non-JSON line before the answer.", inputSchema: { type: "object", properties: {} } },
  { name: "rpc_error", description: "Answers with a JSON-RPC error.", inputSchema: { type: "object", properties: {} } },
];

function send(msg) {
  process.stdout.write(JSON.stringify(msg) + "\n");
}

function result(id, value) {
  send({ jsonrpc: "2.0", id, result: value });
}

function text(id, s) {
  result(id, { content: [{ type: "text", text: s }] });
}

const rl = createInterface({ input: process.stdin });
rl.on("line", (line) => {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return;
  }
  if (msg.id === undefined) return; // a notification
  switch (msg.method) {
    case "initialize":
      return result(msg.id, {
        protocolVersion: msg.params?.protocolVersion ?? "2025-06-18",
        capabilities: { tools: {} },
        serverInfo: { name: "bad", version: "1.0.0" },
      });
    case "ping":
      return result(msg.id, {});
    case "tools/list":
      return result(msg.id, { tools });
    case "tools/call":
      break;
    default:
      return send({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: `method not found: ${msg.method}` } });
  }
  const args = msg.params?.arguments ?? {};
  switch (msg.params?.name) {
    case "ok":
      return text(msg.id, `ok: ${args.text}`);
    case "huge":
      return text(msg.id, "x".repeat(4 << 20));
    case "binary": {
      // Hand-built frame: the string holds raw bytes 0xff 0xfe, invalid in UTF-8.
      const head = Buffer.from(`{"jsonrpc":"2.0","id":${JSON.stringify(msg.id)},"result":{"content":[{"type":"text","text":"before `);
      const tail = Buffer.from(` after"}]}}\n`);
      process.stdout.write(Buffer.concat([head, Buffer.from([0xff, 0xfe, 0xc3]), tail]));
      return;
    }
    case "garbage":
      process.stdout.write(Buffer.from([0x80, 0x81, 0x0a]));
      process.stdout.write("this is not json\n");
      return text(msg.id, "after garbage");
    case "rpc_error":
      return send({ jsonrpc: "2.0", id: msg.id, error: { code: -32603, message: "exploded" } });
    default:
      return send({ jsonrpc: "2.0", id: msg.id, error: { code: -32602, message: `unknown tool ${msg.params?.name}` } });
  }
});
rl.on("close", () => process.exit(0));
