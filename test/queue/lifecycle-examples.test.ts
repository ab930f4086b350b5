// Sequences the lifecycle model (lifecycle-model.test.ts) found, shrunk, kept as plain tests: each
// runs against the real queue with every invariant checked after every step, then says what it is about.
import { describe, expect, it } from "vitest";
import { claimTaskState } from "../../src/worker/1-claim.ts";
import {
  Advance,
  Beat,
  CloseIssue,
  ClosePr,
  Command,
  ConfigSet,
  Crash,
  Finish,
  FinishLate,
  Label,
  LabelSplit,
  Land,
  Merge,
  Partition,
  Poll,
  RebaseLabel,
  Review,
  runSteps,
  Shutdown,
  TTL_MS,
  Unlabel,
  type World,
} from "./lifecycle-world.ts";

const tasksOf = async (w: World, issue?: number) =>
  Object.values((await w.doc()).tasks).filter((t) => issue === undefined || t.issue === issue);
const only = async (w: World, issue: number) => {
  const [t, ...more] = await tasksOf(w, issue);
  expect(more).toHaveLength(0);
  return t!;
};

describe("runs that change nothing", () => {
  it("a first run with no change fails with the reason (retryable), it is never done without a PR", async () => {
    const w = await runSteps([new Label(1, 0, 0), new Poll(0), new Finish(0, "no-change")]);
    const t = await only(w, 1);
    expect(t.state).toBe("failed");
    expect(t.reason).toBe(
      "No changes, so no pull request. The agent changed no files. Comment `/fleet retry` to run it again.",
    );
    expect(t.reason).toContain("/fleet retry");
    expect(t.result?.noChanges).toBe(true);
    // A person may run it again.
    await new Command(1, "retry").run({}, w);
    expect(["queued", "dispatched"]).toContain((await only(w, 1)).state);
  });

  it("a review round with no change leaves the task on its open PR, with a note, and its dependents blocked", async () => {
    const w = await runSteps([
      new Label(1, 0, 0),
      new Label(3, 0),
      new Poll(0),
      new Finish(0, "change"),
      new Review(0),
      new Poll(0),
      new Finish(0, "no-change"),
    ]);
    const t = await only(w, 1);
    expect(t.state).toBe("pr-open");
    expect(t.reason).toBe(
      "The round ended without changes; the pull request is as it was. The agent changed no files.",
    );
    expect(t.instructions).toBeUndefined();
    expect((await only(w, 3)).state).toBe("blocked");
    expect(t.runs?.map((r) => r.kind)).toEqual(["work", "review"]);
  });
});

describe("merges", () => {
  it("a merge while a review round waits for its run ends the task as done", async () => {
    const w = await runSteps([
      new Label(1, 0, 0),
      new Poll(0),
      new Finish(0, "change"),
      new Review(0),
      new Merge(0, false),
    ]);
    expect((await only(w, 1)).state).toBe("done");
  });

  it("a merge after a cancel ends the task as done (its dependents start)", async () => {
    const w = await runSteps([
      new Label(1, 0, 0),
      new Label(3, 0),
      new Poll(0),
      new Finish(0, "change"),
      new Command(1, "cancel"),
      new Merge(0, false),
    ]);
    expect((await only(w, 1)).state).toBe("done");
    expect(["queued", "dispatched"]).toContain((await only(w, 3)).state);
  });

  it("a merge of the PR an earlier run opened ends the task as done while its new plan awaits approval", async () => {
    // The first run (before plan_approval) opened a PR; a cancel and a new label started a second run,
    // whose plan now waits for approval; a person merges the first PR.
    const w = await runSteps(
      [
        new Label(1, 2, 0),
        new Poll(0),
        new ConfigSet(5),
        new Finish(0, "change"),
        new Command(1, "cancel"),
        new Label(1, 2, 0),
        new Poll(0),
        new Finish(0, "change"),
      ],
      "phase",
    );
    expect((await only(w, 1)).state).toBe("awaiting-approval");
    await new Merge(0, false).run({}, w);
    expect((await only(w, 1)).state).toBe("done");
  });

  it("a run whose PR was merged while it ran is counted once, and moves nothing", async () => {
    const w = await runSteps([
      new Label(1, 0, 0),
      new Poll(0),
      new Finish(0, "change"),
      new Review(0),
      new Poll(0),
      new Merge(0, false),
      new Beat(0),
    ]);
    const t = await only(w, 1);
    expect(t.state).toBe("done");
    expect(t.runs?.map((r) => r.kind)).toEqual(["work", "review"]);
    const day = Object.values((await w.doc()).ledger)[0]!;
    expect(day.claude?.runs).toBe(2);
  });

  it("a merged PR ends every task that worked on it: an ended task's PR taken over by the issue's next task", async () => {
    const w = await runSteps([
      new ConfigSet(8),
      new Label(2, 1, 0),
      new Poll(0),
      new Finish(0, "change"),
      new Review(0),
      // Nobody claims the review round: its lease runs out, and with no retries the task fails, its PR open.
      new Advance(60),
      new Label(2, 0, 0),
      new Poll(0),
      new Finish(0, "change"),
      new Merge(0, false),
    ]);
    const tasks = await tasksOf(w, 2);
    expect(tasks).toHaveLength(2);
    for (const t of tasks) expect(t).toMatchObject({ state: "done", pr: tasks[0]!.pr });
  });

  it("after one A/B side is merged, the other side gets no rebase run and stays on its PR", async () => {
    const w = await runSteps([
      new Label(1, 0, 0),
      new Label(1, 2, 0),
      new Poll(0),
      new Finish(0, "change"),
      new Finish(0, "change"),
      new Merge(0, true),
    ]);
    const [merged, other] = (await tasksOf(w, 1)).sort((a, b) => a.state.localeCompare(b.state));
    expect(merged?.state).toBe("done");
    expect(other).toMatchObject({ state: "pr-open" });
    expect(other?.rebase).toBeUndefined();
  });

  it("a Fleet PR of another issue that conflicts after a merge gets its rebase run", async () => {
    const w = await runSteps([
      new Label(1, 0, 0),
      new Label(2, 0, 0),
      new Poll(0),
      new Finish(0, "change"),
      new Finish(0, "change"),
      new Merge(0, true),
    ]);
    const waiting = (await tasksOf(w)).find((t) => t.state !== "done")!;
    expect(waiting.rebase?.why).toMatch(/was merged into `main`/);
  });
});

