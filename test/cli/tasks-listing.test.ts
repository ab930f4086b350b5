// `fleet tasks`: token figures are marked live only while an agent runs (a dispatched task's log, or
// one under an expired lease, is an earlier run's), and a failure's reason is shown under the table.
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { failureNotes } from "../../src/cli/commands/tasks.ts";
import { taskRow } from "../../src/cli/format.ts";
import { newLease } from "../../src/core/leases.ts";
import { newTask, type Task } from "../../src/core/task.ts";
import { LOG_FILE, taskArtifactsDir } from "../../src/worker/workspace/artifacts.ts";

const NOW = Date.parse("2026-03-01T12:00:00Z");
const usageLine = JSON.stringify({
  type: "assistant",
  message: {
    id: "msg_1",
    role: "assistant",
    content: [{ type: "text", text: "working" }],
    usage: { input_tokens: 500, output_tokens: 40 },
  },
});

describe("fleet tasks rows", () => {
  let workDir: string;
  const base = newTask({
    id: "fl-9",
    repo: "local/r",
    issue: 9,
    title: "Nine",
    coder: "claude",
    model: "sonnet",
    now: "2026-03-01T11:00:00Z",
  });
  beforeAll(async () => {
    workDir = await mkdtemp(join(tmpdir(), "fleet-tasks-rows-"));
    await mkdir(taskArtifactsDir(workDir, base.id), { recursive: true });
    await writeFile(join(taskArtifactsDir(workDir, base.id), LOG_FILE), `${usageLine}\n`);
  });
  afterAll(async () => {
    await rm(workDir, { recursive: true, force: true });
  });

  it("live while the agent runs under a live lease; not once dispatched again or its lease expired", async () => {
    const lease = newLease("local:w:1", 0, new Date(NOW - 60_000));
    const running: Task = { ...base, state: "running", lease };
    const row = await taskRow(running, NOW, workDir);
    expect(row.live).toBe(true);
    expect(row.tokens?.input).toBe(500);

    expect((await taskRow({ ...running, state: "dispatched" }, NOW, workDir)).live).toBe(false);
    const expired = { ...lease, expiresAt: new Date(NOW - 1000).toISOString() };
    expect((await taskRow({ ...running, lease: expired }, NOW, workDir)).live).toBe(false);
  });

  it("a failed row's reason is a line of its own under the table", async () => {
    const failed = await taskRow(
      { ...base, state: "failed", reason: "no credential\nfor Claude" },
      NOW,
      workDir,
    );
    const queued = await taskRow(base, NOW, workDir);
    expect(failureNotes([queued, failed])).toEqual(["fl-9 failed: no credential for Claude"]);
  });
});
