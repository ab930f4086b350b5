import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { parseFleetConfig } from "../../src/core/config.ts";
import type { Dispatcher } from "../../src/queue/dispatcher.ts";
import { createRepoQueue } from "../../src/queue/repo-queue.ts";
import { createLocalStateStore } from "../../src/state/local-store.ts";
import type { StateStore } from "../../src/state/store.ts";

const NOW = "2026-03-01T10:00:00.000Z";

/** A task for each issue, queued one after another. */
async function enqueueIssues(queue: ReturnType<typeof createRepoQueue>, issues: number[]) {
  for (const issue of issues)
    await queue.enqueue({
      issue,
      title: `Task ${issue}`,
      body: "Do it.",
      coder: "claude",
      model: "sonnet",
      priority: 2,
      dependsOn: [],
      requestedBy: "mona",
    });
}

describe("starting the runs of a burst of dispatches", () => {
  let home: string;
  beforeEach(async () => {
    home = await mkdtemp(join(tmpdir(), "fleet-start-runs-"));
  });
  afterEach(async () => rm(home, { recursive: true, force: true }));

  /**
   * Three tasks under a cap of one (#1 takes the slot), then the cap raised: #2 and #3 start in one
   * burst. `whileThirdStarts` runs as #3's run starts, before the burst's runs are recorded. The tasks after.
   */
  async function burstOfThree(
    whileThirdStarts: (
      queue: ReturnType<typeof createRepoQueue>,
      local: ReturnType<typeof createLocalStateStore>,
    ) => Promise<void>,
  ) {
    const parsed = parseFleetConfig("max_concurrent: 10\n");
    if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
    const local = createLocalStateStore({ home, clock: () => new Date(NOW) });
    let runs = 0;
    let queue: ReturnType<typeof createRepoQueue>;
    const dispatcher: Dispatcher = {
      mode: "actions",
      async start(task) {
        const runId = `run-${++runs}`;
        if (task.issue === 3) await whileThirdStarts(queue, local);
        return { runId };
      },
      stop: async () => {},
    };
    queue = createRepoQueue({
      repo: "octo/widgets",
      store: local,
      fileConfig: parsed.config,
      dispatcher,
      clock: () => new Date(NOW),
    });
    expect((await queue.setConfig([{ key: "max_concurrent", value: 1 }], "mona")).ok).toBe(true);
    await enqueueIssues(queue, [1, 2, 3]);
    expect((await queue.setConfig([{ key: "max_concurrent", value: 4 }], "mona")).ok).toBe(true);
    return Object.values((await local.read()).doc.tasks).sort((a, b) => a.issue - b.issue);
  }

  it("records every run of the burst, and fails the start that failed, in one commit", async () => {
    const parsed = parseFleetConfig("max_concurrent: 10\n");
    if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
    const local = createLocalStateStore({ home, clock: () => new Date(NOW) });
    // The commits' messages, in order: only mutations that changed the state commit.
    const commits: string[] = [];
    const store: StateStore = {
      read: (o) => local.read(o),
      update: (mutation, o) =>
        local.update((s) => {
          const out = mutation(s);
          if (out) commits.push(out.message);
          return out;
        }, o),
    };
    const starts: string[] = [];
    const dispatcher: Dispatcher = {
      mode: "actions",
      async start(task) {
        starts.push(task.id);
        if (task.issue === 3) throw new Error("GitHub answered 500");
        return { runId: `${1000 + task.issue}`, runUrl: `https://example.test/runs/${1000 + task.issue}` };
      },
      stop: async () => {},
    };
    const queue = createRepoQueue({
      repo: "octo/widgets",
      store,
      fileConfig: parsed.config,
      dispatcher,
      clock: () => new Date(NOW),
    });
    expect((await queue.setConfig([{ key: "max_concurrent", value: 1 }], "mona")).ok).toBe(true);
    await enqueueIssues(queue, [1, 2, 3, 4]);
    const before = commits.length;
    // Raising the cap dispatches three queued tasks in one commit: their runs start one by one.
    expect((await queue.setConfig([{ key: "max_concurrent", value: 4 }], "mona")).ok).toBe(true);
    expect(starts).toHaveLength(4);

    const after = commits.slice(before);
    expect(after).toHaveLength(2);
    expect(after[1]).toContain("run 1002 started for gh-2");
    expect(after[1]).toContain("run 1004 started for gh-4");
    expect(after[1]).toMatch(/gh-3.*failed|failed.*gh-3/);
    const tasks = Object.values((await local.read()).doc.tasks).sort((a, b) => a.issue - b.issue);
    expect(tasks.map((t) => [t.issue, t.state, t.runId])).toEqual([
      [1, "dispatched", "1001"],
      [2, "dispatched", "1002"],
      [3, "failed", undefined],
      [4, "dispatched", "1004"],
    ]);
    expect(tasks[2]!.reason).toBe("could not start the run: GitHub answered 500");
    expect(tasks[3]!.runUrl).toBe("https://example.test/runs/1004");
  });

  it("writes no run of a start onto the task's next dispatch", async () => {
    // While #3 starts, #2 (started, its run not recorded yet) is cancelled and retried, so it is
    // dispatched again, a new attempt with a run of its own.
    const tasks = await burstOfThree(async (queue) => {
      await queue.move(2, "cancelled", { from: ["dispatched"] });
      await queue.move(2, "queued", { from: ["cancelled"] });
    });
    expect(tasks.map((t) => [t.issue, t.state, t.attempts, t.runId])).toEqual([
      [1, "dispatched", 1, "run-1"],
      // #2's second dispatch keeps its own run (run-4: numbered as #3's start began), not run-2 of the
      // attempt that was cancelled.
      [2, "dispatched", 2, "run-4"],
      [3, "dispatched", 1, "run-3"],
    ]);
  });

  // An attempt given back (a run that failed before its agent: the worker lacked the coder) is counted
  // again by the task's next dispatch: the same attempt number, another dispatch (its lease's time).
  it("writes no run of a start onto a later dispatch of the same attempt number", async () => {
    // While #3 starts, #2 (started, its run not recorded yet) is dispatched anew under the same attempt
    // number: its lease is another dispatch's.
    const tasks = await burstOfThree(async (_queue, local) => {
      await local.update(({ doc }) => {
        const two = Object.values(doc.tasks).find((t) => t.issue === 2)!;
        const at = "2026-03-01T10:05:00.000Z";
        const lease = { ...two.lease!, acquiredAt: at, heartbeatAt: at };
        return { doc: { ...doc, tasks: { ...doc.tasks, [two.id]: { ...two, lease } } }, message: "again" };
      });
    });
    expect(tasks.map((t) => [t.issue, t.state, t.attempts, t.runId])).toEqual([
      [1, "dispatched", 1, "run-1"],
      // run-2 was started for #2's earlier dispatch: the later one of the same attempt is not its.
      [2, "dispatched", 1, undefined],
      [3, "dispatched", 1, "run-3"],
    ]);
  });
});
