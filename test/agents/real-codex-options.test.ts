// The real Codex CLI against the scripted OpenAI server: coders.codex.options.append_system_prompt
// reaches the model's request as developer instructions. Nothing leaves the machine.
import { type ScriptServer, startOpenAIScriptServer } from "@fleet/model-servers";
import { afterEach, describe, expect, it } from "vitest";
import { codexAdapter } from "../../src/agents/codex.ts";
import { runAgent } from "../../src/worker/sandbox/run-agent.ts";
import { scratchDirsRemovedAfterAll } from "../support/scratch-dirs.ts";

const scratchDir = scratchDirsRemovedAfterAll();

const CODEX = new URL("../../node_modules/.bin/codex", import.meta.url).pathname;

let server: ScriptServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

describe("real codex CLI: coders.codex.options", () => {
  it("append_system_prompt reaches the request", async () => {
    server = await startOpenAIScriptServer({
      turns: [{ text: "Done.", usage: { input_tokens: 100, output_tokens: 5 } }],
    });
    const r = await runAgent(
      codexAdapter,
      {
        prompt: "Say done",
        model: "o4-mini",
        phase: "work",
        cwd: scratchDir("fleet-codex-cwd-"),
        home: scratchDir("fleet-codex-home-"),
        modelBaseUrl: server.url,
        credential: { name: "OPENAI_API_KEY", value: "sk-dummy" },
        options: { append_system_prompt: 'Always sign as "FLEET-OPTIONS-MARKER".' },
      },
      { timeoutMs: 45_000, stallMs: 30_000, binaryPath: CODEX },
    );
    expect(r.reason).toBe("completed");
    const main = server.requests.filter((q) => q.kind === "main" || q.kind === "final");
    expect(main.length).toBeGreaterThan(0);
    expect(JSON.stringify(main[0]!.body)).toContain('Always sign as \\"FLEET-OPTIONS-MARKER\\".');
  });
});
