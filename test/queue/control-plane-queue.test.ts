import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type DroppedOverride, defaultFleetConfig, parseFleetConfig } from "../../src/core/config.ts";
import { promptPinDigest } from "../../src/core/prompt-pin.ts";
import { emptyStateDoc } from "../../src/core/state-doc.ts";
import { syncBeads } from "../../src/queue/beads-sync.ts";
import { localDispatcher } from "../../src/queue/dispatcher.ts";
import { createRepoQueue } from "../../src/queue/repo-queue.ts";
import type { Tracker } from "../../src/queue/tracker.ts";
import { enqueueTask, noteIgnoredEdit, repinTasks } from "../../src/queue/transitions.ts";
import { renderTrackingComment, type TrackingView } from "../../src/render/tracking-comment.ts";
import { createLocalStateStore } from "../../src/state/local-store.ts";
import { pinnedTextOf } from "../../src/state/mirror.ts";

const NOW = "2026-03-01T10:00:00.000Z";
const input = {
  repo: "octo/widgets",
  issue: 7,
  title: "Add a cache",
  coder: "claude",
  model: "sonnet",
  priority: 2 as const,
  dependsOn: [],
  requestedBy: "mona",
  now: NOW,
};

describe("pinned prompts in transitions and the beads mirror", () => {
  it("pins title and body when a task is queued, and keeps the text in its bead", () => {
    const r = enqueueTask(emptyStateDoc(), { ...input, body: "Cache widgets.\r\nFor 60 s." });
    expect(r.task.pin).toEqual({
      sha256: promptPinDigest("Add a cache", "Cache widgets.\nFor 60 s."),
      at: NOW,
      by: "mona",
    });
    const beads = syncBeads("", [r.task], [r.task], r.pinned);
    expect(pinnedTextOf(beads, r.task.id)).toEqual({
      title: "Add a cache",
      description: "Cache widgets.\nFor 60 s.",
    });
    // A later transition of the task leaves the bead's text alone.
    const moved = { ...r.task, state: "dispatched" as const };
    expect(pinnedTextOf(syncBeads(beads, [moved], [moved]), r.task.id)?.description).toBe(
      "Cache widgets.\nFor 60 s.",
    );
    // A task queued without its body (an older caller) has no pin.
    expect(enqueueTask(emptyStateDoc(), input).task.pin).toBeUndefined();
  });

  it("notes an outsider's edit without moving the pin, and re-pins on a maintainer's", () => {
    const { doc, task } = enqueueTask(emptyStateDoc(), { ...input, body: "v1" });
    const edit = {
      title: "Add a cache",
      body: "v2 by mallory",
      by: "mallory",
      now: "2026-03-01T11:00:00.000Z",
    };
    const noted = noteIgnoredEdit(doc, 7, edit)!;
    expect(noted.doc.tasks[task.id]?.pin).toEqual({
      ...task.pin,
      ignoredEdit: { by: "mallory", at: edit.now },
    });
    expect(noted.pinned).toBeUndefined();
    // The same outsider again: nothing new to record.
    expect(noteIgnoredEdit(noted.doc, 7, edit)).toBeNull();
    // Edited back to the pinned text: the note goes.
    const back = noteIgnoredEdit(noted.doc, 7, { ...edit, body: "v1" })!;
    expect(back.doc.tasks[task.id]?.pin).toEqual(task.pin);

    const repinned = repinTasks(noted.doc, 7, {
      ...edit,
      title: "Add a bigger cache",
      body: "v3",
      by: "mona",
    })!;
    const t = repinned.doc.tasks[task.id]!;
    expect(t.pin).toEqual({ sha256: promptPinDigest("Add a bigger cache", "v3"), at: edit.now, by: "mona" });
    expect(t.title).toBe("Add a bigger cache");
    expect(repinned.pinned).toEqual({ [task.id]: { title: "Add a bigger cache", body: "v3" } });
    expect(
      repinTasks(repinned.doc, 7, { ...edit, title: "Add a bigger cache", body: "v3", by: "mona" }),
    ).toBeNull();
  });

  it("the tracking comment notes the ignored edit without a ping, and shows sandbox: none", () => {
    const view: TrackingView = {
      taskKey: "fl-a1",
      state: "queued",
      coder: "claude",
      model: "sonnet",
      priority: 2,
      promptEditedBy: "mallory",
      sandbox: "none",
      reason: "cancelled by @mona: ask @carol",
    };
    const body = renderTrackingComment(view);
    expect(body).toContain(
      "The description was edited by `@mallory` (no write access) after the task was queued; the agent gets the text as it was queued.",
    );
    expect(body).toContain("| Sandbox | **none**");
    expect(body).toContain("cancelled by `@mona`: ask `@carol`");
    expect(renderTrackingComment({ ...view, sandbox: "bubblewrap", promptEditedBy: undefined })).not.toMatch(
      /Sandbox|no write access/,
    );
  });
});

