import { describe, expect, it } from "vitest";
import {
  beadFromTask,
  fleetMetaOf,
  issueNumberOf,
  parseJsonl,
  readyIssues,
  rewriteJsonl,
  serializeIssue,
} from "../../src/beads/index.ts";
import { newTask, type Task } from "../../src/core/task.ts";

const NOW = "2026-03-01T10:00:00Z";
const task = (over: Partial<Task> = {}): Task => ({
  ...newTask({
    id: "fl-a1b2",
    repo: "acme/app",
    issue: 12,
    title: "Add login",
    coder: "claude",
    model: "opus",
    now: NOW,
  }),
  ...over,
});

describe("beadFromTask / fleetMetaOf", () => {
  it("maps a queued task to an open bead with external_ref gh-<n> and metadata.fleet", () => {
    const bead = beadFromTask(task(), { createdBy: "fleet[bot]" });
    expect(bead).toMatchObject({
      id: "fl-a1b2",
      title: "Add login",
      status: "open",
      priority: 2,
      issue_type: "task",
      external_ref: "gh-12",
      created_by: "fleet[bot]",
    });
    expect(issueNumberOf(bead)).toBe(12);
    expect(fleetMetaOf(bead)).toEqual({
      repo: "acme/app",
      issue: 12,
      coder: "claude",
      model: "opus",
      state: "queued",
      attempts: 0,
      queuedAt: NOW,
    });
    expect(serializeIssue(bead)).toBe(
      '{"id":"fl-a1b2","title":"Add login","status":"open","priority":2,"issue_type":"task","created_at":"2026-03-01T10:00:00Z","created_by":"fleet[bot]","updated_at":"2026-03-01T10:00:00Z","external_ref":"gh-12","metadata":{"fleet":{"repo":"acme/app","issue":12,"coder":"claude","model":"opus","state":"queued","attempts":0,"queuedAt":"2026-03-01T10:00:00Z"}}}',
    );
  });

  it("keeps the existing bead's other fields and metadata", () => {
    const existing = beadFromTask(task());
    existing.labels = ["ui"];
    existing.metadata = { ...existing.metadata, other: { x: 1 } };
    existing.zz = "kept";
    const running = beadFromTask(
      task({ state: "running", attempts: 1, updatedAt: "2026-03-01T11:00:00Z", branch: "fleet/12" }),
      {
        existing,
      },
    );
    expect(running).toMatchObject({
      status: "in_progress",
      labels: ["ui"],
      zz: "kept",
      started_at: "2026-03-01T11:00:00Z",
    });
    expect(running.metadata?.other).toEqual({ x: 1 });
    expect(fleetMetaOf(running)).toMatchObject({ state: "running", attempts: 1, branch: "fleet/12" });
  });

  it("closes done and cancelled tasks, keeps failed ones blocking", () => {
    const done = beadFromTask(task({ state: "done", pr: 40, updatedAt: "2026-03-02T00:00:00Z" }));
    expect(done).toMatchObject({ status: "closed", closed_at: "2026-03-02T00:00:00Z", close_reason: "done" });
    expect(beadFromTask(task({ state: "cancelled", reason: "dup" }))).toMatchObject({
      status: "closed",
      close_reason: "cancelled: dup",
    });
    const failed = beadFromTask(task({ state: "failed" }));
    expect(failed.status).toBe("blocked");
    expect(failed.closed_at).toBeUndefined();
  });

  it("defers a rate-limited task until its reset", () => {
    const bead = beadFromTask(task({ state: "rate-limited", resetAt: "2026-03-01T12:00:00Z" }));
    expect(bead).toMatchObject({ status: "open", defer_until: "2026-03-01T12:00:00Z" });
    expect(readyIssues([bead], { now: "2026-03-01T11:00:00Z" })).toEqual([]);
    expect(beadFromTask(task(), { existing: bead }).defer_until).toBeUndefined();
  });

  it("turns dependsOn into blocks dependencies and drops the ones no longer wanted", () => {
    const ids = new Map([
      [7, "fl-dep7"],
      [8, "fl-dep8"],
    ]);
    const beadIdForIssue = (n: number) => ids.get(n);
    const first = beadFromTask(task({ dependsOn: [7, 8, 99] }), { beadIdForIssue });
    expect(first.dependencies?.map((d) => [d.depends_on_id, d.type])).toEqual([
      ["fl-dep7", "blocks"],
      ["fl-dep8", "blocks"],
    ]);
    first.dependencies!.push({
      issue_id: "fl-a1b2",
      depends_on_id: "fl-epic",
      type: "parent-child",
      created_at: NOW,
    });
    const second = beadFromTask(task({ dependsOn: [8] }), { existing: first, beadIdForIssue });
    expect(second.dependencies?.map((d) => d.depends_on_id)).toEqual(["fl-dep8", "fl-epic"]);
    const dep8 = (state: Task["state"]) => beadFromTask(task({ id: "fl-dep8", issue: 8, state }));
    expect(readyIssues([second, dep8("queued")]).map((i) => i.id)).toEqual(["fl-dep8"]);
    expect(readyIssues([second, dep8("failed")]).map((i) => i.id)).toEqual([]);
    expect(readyIssues([second, dep8("done")]).map((i) => i.id)).toEqual(["fl-a1b2"]);
  });

  it("ignores metadata that is not Fleet's", () => {
    expect(
      fleetMetaOf({ id: "x", title: "x", priority: 2, created_at: NOW, updated_at: NOW }),
    ).toBeUndefined();
    expect(
      fleetMetaOf({
        id: "x",
        title: "x",
        priority: 2,
        created_at: NOW,
        updated_at: NOW,
        metadata: { fleet: { repo: 1 } },
      }),
    ).toBeUndefined();
  });

  it("survives a write and read through the JSONL file", () => {
    const bead = beadFromTask(task({ state: "pr-open", pr: 41, attempts: 2 }));
    const text = rewriteJsonl("", { upsert: [bead] });
    const [record] = parseJsonl(text).records;
    expect(fleetMetaOf(record!.issue)).toEqual(fleetMetaOf(bead));
    expect(
      rewriteJsonl(text, { upsert: [beadFromTask(task({ state: "pr-open", pr: 41, attempts: 2 }))] }),
    ).toBe(text);
  });
});
