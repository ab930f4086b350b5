// The token economy at the model gateway, end to end: the REAL Claude Code and Codex CLIs, contained
// as Fleet runs them, against the scripted model servers and the offline GitHub emulator. Metering,
// ceilings, runaway detection, context pressure and credential rotation are all decided from what
// passes the gateway.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ScriptTurn } from "@fleet/model-servers";
import { describe, expect, it } from "vitest";
import type { TaskContext } from "../../src/core/task.ts";
import { WindowBook } from "../../src/economy/credential-windows.ts";
import { KEYS, main, pool, run, sum, useGitHub } from "./gateway-harness.ts";

useGitHub();

describe("the model gateway's token economy with the real agent CLIs", () => {
  it("Claude: a looping agent is stopped by the defaults within 200,000 tokens, the reason on the issue", async () => {
    const loop: ScriptTurn = {
      toolUses: [{ name: "Read", input: { file_path: "/etc/hostname" } }],
      usage: { input_tokens: 2_000, cache_read_input_tokens: 18_000, output_tokens: 100 },
    };
    const r = await run("claude", () => Array.from({ length: 40 }, () => loop));
    expect(r.outcome.outcome).toBe("over-budget");
    expect(r.outcome.reason).toBe(
      'stopped: the agent asked for the same tool call 5 times with nothing changed in the worktree (Read {"file_path":"/etc/hostname"}); runaway.repeated_tool_calls is 5',
    );
    // Five answers went out; the sixth request was refused at the gateway and never reached the model.
    expect(r.server.played).toBe(5);
    const total = r.outcome.totals!.usage;
    expect(total.input + total.output + total.cacheRead + total.cacheWrite).toBe(5 * 20_100);
    expect(r.comments).toContain("runaway.repeated_tool_calls is 5");
  });

  it("Claude: the same command repeated while it changes the worktree each time is not a runaway", async () => {
    const append: ScriptTurn = {
      toolUses: [{ name: "Bash", input: { command: "echo x >> GROWING.md", description: "append" } }],
      usage: { input_tokens: 500, output_tokens: 20 },
    };
    const r = await run("claude", () => [
      ...Array.from({ length: 7 }, () => append),
      { text: "Done.", usage: { input_tokens: 10, output_tokens: 5 } },
    ]);
    expect(r.outcome.outcome, r.outcome.reason).toBe("pr-opened");
    expect(r.server.played).toBe(8);
  });

  it("Codex: a looping agent is stopped by the defaults within 200,000 tokens, the reason on the issue", async () => {
    const r = await run("codex", (path) =>
      Array.from({ length: 40 }, () => ({
        toolUses: [{ name: "exec_command", input: { cmd: "cat README.md", workdir: path } }],
        usage: { input_tokens: 20_000, cache_read_input_tokens: 15_000, output_tokens: 100 },
      })),
    );
    expect(r.outcome.outcome).toBe("over-budget");
    expect(r.outcome.reason).toContain(
      "the same tool call 5 times with nothing changed in the worktree (exec_command",
    );
    expect(r.server.played).toBe(5);
    expect(r.outcome.totals!.usage).toMatchObject({ input: 5 * 5_000, cacheRead: 5 * 15_000, output: 500 });
    expect(r.comments).toContain("runaway.repeated_tool_calls is 5");
  });

  it("Claude: a ceiling stops the run at the request that would pass it; the report's figures are the server's", async () => {
    const write = (path: string, i: number): ScriptTurn => ({
      toolUses: [{ name: "Write", input: { file_path: join(path, `F${i}.md`), content: `${i}\n` } }],
      usage: {
        input_tokens: 1_000,
        cache_read_input_tokens: 8_000,
        cache_creation_input_tokens: 500,
        output_tokens: 500,
      },
    });
    let sent: ScriptTurn[] = [];
    const r = await run(
      "claude",
      (path) => {
        sent = [1, 2, 3, 4, 5, 6].map((i) => write(path, i));
        return sent;
      },
      { perTaskLimits: { tokens: 35_000 } },
    );
    expect(r.outcome.outcome).toBe("over-budget");
    expect(r.outcome.reason).toBe(
      "stopped: the next model request would pass the per-task ceiling of 35,000 tokens (budgets.per_task_tokens): 30,000 used, and it reads at least 10,000; the gateway refused it",
    );
    expect(r.server.played).toBe(3);
    const played = sent.slice(0, 3);
    expect(r.outcome.totals?.usage).toEqual({
      input: sum(played, (u) => u.input_tokens),
      output: sum(played, (u) => u.output_tokens),
      cacheRead: sum(played, (u) => u.cache_read_input_tokens ?? 0),
      cacheWrite: sum(played, (u) => u.cache_creation_input_tokens ?? 0),
      reasoning: 0,
    });
    expect(r.comments).toContain("would pass the per-task ceiling of 35,000 tokens");
    expect(r.comments).toContain("Figures are what Fleet's model gateway read from the provider's responses");
  });

  it("Codex: the report's figures equal what the scripted server sent, and the agent's own report agrees", async () => {
    let sent: ScriptTurn[] = [];
    const r = await run("codex", (path) => {
      sent = [
        {
          toolUses: [{ name: "exec_command", input: { cmd: "printf 'x\\n' > WIRE.md", workdir: path } }],
          usage: {
            input_tokens: 1_500,
            cache_read_input_tokens: 600,
            output_tokens: 70,
            reasoning_tokens: 20,
          },
        },
        {
          text: "Done.",
          usage: {
            input_tokens: 1_800,
            cache_read_input_tokens: 1_200,
            output_tokens: 30,
            reasoning_tokens: 5,
          },
        },
      ];
      return sent;
    });
    expect(r.outcome.outcome, r.outcome.reason).toBe("pr-opened");
    expect(r.outcome.totals?.usage).toEqual({
      input: 3_300 - 1_800,
      cacheRead: 1_800,
      cacheWrite: 0,
      output: 100,
      reasoning: 25,
    });
    expect(r.outcome.totals?.turns).toBe(main(r.server).length);
    expect(r.outcome.agentTotals?.usage).toMatchObject({ input: 1_500, cacheRead: 1_800, output: 100 });
    expect(r.comments).toContain("The agent's own report agrees with the gateway's figures");
  });

  it("Claude: a run passing max_context_pct stops, with the reason; its context is recorded as it goes", async () => {
    const contexts: TaskContext[] = [];
    const r = await run(
      "claude",
      (path) => [
        {
          toolUses: [{ name: "Write", input: { file_path: join(path, "A.md"), content: "a\n" } }],
          usage: { input_tokens: 1_000, cache_read_input_tokens: 60_000, output_tokens: 100 },
        },
        {
          toolUses: [{ name: "Write", input: { file_path: join(path, "B.md"), content: "b\n" } }],
          usage: {
            input_tokens: 1_000,
            cache_read_input_tokens: 140_000,
            cache_creation_input_tokens: 2_000,
            output_tokens: 100,
          },
        },
        { text: "Done.", usage: { input_tokens: 10, output_tokens: 5 } },
      ],
      { runLimits: { maxContextPct: 60 }, onContext: (c) => contexts.push(c) },
    );
    expect(r.outcome.outcome).toBe("over-budget");
    expect(r.outcome.reason).toBe(
      "stopped: the last turn's context was 143k tokens, 71% of the model's 200k window, over max_context_pct 60",
    );
    expect(contexts.map((c) => [c.tokens, c.window])).toEqual([
      [61_000, 200_000],
      [143_000, 200_000],
    ]);
    expect(r.server.played).toBe(2);
    expect(r.comments).toContain("over max_context_pct 60");
  });

  it("Claude: a 429 mid-run is retried by the gateway on another credential; the agent finishes without a restart", async () => {
    const home = await mkdtemp(join(tmpdir(), "fleet-gateway-e2e-state-"));
    try {
      const rotation = pool(home, new WindowBook(), ["KEY_A", "KEY_B"]);
      const first = await rotation.first();
      if (first.kind !== "credential") throw new Error("a credential is free");
      const r = await run(
        "claude",
        (path) => [
          {
            toolUses: [{ name: "Write", input: { file_path: join(path, "ONE.md"), content: "1\n" } }],
            usage: { input_tokens: 900, output_tokens: 30 },
          },
          { error: { status: 429, retryAfter: 30 } },
          {
            toolUses: [{ name: "Write", input: { file_path: join(path, "TWO.md"), content: "2\n" } }],
            usage: { input_tokens: 950, output_tokens: 30 },
          },
          { text: "Done.", usage: { input_tokens: 990, output_tokens: 10 } },
        ],
        {
          credential: first.credential,
          rotateCredential: rotation.rotate,
          credentialPool: {
            coder: "claude",
            book: rotation.book,
            rotate: rotation.rotate,
            next: rotation.next,
          },
        },
      );
      expect(r.outcome.outcome, r.outcome.reason).toBe("pr-opened");
      const keys = main(r.server).map((q) => q.headers["x-api-key"]);
      expect(keys).toEqual([KEYS.KEY_A, KEYS.KEY_A, KEYS.KEY_B, KEYS.KEY_B]);
      // The same request went again on KEY_B: the agent never saw the 429, nor resumed a session.
      const [, limited, retried] = main(r.server);
      expect(retried!.body).toEqual(limited!.body);
      expect(JSON.stringify(r.server.requests.map((q) => q.body))).not.toContain("rate-limited; continue");
      expect(r.outcome.totals?.credential).toBe("KEY_B");
      expect(r.outcome.totals?.usage).toMatchObject({ input: 2_840, output: 70 });
      expect(r.comments).not.toContain(KEYS.KEY_A);
      expect(r.comments).not.toContain(KEYS.KEY_B);
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });
});
