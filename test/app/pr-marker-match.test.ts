// A pull request no task has recorded yet (its run's end still on its way, or lost with its worker) is
// matched to its task by the marker Fleet writes first in its body: through the real app, the merge's
// webhook as GitHub delivers it (src/app/on-merge.ts, on-pull-request.ts).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Task } from "../../src/core/task.ts";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import { prMarker } from "../../src/render/pr-body.ts";
import { createGitHubStateStore } from "../../src/state/github-store.ts";
import { type Harness, startHarness } from "../support/harness.ts";

describe("a merged pull request no task recorded", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": "dispatch: local\nmax_concurrent: 5\n" } });
  });
  afterAll(async () => h?.stop());

  it("ends the task its body's marker names, not another task on its branch", async () => {
    const ref = { owner: h.owner, repo: h.name };
    const store = createGitHubStateStore({ github: githubOverOctokit(h.mona), ...ref });
    const issue = await h.newIssue("Marked");
    await h.label(issue, "fleet:claude");
    await h.label(issue, "fleet:codex");
    const tasks = await h.tasks();
    const opener = tasks.find((t) => t.coder === "claude")!;
    const other = tasks.find((t) => t.coder === "codex")!;
    const branch = `fleet/${issue}-marked`;
    // The opener's run was cancelled with its end on its way; the other task keeps the same branch, queued.
    await store.update(({ doc }) => {
      if (!doc.tasks[opener.id] || !doc.tasks[other.id]) return null;
      const strip = (t: Task): Task => {
        const { lease: _lease, ...rest } = t;
        return rest;
      };
      const a: Task = { ...strip(doc.tasks[opener.id]!), state: "cancelled", branch };
      const b: Task = { ...strip(doc.tasks[other.id]!), state: "queued", branch };
      return {
        doc: { ...doc, tasks: { ...doc.tasks, [a.id]: a, [b.id]: b } },
        message: "two tasks on one branch",
      };
    });
    const main = await h.mona.rest.git.getRef({ ...ref, ref: "heads/main" });
    const blob = await h.mona.rest.git.createBlob({ ...ref, content: "marked\n" });
    const tree = await h.mona.rest.git.createTree({
      ...ref,
      base_tree: main.data.object.sha,
      tree: [{ path: "marked.txt", mode: "100644", type: "blob", sha: blob.data.sha }],
    });
    const commit = await h.mona.rest.git.createCommit({
      ...ref,
      message: "Marked",
      tree: tree.data.sha,
      parents: [main.data.object.sha],
    });
    await h.mona.rest.git.createRef({ ...ref, ref: `refs/heads/${branch}`, sha: commit.data.sha });
    const body = `${prMarker(opener.id)}\nCloses #${issue}`;
    const pr = (await h.mona.rest.pulls.create({ ...ref, title: "Marked", head: branch, base: "main", body }))
      .data.number;
    await h.settle();
    await h.mona.rest.pulls.merge({ ...ref, pull_number: pr });
    await h.settle();
    const stateOf = async (id: string) => (await h.tasks()).find((t) => t.id === id)!;
    expect(await stateOf(opener.id)).toMatchObject({ state: "done", pr });
    expect((await stateOf(other.id)).state).not.toBe("done");
  }, 60_000);
});

describe("/fleet instructions on an older pull request of a task's branch", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": "dispatch: local\nmax_concurrent: 5\n" } });
  });
  afterAll(async () => h?.stop());

  it("are refused: the task stays on its current pull request", async () => {
    const ref = { owner: h.owner, repo: h.name };
    const issue = await h.newIssue("Two PRs");
    const branch = `fleet/${issue}-two-prs`;
    const main = await h.mona.rest.git.getRef({ ...ref, ref: "heads/main" });
    const tree = await h.mona.rest.git.createTree({
      ...ref,
      base_tree: main.data.object.sha,
      tree: [{ path: "two.txt", mode: "100644", type: "blob", content: "two\n" }],
    });
    const commit = await h.mona.rest.git.createCommit({
      ...ref,
      message: "Two",
      tree: tree.data.sha,
      parents: [main.data.object.sha],
    });
    await h.mona.rest.git.createRef({ ...ref, ref: `refs/heads/${branch}`, sha: commit.data.sha });
    // An older PR on the branch, closed before the task was queued.
    const old = (await h.mona.rest.pulls.create({ ...ref, title: "Old", head: branch, base: "main" })).data
      .number;
    await h.mona.rest.pulls.update({ ...ref, pull_number: old, state: "closed" });
    await h.settle();
    await h.label(issue, "fleet:claude");
    const task = (await h.tasks()).find((t) => t.issue === issue)!;
    expect(task.branch).toBe(branch);
    const current = (await h.mona.rest.pulls.create({ ...ref, title: "Current", head: branch, base: "main" }))
      .data.number;
    const store = createGitHubStateStore({ github: githubOverOctokit(h.mona), ...ref });
    await store.update(({ doc }) => {
      if (!doc.tasks[task.id]) return null;
      const { lease: _lease, ...rest } = doc.tasks[task.id]!;
      const t: Task = { ...rest, state: "pr-open", pr: current };
      return { doc: { ...doc, tasks: { ...doc.tasks, [t.id]: t } }, message: "pr-open" };
    });
    await h.settle();
    await h.mona.rest.pulls.createReview({
      ...ref,
      pull_number: old,
      event: "COMMENT",
      body: "/fleet add tests",
    });
    await h.settle();
    expect((await h.tasks()).find((t) => t.id === task.id)).toMatchObject({ state: "pr-open", pr: current });
    expect(h.botComments(old).some((c) => c.body.includes(`current pull request (#${current})`))).toBe(true);
  }, 60_000);
});
