// An MCP server (built on the official SDK) for crash and restart tests.
//
//   pid    answers with its process id
//   crash  exits in the middle of the call, without answering
//   block  tells the test it is inside the call (connects to 127.0.0.1:$MCP_CRASH_SIGNAL_PORT)
//          and then never answers, so the test can kill the process mid-call
//
// On start it appends its pid to $MCP_CRASH_STARTS (one line per start), and refuses to start
// (exit 1 with a message on stderr) while the file $MCP_CRASH_BROKEN exists.
import { appendFileSync, existsSync } from "node:fs";
import { connect } from "node:net";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";

if (process.env.MCP_CRASH_BROKEN && existsSync(process.env.MCP_CRASH_BROKEN)) {
  console.error("mcp_crash: refusing to start: broken marker present");
  process.exit(1);
}
if (process.env.MCP_CRASH_STARTS) {
  appendFileSync(process.env.MCP_CRASH_STARTS, `${process.pid}\n`);
}

const server = new McpServer({ name: "crash", version: "1.0.0" });
server.registerTool("pid", { description: "The server's process id." }, async () => ({
  content: [{ type: "text", text: String(process.pid) }],
}));
server.registerTool("crash", { description: "Exit during the call." }, async () => {
  console.error("mcp_crash: exiting mid-call");
  process.exit(7);
});
server.registerTool("block", { description: "Never answer." }, async () => {
  await new Promise((resolve, reject) => {
    const sock = connect(Number(process.env.MCP_CRASH_SIGNAL_PORT), "127.0.0.1");
    sock.on("connect", () => sock.end(`${process.pid}\n`));
    sock.on("error", reject);
  });
  await new Promise(() => {});
});
await server.connect(new StdioServerTransport());
