// The real coder CLIs (Claude Code, Codex) start Fleet's ask_human MCP server from the coders'
// mcp_servers option as Fleet's adapters pass it, run its tool when the scripted model calls it, and
// send its answer back to the model. Plain child processes against scripted model servers on loopback.
import { join } from "node:path";
import { type ScriptServer, startAnthropicScriptServer, startOpenAIScriptServer } from "@fleet/model-servers";
import { afterEach, describe, expect, it } from "vitest";
import { claudeAdapter } from "../../src/agents/claude.ts";
import { codexAdapter } from "../../src/agents/codex.ts";
import type { AgentEvent } from "../../src/agents/types.ts";
import {
  ASK_HUMAN_SERVER,
  askHumanServer,
  CLAUDE_ASK_HUMAN_TOOL,
  readQuestions,
} from "../../src/worker/ask-human/ask-human.ts";
import { runAgent } from "../../src/worker/sandbox/run-agent.ts";
import { scratchDirsRemovedAfterAll } from "../support/scratch-dirs.ts";

const scratchDir = scratchDirsRemovedAfterAll();

const CLAUDE = new URL("../../node_modules/.bin/claude", import.meta.url).pathname;
const CODEX = new URL("../../node_modules/.bin/codex", import.meta.url).pathname;
const POSTED = "Your question is posted for a person to answer. End your turn now and change nothing more";
const QUESTION = "Should the export keep the v1 column names, or switch to the v2 ones?";

let server: ScriptServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

const fresh = (what: string) => scratchDir(`fleet-ask-human-${what}-`);
// biome-ignore lint/suspicious/noExplicitAny: request bodies are arbitrary JSON from the CLI under test
type Json = any;

describe("ask_human through the real coder CLIs", () => {
  it("claude: the model's call of mcp__fleet__ask_human posts the question, and the tool's answer reaches the model", async () => {
    server = await startAnthropicScriptServer({
      turns: [
        {
          text: "I need a decision.",
          toolUses: [{ name: CLAUDE_ASK_HUMAN_TOOL, input: { question: QUESTION } }],
          usage: { input_tokens: 10, output_tokens: 5 },
        },
        { text: "Waiting for the answer.", usage: { input_tokens: 12, output_tokens: 3 } },
      ],
    });
    const questions = join(fresh("run"), "questions.jsonl");
    const events: AgentEvent[] = [];
    const lines: Json[] = [];
    const r = await runAgent(
      claudeAdapter,
      {
        prompt: "Export the report",
        model: "claude-sonnet-4-5",
        phase: "work",
        cwd: fresh("cwd"),
        home: fresh("home"),
        modelBaseUrl: server.url,
        credential: { name: "ANTHROPIC_API_KEY", value: "sk-ant-dummy" },
        network: "proxy",
        options: {
          mcp_servers: { [ASK_HUMAN_SERVER]: askHumanServer(questions) },
          allowed_tools: ["Read", CLAUDE_ASK_HUMAN_TOOL],
        },
      },
      {
        timeoutMs: 60_000,
        stallMs: 45_000,
        binaryPath: CLAUDE,
        onEvent: (e) => events.push(e),
        onLine: (line, stream) => {
          if (stream === "stdout" && line.startsWith("{")) lines.push(JSON.parse(line));
        },
      },
    );
    expect(r.reason, r.error).toBe("completed");
    expect(await readQuestions(questions)).toBe(QUESTION);
    // The server was up before the first turn: the CLI says so in its init event.
    const init = lines.find((l) => l.type === "system" && l.subtype === "init");
    expect(init?.mcp_servers).toEqual([{ name: "fleet", status: "connected" }]);
    const main = server.requests.filter((q) => q.kind === "main");
    expect(main).toHaveLength(2);
    expect(main[0]!.body.tools.map((t: Json) => t.name)).toContain(CLAUDE_ASK_HUMAN_TOOL);
    // The second request carries the tool's answer to the model.
    const results = main[1]!.body.messages.at(-1).content.filter((b: Json) => b.type === "tool_result");
    expect(results).toHaveLength(1);
    expect(results[0].is_error).not.toBe(true);
    expect(JSON.stringify(results[0].content)).toContain(POSTED);
    expect(events.find((e) => e.type === "tool_use")).toMatchObject({ name: CLAUDE_ASK_HUMAN_TOOL });
    expect(events.find((e) => e.type === "tool_result")).toMatchObject({
      isError: false,
      output: expect.stringContaining(POSTED),
    });
  });

  it("codex: the model's call of ask_human in the mcp__fleet namespace posts the question under Fleet's approval policy, and the tool's answer reaches the model", async () => {
    server = await startOpenAIScriptServer({
      turns: [
        {
          text: "I need a decision.",
          // Codex offers MCP tools as one namespace tool per server; the model calls into it.
          toolUses: [{ name: "ask_human", namespace: "mcp__fleet", input: { question: QUESTION } }],
          usage: { input_tokens: 10, output_tokens: 5 },
        },
        { text: "Waiting for the answer.", usage: { input_tokens: 12, output_tokens: 3 } },
      ],
    });
    const questions = join(fresh("run"), "questions.jsonl");
    const events: AgentEvent[] = [];
    const lines: Json[] = [];
    const r = await runAgent(
      codexAdapter,
      {
        prompt: "Export the report",
        model: "o4-mini",
        phase: "work",
        cwd: fresh("cwd"),
        home: fresh("home"),
        modelBaseUrl: server.url,
        credential: { name: "OPENAI_API_KEY", value: "sk-dummy" },
        options: { mcp_servers: { [ASK_HUMAN_SERVER]: askHumanServer(questions) } },
      },
      {
        timeoutMs: 60_000,
        stallMs: 45_000,
        binaryPath: CODEX,
        onEvent: (e) => events.push(e),
        onLine: (line, stream) => {
          if (stream === "stdout" && line.startsWith("{")) lines.push(JSON.parse(line));
        },
      },
    );
    expect(r.reason, r.error).toBe("completed");
    expect(await readQuestions(questions)).toBe(QUESTION);
    const main = server.requests.filter((q) => q.kind === "main");
    expect(main).toHaveLength(2);
    const namespace = main[0]!.body.tools.find((t: Json) => t.name === "mcp__fleet");
    expect(namespace).toMatchObject({ type: "namespace", tools: [{ type: "function", name: "ask_human" }] });
    // The second request carries the tool's answer to the model (not a refusal for want of approval).
    const outputs = main[1]!.body.input.filter((i: Json) => i.type === "function_call_output");
    expect(outputs).toHaveLength(1);
    expect(JSON.stringify(outputs[0].output)).toContain(POSTED);
    expect(JSON.stringify(outputs[0].output)).not.toContain("requires approval");
    // Codex's own event names the server and the tool apart.
    const call = lines.find((l) => l.type === "item.completed" && l.item?.type === "mcp_tool_call");
    expect(call?.item).toMatchObject({
      server: "fleet",
      tool: "ask_human",
      arguments: { question: QUESTION },
      status: "completed",
    });
    expect(events.find((e) => e.type === "tool_use")).toMatchObject({ name: "fleet.ask_human" });
    expect(events.find((e) => e.type === "tool_result")).toMatchObject({
      isError: false,
      output: expect.stringContaining(POSTED),
    });
  });
});
