import { type GitHubEmulator, startGitHubEmulator } from "@fleet/github-emulator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import { createTracker } from "../../src/queue/tracker.ts";
import type { TrackingView } from "../../src/render/tracking-comment.ts";
import { botClient, waitFor } from "../support/bot-client.ts";
import { FLEET_APP } from "../support/fleet-app.ts";

const FULL = "octo-org/tracked";
const view = (state: TrackingView["state"], extra: Partial<TrackingView> = {}): TrackingView => ({
  taskKey: "fl-a1",
  taskId: "fl-a1",
  state,
  coder: "claude",
  model: "sonnet",
  priority: 2,
  ...extra,
});

describe("the tracking comment's throttle", () => {
  let gh: GitHubEmulator;
  let issue = 0;
  beforeAll(async () => {
    gh = await startGitHubEmulator(FLEET_APP);
    await gh.createRepo({ owner: "octo-org", name: "tracked", files: { "README.md": "# t\n" } });
  });
  afterAll(async () => gh?.stop());

  const newIssue = async () => {
    const octokit = await botClient(gh, FULL);
    const { data } = await octokit.rest.issues.create({
      owner: "octo-org",
      repo: "tracked",
      title: `Task ${++issue}`,
    });
    return { github: githubOverOctokit(octokit), number: data.number };
  };
  const writes = (since: number) => {
    const byRoute = gh.counts({ since }).byRoute;
    return {
      posts: byRoute["POST /repos/{owner}/{repo}/issues/{issue_number}/comments"] ?? 0,
      edits: byRoute["PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}"] ?? 0,
    };
  };

  it("a run's section edit made while a write is under way is written next, not lost", async () => {
    const { github: real, number } = await newIssue();
    let during: (() => void) | undefined;
    // The port, with a hook for the moment an edit is on its way to GitHub.
    const github = {
      ...real,
      issues: {
        ...real.issues,
        updateComment: (...args: Parameters<typeof real.issues.updateComment>) => {
          during?.();
          during = undefined;
          return real.issues.updateComment(...args);
        },
      },
    };
    const tracker = createTracker({ github, repo: { owner: "octo-org", repo: "tracked" }, minIntervalMs: 0 });
    await tracker.show(number, view("running"), { fresh: true });
    tracker.setSections(number, "fl-a1", (s) => ({ ...s, progress: "one" }));
    during = () => tracker.setSections(number, "fl-a1", (s) => ({ ...s, progress: "two" }));
    await tracker.touch(number, "fl-a1");
    await tracker.flush("fl-a1");
    const body = gh.comments(FULL, number).at(-1)?.body ?? "";
    expect(body).toContain("fleet:section progress -->\ntwo");
  });

  it("writes one comment, then at most one edit per 15 s window with the latest view", async () => {
    const { github, number } = await newIssue();
    let now = 1_000_000;
    const tracker = createTracker({
      github,
      repo: { owner: "octo-org", repo: "tracked" },
      clock: () => now,
    });
    const mark = gh.requests.mark();

    await tracker.show(number, view("queued"));
    // Within the window: held, each newer view replacing the last.
    now += 1_000;
    await tracker.show(number, view("dispatched"));
    now += 5_000;
    await tracker.show(number, view("running", { step: "Reading the code" }));
    now += 5_000;
    await tracker.show(number, view("running", { step: "Editing src/a.ts" }));
    expect(writes(mark)).toEqual({ posts: 1, edits: 0 });
    const comments = () => gh.comments(FULL, number).filter((c) => c.body.includes("fleet:tracking"));
    expect(comments()).toHaveLength(1);
    expect(comments()[0]!.body).toContain("queued");

    // The window's end (flush stands in for the timer here): one edit carrying the latest view.
    await tracker.flush();
    expect(writes(mark)).toEqual({ posts: 1, edits: 1 });
    expect(comments()).toHaveLength(1);
    expect(comments()[0]!.body).toContain("Editing src/a.ts");

    // 15 s after that edit, a new view is written at once.
    now += 15_000;
    await tracker.show(number, view("pr-open"));
    expect(writes(mark)).toEqual({ posts: 1, edits: 2 });
    expect(tracker.edits).toBe(3);
  });

  it("writes a held view by itself when its window ends, with no further event", async () => {
    const { github, number } = await newIssue();
    const tracker = createTracker({
      github,
      repo: { owner: "octo-org", repo: "tracked" },
      minIntervalMs: 300,
    });
    await tracker.show(number, view("queued"));
    await tracker.show(number, view("running", { step: "Running the tests" }));
    const body = () => gh.comments(FULL, number).find((c) => c.body.includes("fleet:tracking"))?.body ?? "";
    expect(body()).not.toContain("Running the tests");
    await waitFor("the held view to be written", async () =>
      body().includes("Running the tests") ? true : undefined,
    );
    expect(gh.comments(FULL, number).filter((c) => c.body.includes("fleet:tracking"))).toHaveLength(1);
  });

  it("finds its comment again after a restart (by the marker) and edits it instead of posting another", async () => {
    const { github, number } = await newIssue();
    const first = createTracker({ github, repo: { owner: "octo-org", repo: "tracked" }, minIntervalMs: 0 });
    await first.show(number, view("queued"));
    const second = createTracker({ github, repo: { owner: "octo-org", repo: "tracked" }, minIntervalMs: 0 });
    await second.show(number, view("running"));
    const tracking = gh.comments(FULL, number).filter((c) => c.body.includes("fleet:tracking"));
    expect(tracking).toHaveLength(1);
    expect(tracking[0]!.body).toContain("running");
  });
});

