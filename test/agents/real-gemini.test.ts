// Runs the real Gemini CLI (devDependency @google/gemini-cli) against the scripted Gemini API server
// on loopback. Nothing leaves the machine.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type ScriptServer, type ScriptTurn, startGeminiScriptServer } from "@fleet/model-servers";
import { afterEach, describe, expect, it } from "vitest";
import { geminiAdapter } from "../../src/agents/gemini.ts";
import type { AgentEvent, AgentInvocation } from "../../src/agents/types.ts";
import { runAgent } from "../../src/worker/sandbox/run-agent.ts";
import { scratchDirsRemovedAfterAll } from "../support/scratch-dirs.ts";
import { startEgressTrap } from "./egress-trap.ts";

const scratchDir = scratchDirsRemovedAfterAll();

const GEMINI = new URL("../../node_modules/.bin/gemini", import.meta.url).pathname;

let server: ScriptServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

async function setup(turns: ScriptTurn[]) {
  server = await startGeminiScriptServer({ turns });
  const cwd = scratchDir("fleet-gemini-cwd-");
  const home = scratchDir("fleet-gemini-home-");
  const inv: AgentInvocation = {
    prompt: "Create HELLO.md",
    model: "gemini-2.5-pro",
    phase: "work",
    cwd,
    home,
    modelBaseUrl: server.url,
    credential: { name: "GEMINI_API_KEY", value: "gemini-dummy-key" },
  };
  return { cwd, home, inv };
}

const opts = { timeoutMs: 60_000, stallMs: 30_000, binaryPath: GEMINI };

describe("real gemini CLI against the scripted Gemini API server", () => {
  it("a scripted write_file really writes; totals equal the script's figures", async () => {
    const { cwd, home, inv } = await setup([
      {
        text: "Writing the file.",
        toolUses: [{ name: "write_file", input: { file_path: "HELLO.md", content: "hello from gemini\n" } }],
        usage: { input_tokens: 1000, cache_read_input_tokens: 400, output_tokens: 50, reasoning_tokens: 20 },
      },
      { text: "Done.", usage: { input_tokens: 1200, cache_read_input_tokens: 900, output_tokens: 30 } },
    ]);
    const events: AgentEvent[] = [];
    // Everything bound off the machine goes to a proxy that forwards nothing and records it.
    const trap = await startEgressTrap();
    const r = await runAgent(
      geminiAdapter,
      { ...inv, env: trap.env },
      { ...opts, onEvent: (e) => events.push(e) },
    );
    await trap.stop();
    // No usage statistics, telemetry or update check left the machine.
    expect(trap.attempts).toEqual([]);
    expect(r.reason, r.error).toBe("completed");
    expect(readFileSync(join(cwd, "HELLO.md"), "utf8")).toBe("hello from gemini\n");
    // promptTokenCount 2200 (1300 cached), candidates 60, thoughts 20.
    expect(r.totals?.usage).toEqual({
      input: 900,
      cacheRead: 1300,
      cacheWrite: 0,
      output: 80,
      reasoning: 20,
    });
    expect(r.totals?.model).toBe("gemini-2.5-pro");
    expect(r.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(events.filter((e) => e.type === "tool_result")).toEqual([
      expect.objectContaining({ isError: false }),
    ]);
    expect(events.filter((e) => e.type === "text").map((e) => (e as { text: string }).text)).toEqual([
      "Writing the file.",
      "Done.",
    ]);
    // Through the base URL with the key in Google's header; the function response went back.
    const main = server?.requests.filter((q) => q.kind === "main") ?? [];
    expect(main).toHaveLength(2);
    expect(main[0]?.path).toBe("/v1beta/models/gemini-2.5-pro:streamGenerateContent");
    expect(main[0]?.headers["x-goog-api-key"]).toBe("gemini-dummy-key");
    expect(JSON.stringify(main[0]?.body.contents)).toContain("Create HELLO.md");
    expect(JSON.stringify(main[1]?.body.contents)).toContain("functionResponse");
    // Fleet's settings turned usage statistics off.
    const settings = JSON.parse(readFileSync(join(home, ".gemini/settings.json"), "utf8"));
    expect(settings.privacy.usageStatisticsEnabled).toBe(false);
  });

  it("an API error ends the run failed, with the API's message", async () => {
    const { inv } = await setup([]);
    // A base URL whose path the API does not serve: a 404, which the CLI does not retry.
    const r = await runAgent(geminiAdapter, { ...inv, modelBaseUrl: `${server!.url}/nowhere` }, opts);
    expect(r.reason).toBe("failed");
    expect(r.exitCode).toBe(1);
    expect(r.error).toMatch(/no route POST \/nowhere\/v1beta/);
  });
  it("resume continues the session; the resumed run's totals are its own", async () => {
    const { inv } = await setup([
      { text: "first", usage: { input_tokens: 5, output_tokens: 1 } },
      { text: "second", usage: { input_tokens: 7, output_tokens: 2 } },
    ]);
    const a = await runAgent(geminiAdapter, inv, opts);
    // A resumed gemini CLI now and then prints nothing for 25-35 s as it starts (seen in about 1 resume
    // in 15 here, more on a loaded machine; not the server, which had no request from it; the cause is
    // not found: the closing note's What is left): the resumed run gets the time, and is still checked.
    const slowStart = { ...opts, stallMs: 90_000, timeoutMs: 120_000 };
    const b = await runAgent(
      geminiAdapter,
      { ...inv, prompt: "two", resumeSessionId: a.sessionId },
      slowStart,
    );
    expect(b.reason, b.error).toBe("completed");
    expect(b.sessionId).toBe(a.sessionId);
    expect(JSON.stringify(server?.requests.at(-1)?.body)).toContain("first");
    expect(b.totals?.usage).toMatchObject({ input: 7, output: 2 });
  }, 180_000);
});
