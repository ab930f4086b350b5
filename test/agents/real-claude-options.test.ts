// The real Claude Code CLI against the scripted Anthropic server: coders.claude.options reach the
// model's requests (the server records each one). Nothing leaves the machine.
import { type ScriptServer, startAnthropicScriptServer } from "@fleet/model-servers";
import { afterEach, describe, expect, it } from "vitest";
import { claudeAdapter } from "../../src/agents/claude.ts";
import { runAgent } from "../../src/worker/sandbox/run-agent.ts";
import { scratchDirsRemovedAfterAll } from "../support/scratch-dirs.ts";

const scratchDir = scratchDirsRemovedAfterAll();

const CLAUDE = new URL("../../node_modules/.bin/claude", import.meta.url).pathname;

let server: ScriptServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

describe("real claude CLI: coders.claude.options", () => {
  it("max_turns stops the run at that many model turns; append_system_prompt and allowed_tools reach the request", async () => {
    const glob = { name: "Glob", input: { pattern: "*.md" } };
    server = await startAnthropicScriptServer({
      turns: [1, 2, 3, 4].map((i) => ({
        text: `turn ${i}`,
        toolUses: [glob],
        usage: { input_tokens: 10, output_tokens: 2 },
      })),
    });
    const r = await runAgent(
      claudeAdapter,
      {
        prompt: "List the markdown files",
        model: "claude-sonnet-4-5",
        phase: "work",
        cwd: scratchDir("fleet-claude-cwd-"),
        home: scratchDir("fleet-claude-home-"),
        modelBaseUrl: server.url,
        credential: { name: "ANTHROPIC_API_KEY", value: "sk-ant-dummy" },
        network: "proxy",
        options: {
          max_turns: 2,
          append_system_prompt: "Always answer in the voice of FLEET-OPTIONS-MARKER.",
          allowed_tools: ["Read", "Glob", "Grep"],
        },
      },
      { timeoutMs: 45_000, stallMs: 30_000, binaryPath: CLAUDE },
    );
    const main = server.requests.filter((q) => q.kind === "main");
    // Two model turns, then the CLI stops: the script's third and fourth turns are never asked for.
    expect(main).toHaveLength(2);
    expect(server.played).toBe(2);
    expect(r.totals?.turns).toBeGreaterThanOrEqual(2);
    expect(r.summary ?? "").not.toContain("turn 4");
    expect(JSON.stringify(main[0]!.body.system)).toContain("FLEET-OPTIONS-MARKER");
    const tools = main[0]!.body.tools.map((t: { name: string }) => t.name);
    expect(tools).toEqual(expect.arrayContaining(["Read", "Glob", "Grep"]));
    expect(tools).not.toContain("Write");
    expect(tools).not.toContain("Bash");
    expect(tools).not.toContain("WebSearch");
  });

  it("a local MCP server of options.mcp_servers is started and its tool offered to the model", async () => {
    server = await startAnthropicScriptServer({
      turns: [{ text: "ok", usage: { input_tokens: 10, output_tokens: 2 } }],
    });
    const echo = new URL("../fixtures/mcp/echo-server.mjs", import.meta.url).pathname;
    const r = await runAgent(
      claudeAdapter,
      {
        prompt: "Say ok",
        model: "claude-sonnet-4-5",
        phase: "work",
        cwd: scratchDir("fleet-claude-cwd-"),
        home: scratchDir("fleet-claude-home-"),
        modelBaseUrl: server.url,
        credential: { name: "ANTHROPIC_API_KEY", value: "sk-ant-dummy" },
        network: "proxy",
        options: {
          mcp_servers: { docs: { command: process.execPath, args: [echo] } },
          allowed_tools: ["Read", "mcp__docs__echo"],
        },
      },
      { timeoutMs: 45_000, stallMs: 30_000, binaryPath: CLAUDE },
    );
    expect(r.reason).toBe("completed");
    const main = server.requests.filter((q) => q.kind === "main" || q.kind === "final");
    const tools = main[0]!.body.tools.map((t: { name: string }) => t.name);
    expect(tools).toContain("mcp__docs__echo");
  });
});