describe("the tracking comment's sections (the run's plan and report)", () => {
  let gh: GitHubEmulator;
  beforeAll(async () => {
    gh = await startGitHubEmulator(FLEET_APP);
    await gh.createRepo({ owner: "octo-org", name: "tracked", files: { "README.md": "# t\n" } });
  });
  afterAll(async () => gh?.stop());

  it("a worker writes its plan and report with its state edits, and the app's later edit keeps them", async () => {
    const octokit = await botClient(gh, FULL);
    const repo = { owner: "octo-org", repo: "tracked" };
    const { data: created } = await octokit.rest.issues.create({ ...repo, title: "Sections" });
    const number = created.number;
    const github = githubOverOctokit(octokit);
    const app = createTracker({ github, repo, minIntervalMs: 0 });
    const worker = createTracker({ github, repo, minIntervalMs: 0 });
    const body = () => gh.comments(FULL, number).find((c) => c.user.type === "Bot")!.body;
    const byRoute = (since: number) => gh.counts({ since }).byRoute;

    // The app creates the comment; the worker learns its id and body from the listing it makes anyway.
    let mark = gh.requests.mark();
    await app.show(number, view("dispatched"), { fresh: true });
    const listed = gh.comments(FULL, number)[0]!;
    worker.remember("fl-a1", listed.id, listed.body);
    worker.setSections(number, "fl-a1", (s) => ({
      ...s,
      plan: "<!-- fleet:plan fl-a1 -->\n### Plan\n1. Do it",
    }));
    await worker.show(number, view("running"), { othersMayHaveWritten: true });
    expect(body()).toMatch(/running[\s\S]*### Plan\n1\. Do it/);
    worker.setSections(number, "fl-a1", (s) => ({
      ...s,
      report: "<!-- fleet:run-report fl-a1 -->\nAll done.",
    }));
    await worker.show(number, view("pr-open", { pr: 7 }), { othersMayHaveWritten: true });
    await worker.flush("fl-a1");
    expect(body()).toMatch(/pr-open[\s\S]*### Plan[\s\S]*All done\./);
    // One comment; the worker's two edits read nothing (it writes the sections itself).
    expect(byRoute(mark)).toEqual({
      "POST /repos/{owner}/{repo}/issues/{issue_number}/comments": 1,
      "PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}": 2,
    });

    // The app moves the task on: it reads the comment once, and the plan and report stay below the state.
    mark = gh.requests.mark();
    await app.show(number, view("done", { pr: 7 }), { othersMayHaveWritten: true });
    expect(body()).toMatch(/done[\s\S]*### Plan\n1\. Do it[\s\S]*All done\./);
    expect(body()).not.toContain("pr-open");
    expect(byRoute(mark)).toEqual({
      "GET /repos/{owner}/{repo}/issues/comments/{comment_id}": 1,
      "PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}": 1,
    });
    // A section that quotes the marker of another does not open one.
    worker.setSections(number, "fl-a1", (s) => ({ ...s, plan: "x <!-- fleet:section report --> y" }));
    await worker.flush("fl-a1");
    expect(body()).toContain("<!-- fleet:quoted report -->");
  });
});
