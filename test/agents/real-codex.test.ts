// Runs the real Codex CLI (devDependency @openai/codex) against the scripted OpenAI Responses
// server on loopback. Nothing leaves the machine.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type ScriptServer, type ScriptTurn, startOpenAIScriptServer } from "@fleet/model-servers";
import { afterEach, describe, expect, it } from "vitest";
import { codexAdapter } from "../../src/agents/codex.ts";
import type { AgentEvent, AgentInvocation } from "../../src/agents/types.ts";
import { runAgent } from "../../src/worker/sandbox/run-agent.ts";
import { scratchDirsRemovedAfterAll } from "../support/scratch-dirs.ts";

const scratchDir = scratchDirsRemovedAfterAll();

const CODEX = new URL("../../node_modules/.bin/codex", import.meta.url).pathname;

let server: ScriptServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

async function setup(turns: ScriptTurn[]) {
  server = await startOpenAIScriptServer({ turns });
  const cwd = scratchDir("fleet-codex-cwd-");
  const home = scratchDir("fleet-codex-home-");
  const inv: AgentInvocation = {
    prompt: "Create HELLO.md",
    // With o4-mini Codex offers the `exec_command` function ({cmd, workdir}).
    model: "o4-mini",
    phase: "work",
    cwd,
    home,
    modelBaseUrl: server.url,
    credential: { name: "OPENAI_API_KEY", value: "sk-dummy" },
  };
  return { cwd, inv };
}

describe("real codex CLI against the scripted OpenAI server", () => {
  it("a scripted exec_command really runs; totals equal the script's figures", async () => {
    const { cwd, inv } = await setup([
      {
        text: "Writing the file.",
        toolUses: [
          { name: "exec_command", input: { cmd: "printf 'hello from codex\\n' > HELLO.md", workdir: "." } },
        ],
        usage: { input_tokens: 1000, cache_read_input_tokens: 400, output_tokens: 50, reasoning_tokens: 20 },
      },
      {
        text: "Done.",
        usage: { input_tokens: 1200, cache_read_input_tokens: 900, output_tokens: 30, reasoning_tokens: 10 },
      },
    ]);
    const events: AgentEvent[] = [];
    const r = await runAgent(codexAdapter, inv, {
      timeoutMs: 45_000,
      stallMs: 30_000,
      binaryPath: CODEX,
      onEvent: (e) => events.push(e),
    });
    expect(r.reason).toBe("completed");
    expect(readFileSync(join(cwd, "HELLO.md"), "utf8")).toBe("hello from codex\n");
    // turn.completed.usage: input 2200 (1300 of it cached), output 80 (30 of it reasoning).
    expect(r.totals?.usage).toEqual({
      input: 2200 - 1300,
      cacheRead: 1300,
      cacheWrite: 0,
      output: 80,
      reasoning: 30,
    });
    expect(r.totals?.costUsd).toBeNull();
    expect(r.totals?.model).toBe("o4-mini");
    expect(r.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    const results = events.filter((e) => e.type === "tool_result");
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({ isError: false });
    expect(events.filter((e) => e.type === "text").map((e) => (e as { text: string }).text)).toEqual([
      "Writing the file.",
      "Done.",
    ]);
    // The prompt arrived on stdin and the function output went back to the model.
    const main = server?.requests.filter((q) => q.kind === "main") ?? [];
    expect(main).toHaveLength(2);
    expect(JSON.stringify(main[0]?.body.input)).toContain("Create HELLO.md");
    expect(main[0]?.body.tools.map((t: { name?: string }) => t.name)).toContain("exec_command");
    expect(JSON.stringify(main[1]?.body.input)).toContain("function_call_output");
  });

  it("a usage-limit 429 ends the run as rate-limited", async () => {
    const { inv } = await setup([
      { error: { status: 429, type: "usage_limit_reached", resetsAt: 1_900_000_000 } },
    ]);
    const r = await runAgent(codexAdapter, inv, { timeoutMs: 45_000, stallMs: 30_000, binaryPath: CODEX });
    expect(r.reason).toBe("rate-limited");
    expect(r.rateLimit?.message).toMatch(/usage limit/i);
  });

  it("resume continues the thread; its turn.completed.usage is the THREAD's running total", async () => {
    const { inv } = await setup([
      { text: "first", usage: { input_tokens: 5, output_tokens: 1 } },
      { text: "second", usage: { input_tokens: 7, output_tokens: 2 } },
    ]);
    const opts = { timeoutMs: 45_000, stallMs: 30_000, binaryPath: CODEX };
    const a = await runAgent(codexAdapter, inv, opts);
    const b = await runAgent(codexAdapter, { ...inv, prompt: "two", resumeSessionId: a.sessionId }, opts);
    expect(b.reason).toBe("completed");
    expect(b.sessionId).toBe(a.sessionId);
    expect(JSON.stringify(server?.requests.at(-1)?.body.input)).toContain("first");
    // Not 7/2: a resumed run's own share is this minus the earlier run's totals (the caller knows those).
    expect(b.totals?.usage).toMatchObject({ input: 12, output: 3 });
  });
});
