import { mkdir, mkdtemp, readFile, rm, stat, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claudeAdapter } from "../../src/agents/claude.ts";
import type { AgentAdapter } from "../../src/agents/types.ts";
import type { Task } from "../../src/core/task.ts";
import { WindowBook } from "../../src/economy/credential-windows.ts";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import { createGitHubStateStore } from "../../src/state/github-store.ts";
import { taskArtifactsDir } from "../../src/worker/3-attempt.ts";
import { type LocalWorker, startLocalWorker } from "../../src/worker/local-worker.ts";
import { DEFAULT_MAX_LOG_BYTES } from "../../src/worker/sandbox/run-agent.ts";
import { LOG_FILE } from "../../src/worker/workspace/artifacts.ts";
import { worktreePath } from "../../src/worker/workspace/worktree.ts";
import { botClient, waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";

const SECRET = "sk-ant-api03-hostileSECRETvalue0123456789abcdefXYZ";
const FLEET_YML =
  "dispatch: local\nmax_concurrent: 3\nplan_phase: false\nretries: { max: 0 }\ntimeouts: { run_minutes: 2, stall_minutes: 1 }\n";

/**
 * A misbehaving agent in Claude's stream-json dialect; the issue body (in its prompt) says how:
 * MODE-FLOOD prints ~25 MB of lines, MODE-FAIL leaks its credential into its errors and exits 3,
 * MODE-QUIET does a short, clean run.
 */
const AGENT = `
const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const prompt = Buffer.concat(chunks).toString("utf8");
const key = process.env.ANTHROPIC_API_KEY ?? "";
const out = (o) => new Promise((r) => (process.stdout.write(typeof o === "string" ? o : JSON.stringify(o) + "\\n") ? r() : process.stdout.once("drain", r)));
const result = (ok, text) => ({ type: "result", subtype: ok ? "success" : "error_during_execution", is_error: !ok, duration_ms: 5, num_turns: 1, result: text, session_id: "s-1", total_cost_usd: 0, usage: { input_tokens: 10, output_tokens: 5 } });
await out({ type: "system", subtype: "init", session_id: "s-1", model: "claude-sonnet-4-5", tools: [] });
if (prompt.includes("MODE-FLOOD")) {
  const pad = "x".repeat(90);
  for (let i = 0; i < 250; i++) {
    let block = "";
    for (let j = 0; j < 1000; j++) block += "flood line " + (i * 1000 + j) + " " + pad + "\\n";
    await out(block);
  }
  await out("FLOOD-LAST-LINE\\n");
  await out(result(true, "Printed a lot."));
} else if (prompt.includes("MODE-FAIL")) {
  process.stderr.write("fatal: the provider refused the key " + key + "\\n");
  await out(result(false, "Authentication failed for key " + key));
  process.exitCode = 3;
} else {
  await out({ type: "assistant", message: { id: "m1", role: "assistant", content: [{ type: "text", text: "Looked around; nothing to change." }], usage: { input_tokens: 10, output_tokens: 5 } }, session_id: "s-1" });
  await out(result(true, "Nothing to change."));
}
`;

const FINAL = new Set(["done", "failed", "pr-open", "cancelled"]);

describe("agents that flood their output, fail, or whose log cannot be written", () => {
  let h: Harness;
  let worker: LocalWorker | undefined;
  let workDir: string;
  // The script travels in argv: the agent's sandbox shows none of the test's files.
  const adapter = (script: string): AgentAdapter => ({
    ...claudeAdapter,
    command: (inv) => ({
      ...claudeAdapter.command(inv),
      file: process.execPath,
      args: ["--input-type=module", "-e", script],
    }),
  });

  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": FLEET_YML } });
    workDir = await mkdtemp(join(tmpdir(), "fleet-agent-output-"));
  });
  afterAll(async () => {
    await worker?.stop();
    await h?.stop();
    if (workDir) await rm(workDir, { recursive: true, force: true });
  });

  it("keeps the log bounded, reports failures without the secret, and survives a full disk", async () => {
    const script = AGENT;
    const flood = await h.newIssue("Flood the log", "MODE-FLOOD");
    const fail = await h.newIssue("Fail loudly", "MODE-FAIL");
    const full = await h.newIssue("Log onto a full disk", "MODE-QUIET");
    for (const n of [flood, fail, full]) await h.label(n, "fleet:claude");
    const byIssue = (tasks: Task[], n: number) => tasks.find((t) => t.issue === n)!;
    const dispatched = await h.tasks();
    expect(dispatched.filter((t) => t.state === "dispatched")).toHaveLength(3);

    // The third task's log lands on a device that is always full: every write fails with ENOSPC.
    const fullDir = taskArtifactsDir(workDir, byIssue(dispatched, full).id);
    await mkdir(fullDir, { recursive: true });
    await symlink("/dev/full", join(fullDir, LOG_FILE));

    const octokit = await botClient(h.gh, h.full);
    worker = startLocalWorker({
      repo: { owner: h.owner, repo: h.name },
      windowBook: new WindowBook(),
      github: githubOverOctokit(octokit),
      store: createGitHubStateStore({ github: githubOverOctokit(octokit), owner: h.owner, repo: h.name }),
      cloneUrl: h.cloneUrl,
      workDir,
      adapterFor: () => adapter(script),
      credentialFor: () => ({ name: "anthropic-team", value: SECRET }),
      concurrency: 3,
      pollMs: 200,
      heartbeatMs: 2_000,
      trackerIntervalMs: 0,
    });
    const tasks = await waitFor(
      "all three tasks to end",
      async () => {
        const t = await h.tasks();
        return [flood, fail, full].every((n) => FINAL.has(byIssue(t, n)?.state)) ? t : undefined;
      },
      50_000,
    );
    await worker.idle();
    await h.app.flush();
    const report = (n: number) => h.botComments(n).find((c) => c.body.includes("fleet:run-report"))?.body;

    // Flood: the run ends cleanly; the log keeps its head and its end, with a note for the middle.
    const floodTask = byIssue(tasks, flood);
    // It changed nothing: no PR, so the task fails with that reason (never done without a merge).
    expect(floodTask.state).toBe("failed");
    expect(floodTask.reason).toMatch(/^No changes, so no pull request\./);
    const floodLog = join(taskArtifactsDir(workDir, floodTask.id), LOG_FILE);
    expect((await stat(floodLog)).size).toBeLessThanOrEqual(DEFAULT_MAX_LOG_BYTES + 4096);
    const logText = await readFile(floodLog, "utf8");
    expect(logText).toContain("flood line 0 ");
    expect(logText).toMatch(/\[fleet\] log truncated: [\d,]+ lines/);
    expect(logText).toContain("FLOOD-LAST-LINE");
    expect(report(flood)).toContain("FLOOD-LAST-LINE");
    expect(report(flood)!.length).toBeLessThanOrEqual(65_536);

    // Non-zero exit: failed (no retries configured), the reason on the issue, the credential nowhere.
    const failTask = byIssue(tasks, fail);
    expect(failTask.state).toBe("failed");
    expect(failTask.reason).toMatch(/Authentication failed|exited with code 3/);
    expect(report(fail)).toMatch(/failed/);
    expect(report(fail)).toContain("Authentication failed");
    const everything = [
      ...[flood, fail, full].flatMap((n) => h.gh.comments(h.full, n).map((c) => c.body)),
      JSON.stringify(await h.tasks()),
    ].join("\n");
    expect(everything).not.toContain(SECRET);
    expect(everything).not.toContain("hostileSECRET");

    // Disk full under the log: the run still ends, the issue says the log is incomplete and why.
    const fullTask = byIssue(tasks, full);
    expect(fullTask.state).toBe("failed");
    expect(fullTask.reason).toMatch(/^No changes, so no pull request\./);
    expect(report(full)).toMatch(/log could not be written \(ENOSPC/);

    // Every slot is free and every worktree is gone.
    const after = await h.tasks();
    expect(after.filter((t) => t.lease)).toHaveLength(0);
    for (const t of after) {
      await expect(stat(worktreePath(workDir, t.id))).rejects.toThrow();
    }
  }, 60_000);
});
