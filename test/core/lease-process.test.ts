// A lease names the process that claimed it; a worker on the same machine may judge that process,
// and a run whose process is gone goes back to the queue once (reclaimGoneRuns).
import { describe, expect, it } from "vitest";
import { canJudgeProcess, claimLease, dispatchHolder, newLease } from "../../src/core/leases.ts";
import { emptyStateDoc, type FleetStateDoc, parseStateDoc } from "../../src/core/state-doc.ts";
import { type LeaseProcess, newTask, type Task } from "../../src/core/task.ts";
import { reclaimGoneRuns } from "../../src/queue/transitions.ts";

const t0 = new Date("2026-01-01T00:00:00Z");
const proc: LeaseProcess = {
  host: "box",
  bootId: "b-1",
  pidNs: "pid:[1]",
  uid: 1000,
  pid: 4242,
  start: "777",
};

const taskIn = (state: Task["state"], holder: string, attempts = 1): Task => ({
  ...newTask({
    id: "fl-1",
    repo: "o/r",
    issue: 1,
    title: "T",
    coder: "claude",
    model: "m",
    now: t0.toISOString(),
  }),
  state,
  attempts,
  lease: { ...newLease(holder, 1, t0), process: proc },
});
const docOf = (task: Task): FleetStateDoc => ({ ...emptyStateDoc(), tasks: { [task.id]: task } });

describe("the process on a lease", () => {
  it("is recorded by the claim, kept in the state document, and dropped by a claim that cannot tell", () => {
    const dispatched = {
      ...taskIn("dispatched", dispatchHolder("local")),
      lease: newLease(dispatchHolder("local"), 1, t0),
    };
    const claimed = claimLease(docOf(dispatched), "fl-1", {
      holder: "local:box:4242",
      now: t0,
      process: proc,
    });
    expect(claimed?.task.lease?.process).toEqual(proc);
    const parsed = parseStateDoc(JSON.stringify(claimed!.doc), "the test", "none");
    expect(parsed.tasks["fl-1"]?.lease?.process).toEqual(proc);
    const again = claimLease(claimed!.doc, "fl-1", { holder: "local:box:4242", now: t0 });
    expect(again?.task.lease?.process).toBeUndefined();
  });

  it("is judged only on its own machine, boot, PID namespace and user", () => {
    const lease = taskIn("running", "w").lease!;
    expect(canJudgeProcess(lease, { ...proc, pid: 1, start: "1" })).toBe(true);
    for (const other of [{ host: "elsewhere" }, { bootId: "b-2" }, { pidNs: "pid:[2]" }, { uid: 0 }])
      expect(canJudgeProcess(lease, { ...proc, ...other })).toBe(false);
    expect(canJudgeProcess({ ...lease, process: undefined }, proc)).toBe(false);
  });
});

describe("reclaimGoneRuns", () => {
  const now = "2026-01-01T00:05:00.000Z";

  it("sends the run back to the queue at once, once, and fails it with no retries left", () => {
    const r = reclaimGoneRuns(
      docOf(taskIn("running", "local:box:4242")),
      [{ taskId: "fl-1", holder: "local:box:4242" }],
      {
        now,
        retriesMax: 2,
      },
    );
    expect(r?.doc.tasks["fl-1"]).toMatchObject({ state: "queued", attempts: 1 });
    expect(r?.doc.tasks["fl-1"]?.lease).toBeUndefined();
    expect(r?.doc.tasks["fl-1"]?.resetAt).toBeUndefined();
    expect(r?.doc.tasks["fl-1"]?.reason).toBe(
      "its worker local:box:4242 ended without finishing the run; retrying",
    );
    // A second worker that saw it gone too changes nothing.
    expect(
      reclaimGoneRuns(r!.doc, [{ taskId: "fl-1", holder: "local:box:4242" }], { now, retriesMax: 2 }),
    ).toBeNull();

    const last = reclaimGoneRuns(docOf(taskIn("planning", "w", 3)), [{ taskId: "fl-1", holder: "w" }], {
      now,
      retriesMax: 2,
    });
    expect(last?.doc.tasks["fl-1"]).toMatchObject({
      state: "failed",
      reason: "its worker w ended without finishing the run; no retries left",
    });
  });

  it("leaves a task another holder has claimed since, or one no longer running", () => {
    expect(
      reclaimGoneRuns(docOf(taskIn("running", "new")), [{ taskId: "fl-1", holder: "old" }], {
        now,
        retriesMax: 2,
      }),
    ).toBeNull();
    expect(
      reclaimGoneRuns(docOf(taskIn("pr-open", "old")), [{ taskId: "fl-1", holder: "old" }], {
        now,
        retriesMax: 2,
      }),
    ).toBeNull();
  });
});
