// Runs the real Claude Code CLI (devDependency @anthropic-ai/claude-code) against the scripted
// Anthropic server on loopback. Nothing leaves the machine.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { type ScriptServer, type ScriptTurn, startAnthropicScriptServer } from "@fleet/model-servers";
import { afterEach, describe, expect, it } from "vitest";
import { claudeAdapter } from "../../src/agents/claude.ts";
import type { AgentEvent, AgentInvocation } from "../../src/agents/types.ts";
import { livingProcessesInGroup, runAgent } from "../../src/worker/sandbox/run-agent.ts";
import { scratchDirsRemovedAfterAll } from "../support/scratch-dirs.ts";

const scratchDir = scratchDirsRemovedAfterAll();

const CLAUDE = new URL("../../node_modules/.bin/claude", import.meta.url).pathname;

let server: ScriptServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

async function setup(turns: ScriptTurn[], extra: Partial<AgentInvocation> = {}) {
  server = await startAnthropicScriptServer({ turns });
  const cwd = scratchDir("fleet-claude-cwd-");
  const home = scratchDir("fleet-claude-home-");
  const inv: AgentInvocation = {
    prompt: "Create HELLO.md",
    model: "claude-sonnet-4-5",
    phase: "work",
    cwd,
    home,
    modelBaseUrl: server.url,
    credential: { name: "ANTHROPIC_API_KEY", value: "sk-ant-dummy" },
    ...extra,
  };
  return { cwd, home, inv };
}