describe("what each run was, and what it cost", () => {
  it("a plan waiting for approval is a plan run; the work after approval is one more run; totals are their sum", async () => {
    const w = await runSteps(
      [
        new Label(1, 0, 0),
        new Poll(0),
        new Finish(0, "change"),
        new Command(1, "approve"),
        new Poll(0),
        new Finish(0, "change"),
      ],
      "approval",
    );
    const t = await only(w, 1);
    expect(t.state).toBe("pr-open");
    expect(t.runs?.map((r) => r.kind)).toEqual(["plan", "work"]);
    expect(t.totals?.usage.input).toBe(t.runs!.reduce((a, r) => a + r.totals.usage.input, 0));
  });

  it("a task's totals are the sum of its runs, not its last run's", async () => {
    const w = await runSteps([
      new Label(1, 0, 0),
      new Poll(0),
      new Finish(0, "change"),
      new RebaseLabel(0),
      new Poll(1),
      new Shutdown(3),
    ]);
    const t = await only(w, 1);
    expect(t.runs).toHaveLength(2);
    expect(t.totals?.usage.input).toBe(t.runs![0]!.totals.usage.input + t.runs![1]!.totals.usage.input);
  });

  it("a retried review round keeps its instructions", async () => {
    const w = await runSteps([
      new Label(1, 0, 0),
      new Poll(0),
      new Finish(0, "change"),
      new Review(0),
      new Poll(0),
      new Finish(0, "failed"),
    ]);
    const t = await only(w, 1);
    expect(["queued", "dispatched"]).toContain(t.state);
    expect(t.instructions).toMatch(/^Rename it/);
  });

  it("a review round that fails for good leaves the task on its PR, with the reason", async () => {
    const w = await runSteps([
      new Label(1, 0, 0),
      new Poll(0),
      new Finish(0, "change"),
      new Review(0),
      new Poll(0),
      new Finish(0, "over-budget"),
    ]);
    const t = await only(w, 1);
    expect(t.state).toBe("pr-open");
    expect(t.reason).toBe(
      "The round ended (over-budget); the pull request is as it was. stopped: over the per-task ceiling.",
    );
  });
});

describe("splits", () => {
  it("a split is done once its plan is applied; the epic's dependents wait for its sub-issues", async () => {
    const w = await runSteps([new LabelSplit(1), new Label(3, 0), new Poll(0), new Finish(0, "change")]);
    const split = await only(w, 1);
    expect(split.state).toBe("done");
    expect(split.runs?.map((r) => r.kind)).toEqual(["split"]);
    expect((await tasksOf(w)).filter((t) => t.epic === 1)).toHaveLength(2);
    expect((await only(w, 3)).state).toBe("blocked");
  });

  it("a dependent that started while its dependency was done stays started when that issue is split afterwards", async () => {
    const w = await runSteps([
      new Label(1, 2, 0),
      new LabelSplit(1),
      new Poll(0),
      new Label(3, 0, 0),
      new Finish(0, "change"),
      new Merge(0, false),
      new Finish(0, "change"),
    ]);
    // Started: the first run's end dispatched it, and its worker claimed it in the same commit.
    expect(await only(w, 3)).toMatchObject({ state: "running", lease: { holder: w.workers[0]!.name } });
    // Issue 1 is an epic now: a dependent queued from here on waits for its sub-issues.
    expect((await tasksOf(w)).filter((t) => t.epic === 1)).toHaveLength(2);
  });
});

