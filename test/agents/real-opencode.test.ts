// Runs the real opencode CLI (devDependency opencode-ai) against the scripted Anthropic Messages
// server on loopback, configured as its provider's baseURL. Nothing leaves the machine.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type ScriptServer, type ScriptTurn, startAnthropicScriptServer } from "@fleet/model-servers";
import { afterEach, describe, expect, it } from "vitest";
import { opencodeAdapter } from "../../src/agents/opencode.ts";
import type { AgentEvent, AgentInvocation } from "../../src/agents/types.ts";
import { runAgent } from "../../src/worker/sandbox/run-agent.ts";
import { scratchDirsRemovedAfterAll } from "../support/scratch-dirs.ts";
import { startEgressTrap } from "./egress-trap.ts";

const scratchDir = scratchDirsRemovedAfterAll();

const OPENCODE = new URL("../../node_modules/.bin/opencode", import.meta.url).pathname;

let server: ScriptServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

async function setup(turns: ScriptTurn[]) {
  server = await startAnthropicScriptServer({ turns });
  const cwd = scratchDir("fleet-opencode-cwd-");
  const home = scratchDir("fleet-opencode-home-");
  const inv: AgentInvocation = {
    prompt: "Create HELLO.md",
    model: "claude-sonnet-4-5",
    phase: "work",
    cwd,
    home,
    modelBaseUrl: server.url,
    credential: { name: "ANTHROPIC_API_KEY", value: "sk-ant-opencode-dummy" },
  };
  return { cwd, inv };
}

const opts = { timeoutMs: 60_000, stallMs: 30_000, binaryPath: OPENCODE };

describe("real opencode CLI against the scripted Anthropic server", () => {
  it("a scripted write really writes; totals are the sum of its steps, as scripted", async () => {
    const { cwd, inv } = await setup([
      {
        text: "Writing the file.",
        toolUses: [{ name: "write", input: { filePath: "HELLO.md", content: "hello from opencode\n" } }],
        usage: {
          input_tokens: 1000,
          output_tokens: 50,
          cache_read_input_tokens: 400,
          cache_creation_input_tokens: 30,
        },
      },
      { text: "Done.", usage: { input_tokens: 1200, output_tokens: 30, cache_read_input_tokens: 900 } },
    ]);
    const events: AgentEvent[] = [];
    // Everything bound off the machine goes to a proxy that forwards nothing and records it.
    const trap = await startEgressTrap();
    const r = await runAgent(
      opencodeAdapter,
      { ...inv, env: trap.env },
      { ...opts, onEvent: (e) => events.push(e) },
    );
    await trap.stop();
    // No models.dev fetch, update check, share or plugin install left the machine.
    expect(trap.attempts).toEqual([]);
    expect(r.reason, r.error).toBe("completed");
    expect(readFileSync(join(cwd, "HELLO.md"), "utf8")).toBe("hello from opencode\n");
    expect(r.totals?.usage).toEqual({
      input: 2200,
      output: 80,
      cacheRead: 1300,
      cacheWrite: 30,
      reasoning: 0,
    });
    expect(r.totals?.turns).toBe(2);
    expect(r.totals?.model).toBe("claude-sonnet-4-5");
    expect(r.sessionId).toMatch(/^ses_/);
    expect(events.filter((e) => e.type === "tool_result")).toEqual([
      expect.objectContaining({ isError: false, output: expect.stringMatching(/wrote/i) }),
    ]);
    expect(events.filter((e) => e.type === "text").map((e) => (e as { text: string }).text)).toEqual([
      "Writing the file.",
      "Done.",
    ]);
    // The prompt came on stdin and reached the model; the key travelled as Anthropic's x-api-key.
    const main = server?.requests.filter((q) => q.kind === "main") ?? [];
    expect(main).toHaveLength(2);
    expect(JSON.stringify(main[0]?.body.messages)).toContain("Create HELLO.md");
    expect(main[0]?.headers["x-api-key"]).toBe("sk-ant-opencode-dummy");
    expect(JSON.stringify(main[1]?.body.messages)).toContain("tool_result");
  });

  it("an API error ends the run failed, with the API's message", async () => {
    const { inv } = await setup([]);
    const r = await runAgent(opencodeAdapter, { ...inv, modelBaseUrl: `${server!.url}/nowhere` }, opts);
    expect(r.reason).toBe("failed");
    expect(r.exitCode).toBe(1);
    expect(r.error).toMatch(/no route POST \/nowhere\/v1\/messages/);
  });
  it("resume continues the session; the resumed run's totals are its own", async () => {
    const { inv } = await setup([
      { text: "first", usage: { input_tokens: 5, output_tokens: 1 } },
      { text: "second", usage: { input_tokens: 7, output_tokens: 2 } },
    ]);
    const a = await runAgent(opencodeAdapter, inv, opts);
    const b = await runAgent(opencodeAdapter, { ...inv, prompt: "two", resumeSessionId: a.sessionId }, opts);
    expect(b.reason, b.error).toBe("completed");
    expect(b.sessionId).toBe(a.sessionId);
    expect(JSON.stringify(server?.requests.at(-1)?.body)).toContain("first");
    expect(b.totals?.usage).toMatchObject({ input: 7, output: 2 });
  });
});