describe("real claude CLI against the scripted Anthropic server", () => {
  it("a Write tool call creates the file; totals equal the script's sums", async () => {
    const { cwd, inv } = await setup([
      {
        text: "I will create the file.",
        toolUses: [{ name: "Write", input: { file_path: "HELLO.md", content: "hello from agent\n" } }],
        usage: {
          input_tokens: 1200,
          output_tokens: 40,
          cache_read_input_tokens: 300,
          cache_creation_input_tokens: 50,
        },
      },
      {
        text: "Done: created HELLO.md",
        usage: {
          input_tokens: 1500,
          output_tokens: 60,
          cache_read_input_tokens: 1000,
          cache_creation_input_tokens: 7,
        },
      },
    ]);
    const events: AgentEvent[] = [];
    const log = join(cwd, "..", `${cwd.split("/").at(-1)}.log`);
    const r = await runAgent(claudeAdapter, inv, {
      timeoutMs: 45_000,
      stallMs: 30_000,
      binaryPath: CLAUDE,
      logFile: log,
      onEvent: (e) => events.push(e),
    });
    expect(r.reason).toBe("completed");
    expect(readFileSync(join(cwd, "HELLO.md"), "utf8")).toBe("hello from agent\n");
    expect(r.totals?.usage).toEqual({
      input: 2700,
      output: 100,
      cacheRead: 1300,
      cacheWrite: 57,
      reasoning: 0,
    });
    expect(r.totals?.turns).toBe(2);
    expect(r.totals?.model).toBe("claude-sonnet-4-5");
    expect(r.totals?.costUsd).toBeGreaterThan(0);
    expect(r.totals?.credential).toBe("ANTHROPIC_API_KEY");
    expect(r.summary).toBe("Done: created HELLO.md");
    expect(r.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(events.filter((e) => e.type === "tool_use").map((e) => (e as { name: string }).name)).toEqual([
      "Write",
    ]);
    expect(events.some((e) => e.type === "tool_result" && !e.isError)).toBe(true);
    expect(events.filter((e) => e.type === "unknown")).toEqual([]);
    expect(server?.played).toBe(2);
    // The prompt arrived on stdin; the scripted server saw the agent's tools and the HEAD probe.
    const main = server?.requests.filter((q) => q.kind === "main") ?? [];
    expect(JSON.stringify(main[0]?.body.messages)).toContain("Create HELLO.md");
    expect(main[0]?.body.tools.map((t: { name: string }) => t.name)).toContain("Write");
    expect(readFileSync(log, "utf8")).toContain('"type":"result"');
  });

  it("plan phase runs read-only and its session resumes in the work phase", async () => {
    const { inv } = await setup([
      { text: "Plan: write HELLO.md", usage: { input_tokens: 10, output_tokens: 5 } },
      { text: "resumed", usage: { input_tokens: 20, output_tokens: 6 } },
    ]);
    const plan = await runAgent(
      claudeAdapter,
      { ...inv, phase: "plan" },
      { timeoutMs: 45_000, stallMs: 30_000, binaryPath: CLAUDE },
    );
    expect(plan.reason).toBe("completed");
    expect(plan.summary).toBe("Plan: write HELLO.md");
    const work = await runAgent(
      claudeAdapter,
      { ...inv, prompt: "now do it", resumeSessionId: plan.sessionId },
      { timeoutMs: 45_000, stallMs: 30_000, binaryPath: CLAUDE },
    );
    expect(work.reason).toBe("completed");
    expect(work.sessionId).toBe(plan.sessionId);
    // Claude's result counts this invocation only, not the resumed session's earlier turns.
    expect(plan.totals?.usage).toMatchObject({ input: 10, output: 5 });
    expect(work.totals?.usage).toMatchObject({ input: 20, output: 6 });
    // The resumed request carries the earlier conversation.
    const last = server?.requests.filter((q) => q.kind === "main").at(-1);
    expect(JSON.stringify(last?.body.messages)).toContain("Plan: write HELLO.md");
  });

  it("429 with retry-after: the CLI retries on its own and reports it; the run completes", async () => {
    const { inv } = await setup([
      { error: { status: 429, retryAfter: 1 } },
      { text: "ok", usage: { input_tokens: 5, output_tokens: 3 } },
    ]);
    const events: AgentEvent[] = [];
    const r = await runAgent(claudeAdapter, inv, {
      timeoutMs: 45_000,
      stallMs: 30_000,
      binaryPath: CLAUDE,
      onEvent: (e) => events.push(e),
    });
    expect(r.reason).toBe("completed");
    expect(events.filter((e) => e.type === "rate_limit")).toEqual([
      { type: "rate_limit", retryAfterSeconds: 1, message: "API 429 (rate_limit); retry 1/10" },
    ]);
    expect(r.totals?.usage).toMatchObject({ input: 5, output: 3 });
    expect(r.rateLimit).toBeUndefined();
  });

  it("429 with CLAUDE_CODE_MAX_RETRIES=0: gives up at once; the run is rate-limited", async () => {
    const { inv } = await setup([{ error: { status: 429, retryAfter: 30 } }], {
      env: { CLAUDE_CODE_MAX_RETRIES: "0" },
    });
    const r = await runAgent(claudeAdapter, inv, { timeoutMs: 45_000, stallMs: 30_000, binaryPath: CLAUDE });
    expect(r.reason).toBe("rate-limited");
    expect(r.exitCode).toBe(1);
    expect(r.rateLimit?.message).toMatch(/429/);
    expect(server?.requests.filter((q) => q.kind === "main")).toHaveLength(1);
  });

  it("a stalled model stream is killed by the stall timeout", async () => {
    const { inv } = await setup([{ text: "never", stallMs: 120_000 }]);
    const r = await runAgent(claudeAdapter, inv, {
      timeoutMs: 60_000,
      stallMs: 2500,
      binaryPath: CLAUDE,
      killGraceMs: 1000,
    });
    expect(r.reason).toBe("stall");
    expect(await livingProcessesInGroup(r.pid!)).toEqual([]);
  });

  it("the wall-clock timeout kills it", async () => {
    const { inv } = await setup([{ text: "never", stallMs: 120_000 }]);
    const r = await runAgent(claudeAdapter, inv, {
      timeoutMs: 3000,
      stallMs: 60_000,
      binaryPath: CLAUDE,
      killGraceMs: 1000,
    });
    expect(r.reason).toBe("timeout");
    expect(await livingProcessesInGroup(r.pid!)).toEqual([]);
  });

  it("cancel via AbortSignal mid-run leaves no process behind", async () => {
    const { inv } = await setup([
      {
        toolUses: [{ name: "Bash", input: { command: "sleep 60", description: "wait" } }],
        usage: { input_tokens: 1, output_tokens: 1 },
      },
    ]);
    const ac = new AbortController();
    const r = await runAgent(claudeAdapter, inv, {
      timeoutMs: 60_000,
      stallMs: 60_000,
      binaryPath: CLAUDE,
      signal: ac.signal,
      killGraceMs: 1000,
      // Cancel once the agent has started its long Bash command.
      onEvent: (e) => {
        if (e.type === "tool_use") setTimeout(() => ac.abort(), 500);
      },
    });
    expect(r.reason).toBe("cancelled");
    expect(r.pid).toBeGreaterThan(0);
    expect(() => process.kill(r.pid!, 0)).toThrow();
    expect(await livingProcessesInGroup(r.pid!)).toEqual([]);
    expect(existsSync(inv.cwd)).toBe(true);
  });
});