describe("workers", () => {
  it("a worker that reports after its lease expired and another worker took the task moves nothing", async () => {
    const w = await runSteps([
      new Label(1, 0, 0),
      new Poll(0),
      new Partition(0, false),
      new Advance(20),
      new Advance(3),
      new Poll(1),
      new Finish(0, "change"),
    ]);
    const t = await only(w, 1);
    expect(t.state).toBe("running");
    expect(t.lease?.holder).toBe(w.workers[1]!.name);
    // The late run is counted all the same: its tokens were spent.
    expect(t.runs).toHaveLength(1);
  });

  it("a task queued again while its cancelled run still goes starts once that run has stopped, never beside it", async () => {
    const w = await runSteps([
      new LabelSplit(2),
      new Poll(0),
      new CloseIssue(2),
      new LabelSplit(2),
      new Poll(3),
    ]);
    const waiting = await only(w, 2);
    expect(waiting).toMatchObject({ state: "queued", stopping: { holder: w.workers[0]!.name } });
    // The old run's worker hears of the cancel at its heartbeat and says its run stopped: the task starts,
    // dispatched and claimed by that worker (its slot free again) in the same commit.
    await new Beat(0).run({}, w);
    expect(await only(w, 2)).toMatchObject({ state: "running", lease: { holder: w.workers[0]!.name } });
    expect((await only(w, 2)).stopping).toBeUndefined();
  });

  it("a worker cut off from the state publishes nothing when its run ends: it cannot confirm it still holds the task", async () => {
    const w = await runSteps([
      new ConfigSet(0),
      new Label(1, 0, 0),
      new Poll(0),
      new Label(1, 2, 0),
      // The first run's end hands the second task to the same worker, which is then cut off.
      new Finish(0, "no-change"),
      new Partition(0, false),
      new Advance(24 * 60),
      new Finish(0, "change"),
      new Merge(0, false),
    ]);
    // No PR was opened by the late run, so nothing was merged and nothing is done.
    expect(w.prs.size).toBe(0);
    expect((await tasksOf(w, 1)).filter((t) => t.state === "done" || t.pr !== undefined)).toEqual([]);
  });

  it("a run known to be over (its Actions run ended unreported) leaves nothing to wait for; a cancel does", async () => {
    const w = await runSteps([new Label(1, 0, 0), new Label(2, 0, 0)]);
    const [one, two] = [await only(w, 1), await only(w, 2)];
    for (const t of [one, two])
      await claimTaskState(w.store, t.id, "actions:run", w.clock(), TTL_MS, () => "running");
    await w.queue.move(1, "queued", { taskId: one.id, reason: "the Actions run ended", runOver: true });
    expect((await only(w, 1)).stopping).toBeUndefined();
    await w.queue.move(2, "cancelled", { taskId: two.id, reason: "cancelled by @mona" });
    expect((await only(w, 2)).stopping).toMatchObject({ holder: "actions:run" });
  });

  it("a review round whose agent asked a question fails when its PR is closed: nothing is left to answer for", async () => {
    const w = await runSteps([
      new Label(1, 0, 0),
      new Poll(0),
      new Finish(0, "change"),
      new Review(0),
      new Poll(0),
      new Finish(0, "asked"),
    ]);
    expect((await only(w, 1)).state).toBe("waiting");
    await new ClosePr(0).run({}, w);
    expect((await only(w, 1)).state).toBe("failed");
  });

  it("a PR closed while a review round runs fails the task; the round's end changes nothing", async () => {
    const w = await runSteps([
      new Label(1, 0, 0),
      new Poll(0),
      new Finish(0, "change"),
      new Review(0),
      new Poll(0),
      new ClosePr(0),
      new Finish(0, "change"),
    ]);
    expect((await only(w, 1)).state).toBe("failed");
  });
});