describe("the repository queue's control plane", () => {
  let home: string;
  let clock = new Date(NOW);
  beforeEach(async () => {
    home = await mkdtemp(join(tmpdir(), "fleet-cp-"));
    clock = new Date(NOW);
  });
  afterEach(async () => rm(home, { recursive: true, force: true }));

  const fileConfig = (yaml: string) => {
    const r = parseFleetConfig(yaml);
    if (!r.ok) throw new Error(JSON.stringify(r.problems));
    return r.config;
  };
  const queueWith = (
    config = defaultFleetConfig(),
    extra: { dropped?: DroppedOverride[][]; views?: TrackingView[] } = {},
  ) => {
    const store = createLocalStateStore({ home, clock: () => clock });
    const tracker: Tracker = {
      show: async (_issue, view) => {
        extra.views?.push(view);
      },
      remember: () => {},
      setSections: () => {},
      touch: async () => {},
      flush: async () => {},
      edits: 0,
    };
    const queue = createRepoQueue({
      repo: "octo/widgets",
      store,
      fileConfig: config,
      dispatcher: localDispatcher,
      tracker,
      clock: () => clock,
      ...(extra.dropped ? { onOverridesDropped: (d: DroppedOverride[]) => void extra.dropped!.push(d) } : {}),
    });
    return { store, queue };
  };

  it("claims one reply per person and issue per hour, and prunes older claims", async () => {
    const { queue, store } = queueWith();
    expect(await queue.claimReply(7, "Mallory")).toBe(true);
    expect(await queue.claimReply(7, "mallory")).toBe(false);
    expect(await queue.claimReply(8, "mallory")).toBe(true);
    expect(await queue.claimReply(7, "eve")).toBe(true);
    clock = new Date(Date.parse(NOW) + 30 * 60_000);
    expect(await queue.claimReply(7, "mallory")).toBe(false);
    clock = new Date(Date.parse(NOW) + 61 * 60_000);
    expect(await queue.claimReply(7, "mallory")).toBe(true);
    // Only the claim just made is left: every other one was past the hour.
    expect((await store.read()).doc.replies).toEqual({ "7:mallory": Math.floor(clock.getTime() / 1000) });
  });

  // A relabel requeues the task it had (its createdAt stays); once that run has ended, the label's
  // late answer (a sweep that found the label, a redelivery) must not queue it a third time.
  it("a label answered by requeuing a task is not queued again once that run has ended", async () => {
    const { queue } = queueWith();
    const at = (minutes: number) => new Date(Date.parse(NOW) + minutes * 60_000);
    const label = (minutes: number) =>
      queue.enqueue({
        issue: 7,
        title: "Add a cache",
        coder: "claude",
        model: "sonnet",
        priority: 2,
        dependsOn: [],
        requestedBy: "mona",
        labeledAt: at(minutes).toISOString(),
      });
    clock = at(0);
    const first = await label(0);
    expect(first.applied).toBe(true);
    clock = at(5);
    await queue.move(7, "failed", { reason: "the run failed" });
    // Labeled again at minute 10: the same task, queued again.
    clock = at(10);
    const again = await label(10);
    expect(again).toMatchObject({ applied: true, task: { id: first.task?.id } });
    clock = at(15);
    await queue.move(7, "failed", { reason: "the run failed again" });
    // The minute-10 label found late (a sweep, a redelivery): answered by that requeue.
    clock = at(20);
    expect((await label(10)).applied).toBe(false);
    // A label given after it is a new request.
    expect((await label(19)).applied).toBe(true);
  });

  it("refuses a config set outside the file's rules and stores nothing", async () => {
    const { queue, store } = queueWith(fileConfig("budgets: { daily_usd: 10 }\n"));
    const refused = await queue.setConfig([{ key: "budgets.daily_usd", value: 20 }], "mona");
    expect(refused).toEqual({
      ok: false,
      problems: [{ path: "budgets.daily_usd", message: expect.stringContaining("lowered") }],
    });
    expect((await store.read()).doc.config).toEqual({});
    const applied = await queue.setConfig([{ key: "budgets.daily_usd", value: 5 }], "mona");
    expect(applied.ok && applied.config.budgets.daily_usd).toBe(5);
    expect((await store.read()).doc.config).toEqual({ "budgets.daily_usd": 5 });
  });

  it("drops a stored override the file no longer allows in the next commit, reporting it, and keeps the rest", async () => {
    await queueWith(fileConfig("budgets: { daily_usd: 50 }\n")).queue.setConfig(
      [
        { key: "budgets.daily_usd", value: 20 },
        { key: "max_concurrent", value: 5 },
      ],
      "mona",
    );
    const dropped: DroppedOverride[][] = [];
    // The file now allows 10 a day: the stored 20 would raise it.
    const { queue, store } = queueWith(fileConfig("budgets: { daily_usd: 10 }\n"), { dropped });
    expect(queue.config((await store.read()).doc).budgets.daily_usd).toBe(10);
    await queue.enqueue({ ...input, body: "x" });
    expect(dropped).toEqual([
      [{ key: "budgets.daily_usd", value: "20", message: expect.stringContaining("lowered") }],
    ]);
    expect((await store.read()).doc.config).toEqual({ max_concurrent: 5 });
    // Reported once: the next commit finds nothing to drop.
    await queue.schedule();
    expect(dropped).toHaveLength(1);
  });

  it("shows the ignored edit and sandbox: none on the task's tracking view", async () => {
    const views: TrackingView[] = [];
    const { queue } = queueWith(fileConfig("sandbox: none\n"), { views });
    await queue.enqueue({ ...input, body: "v1" });
    expect(views.at(-1)?.sandbox).toBe("none");
    await queue.issueEdited(7, { title: "Add a cache", body: "v2", by: "mallory", allowed: false });
    expect(views.at(-1)?.promptEditedBy).toBe("mallory");
    await queue.issueEdited(7, { title: "Add a cache", body: "v3", by: "mona", allowed: true });
    expect(views.at(-1)?.promptEditedBy).toBeUndefined();
  });
});