describe("a run's end on its way (a commit losing its races, landing within the lease)", () => {
  it("a merge of a PR its run's end has not recorded yet is the running task's, not the one that only kept its branch", async () => {
    // The split's task is dispatched on the issue's branch and its dispatch runs out (failed, no retries);
    // opus's task is dispatched next and takes the branch over, and a person's relabel queues the split's
    // task again, its branch kept. Opus's PR merged before opus's end recorded it was matched by the
    // branch to the split's task, which had not run, and made it done (the model found it).
    const w = await runSteps([
      new LabelSplit(2),
      new ConfigSet(0),
      new ConfigSet(8),
      new Label(2, 1, 0),
      new Advance(1440),
      new Poll(0),
      new Label(2, 0, 0),
      new FinishLate(0, "change"),
      new Merge(0, false),
    ]);
    const byModel = async (model: string) => (await tasksOf(w, 2)).find((t) => t.model === model)!;
    expect(await byModel("opus")).toMatchObject({ state: "done", pr: 501 });
    expect((await byModel("sonnet")).state).not.toBe("done");
    // The end lands on a task already done: the run is recorded, the state stays.
    await new Land(0).run({}, w);
    const landed = (await tasksOf(w, 2)).find((t) => t.model === "opus")!;
    expect(landed.state).toBe("done");
    expect(landed.runs).toHaveLength(1);
  });

  it("a merged PR no task recorded is its opener's, cancelled meanwhile, not the task made after it that took its branch over", async () => {
    // Opus's run opened its PR; a cancel came while its end was on its way, and a relabel queued claude's
    // task, which took the ended task's branch over. The PR merged: claude's task, dispatched but not run,
    // was made done (the model found it).
    const w = await runSteps([
      new Label(2, 1, 0),
      new Poll(0),
      new FinishLate(0, "change"),
      new Command(2, "cancel"),
      new Label(2, 0, 0),
      new Merge(0, false),
    ]);
    const byModel = async (model: string) => (await tasksOf(w, 2)).find((t) => t.model === model)!;
    expect((await byModel("sonnet")).state).not.toBe("done");
    expect(await byModel("opus")).toMatchObject({ state: "done", pr: 501 });
    await new Land(0).run({}, w);
    expect((await byModel("opus")).state).toBe("done");
  });

  it("a merged PR no task recorded is not matched to a task made after it that took its branch over and runs", async () => {
    // Codex's run on #2 opened its PR; the codex label came off while its end was on its way, and claude's
    // task, dispatched after that, took the branch over and is running. The PR merged: claude's running
    // task was made done, its agent still at work (the model found it).
    const w = await runSteps([
      new Label(2, 2, 0),
      new ConfigSet(0),
      new Poll(0),
      new FinishLate(0, "change"),
      new Advance(1),
      new Label(2, 0, 0),
      new Unlabel(2, 2),
      new Poll(0),
    ]);
    const byCoder = async (coder: string) => (await tasksOf(w, 2)).find((t) => t.coder === coder)!;
    expect((await byCoder("claude")).state).toBe("running");
    expect((await byCoder("claude")).branch).toBe((await byCoder("codex")).branch);
    await new Merge(0, false).run({}, w);
    expect((await byCoder("claude")).state).toBe("running");
    expect((await byCoder("codex")).state).toBe("done");
  });

  it("a PR whose run's end never landed (the worker killed, or the end given up at its lease's end): its merge makes the task done", async () => {
    for (const after of [new Crash(0), new Advance(20)]) {
      const w = await runSteps([new Label(1, 0, 0), new Poll(0), new FinishLate(0, "change"), after]);
      expect((await only(w, 1)).pr).toBeUndefined();
      await new Merge(0, false).run({}, w);
      expect(await only(w, 1)).toMatchObject({ state: "done", pr: 501 });
    }
  });

  it("a PR taken over and published to by the issue's next task is that task's when it merges (the marker names the last publisher)", async () => {
    const w = await runSteps([
      new Label(2, 1, 0),
      new Poll(0),
      new FinishLate(0, "change"),
      new Crash(0),
      new Command(2, "cancel"),
      new Label(2, 0, 0),
      new Advance(20),
      new Poll(0),
      new Poll(1),
      new Advance(20),
      new Poll(0),
      new Poll(1),
      new Finish(0, "change"),
      new Merge(0, false),
    ]);
    const byModel = async (model: string) => (await tasksOf(w, 2)).find((t) => t.model === model)!;
    expect(await byModel("sonnet")).toMatchObject({ state: "done", pr: 501 });
  });

  it("an end given up at its lease's end leaves the task to be dispatched again; it never lands after", async () => {
    const w = await runSteps([new Label(1, 0, 0), new Poll(0), new FinishLate(0, "change"), new Advance(20)]);
    const t = await only(w, 1);
    expect(["queued", "dispatched"]).toContain(t.state);
    expect(t.lease?.holder ?? "").not.toMatch(/^local:/);
    expect(t.runs ?? []).toHaveLength(0);
    expect(w.endingAt(0)).toBeUndefined();
  });
});
