import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Task } from "../../src/core/task.ts";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import { createGitHubStateStore } from "../../src/state/github-store.ts";
import { botClient, waitFor } from "../support/bot-client.ts";
import { type Harness, startAppInstance, startHarness } from "../support/harness.ts";

const SLOT_STATES = new Set(["dispatched", "planning", "running"]);
const byIssue = (tasks: Task[], issue: number) => tasks.find((t) => t.issue === issue);
const busy = (tasks: Task[]) => tasks.filter((t) => SLOT_STATES.has(t.state));

describe("task lifecycle in the app (dispatch: local, nothing claims the tasks)", () => {
  let h: Harness;
  const issues: number[] = [];

  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": "dispatch: local\nmax_concurrent: 2\n" } });
    for (let i = 1; i <= 5; i++) issues.push(await h.newIssue(`Task ${i}`, `Do thing ${i}.`));
  });
  afterAll(async () => h?.stop());

  it("holds the cap under a burst of labels and queues the rest in order", async () => {
    await Promise.all(issues.slice(0, 4).map((n) => h.label(n, "fleet:claude")));
    const tasks = await waitFor("four tasks", async () => {
      const t = await h.tasks();
      return t.length === 4 ? t : undefined;
    });
    expect(busy(tasks)).toHaveLength(2);
    expect(tasks.filter((t) => t.state === "queued")).toHaveLength(2);
    // The tracking comment of a queued task says where it stands.
    const queued = tasks.find((t) => t.state === "queued")!;
    await h.app.flush();
    const tracking = h.botComments(queued.issue).find((c) => c.body.includes("fleet:tracking"));
    // Written when the task was queued; later arrivals behind it do not cost it an edit.
    expect(tracking?.body).toMatch(/queued: position 1 of [12], 2 of 2 slots busy/);
  });

  it("puts a p0 task ahead of the queue, and starts it when a slot frees (cancel by command)", async () => {
    const urgent = issues[4]!;
    await h.label(urgent, "fleet:p0");
    await h.label(urgent, "fleet:claude");
    let tasks = await h.tasks();
    expect(byIssue(tasks, urgent)?.priority).toBe(0);
    expect(byIssue(tasks, urgent)?.state).toBe("queued");

    const running = busy(tasks)[0]!;
    await h.comment(running.issue, "/fleet cancel no longer needed");
    tasks = await waitFor("the p0 task dispatched", async () => {
      const t = await h.tasks();
      return byIssue(t, urgent)?.state === "dispatched" ? t : undefined;
    });
    expect(byIssue(tasks, running.issue)?.state).toBe("cancelled");
    expect(byIssue(tasks, running.issue)?.reason).toContain("cancelled by @mona");
    expect(busy(tasks)).toHaveLength(2);
  });

  it("cancels on unlabel and on close, and a retry queues the task again", async () => {
    let tasks = await h.tasks();
    const [a, b] = busy(tasks);
    await h.mona.rest.issues.removeLabel({
      owner: h.owner,
      repo: h.name,
      issue_number: a!.issue,
      name: "fleet:claude",
    });
    await h.mona.rest.issues.update({
      owner: h.owner,
      repo: h.name,
      issue_number: b!.issue,
      state: "closed",
    });
    await h.settle();
    tasks = await waitFor("both cancelled", async () => {
      const t = await h.tasks();
      return byIssue(t, a!.issue)?.state === "cancelled" && byIssue(t, b!.issue)?.state === "cancelled"
        ? t
        : undefined;
    });
    expect(byIssue(tasks, a!.issue)?.reason).toMatch(/label fleet:claude removed by @mona/);
    expect(byIssue(tasks, b!.issue)?.reason).toMatch(/issue closed by @mona/);

    await h.comment(a!.issue, "/fleet retry");
    tasks = await h.tasks();
    expect(["queued", "dispatched"]).toContain(byIssue(tasks, a!.issue)?.state);
    expect(busy(tasks).length).toBeLessThanOrEqual(2);
  });

  it("applies /fleet config set at once and answers bad values with the valid forms", async () => {
    await h.comment(issues[0]!, "/fleet config set max_concurrent=4");
    const tasks = await h.tasks();
    const live = tasks.filter((t) => t.state === "queued" || SLOT_STATES.has(t.state));
    expect(busy(tasks)).toHaveLength(Math.min(4, live.length));

    await h.comment(issues[0]!, "/fleet config set max_concurrent=lots");
    const replies = h.botComments(issues[0]!).map((c) => c.body);
    expect(replies.some((b) => b.includes("max_concurrent") && /must be/.test(b))).toBe(true);
  });

  it("refuses commands from users without write access, and ignores the bot's own labels", async () => {
    h.gh.addCollaborator(h.full, "mallory", "read");
    const { Octokit } = await import("@octokit/rest");
    const mallory = new Octokit({ baseUrl: h.gh.url, auth: h.gh.userToken("mallory") });
    const before = await h.tasks();
    await h.comment(issues[0]!, "/fleet config set max_concurrent=1", mallory);
    expect(h.botComments(issues[0]!).some((c) => c.body.includes("ignored a request from `@mallory`"))).toBe(
      true,
    );

    const issue = await h.newIssue("Labeled by the bot");
    const bot = await botClient(h.gh, h.full);
    await bot.rest.issues.addLabels({
      owner: h.owner,
      repo: h.name,
      issue_number: issue,
      labels: ["fleet:claude"],
    });
    await h.settle();
    const after = await h.tasks();
    expect(byIssue(after, issue)).toBeUndefined();
    expect(after.length).toBe(before.length);
  });
});

describe("restart and reconcile", () => {
  let h: Harness;
  afterAll(async () => h?.stop());

  it("a new app instance neither double-dispatches nor leaks a slot, and reclaims expired leases", async () => {
    h = await startHarness({
      files: { ".github/fleet.yml": "dispatch: local\nmax_concurrent: 1\nretries: { max: 2 }\n" },
    });
    const one = await h.newIssue("One");
    const two = await h.newIssue("Two");
    await h.label(one, "fleet:claude");
    await h.label(two, "fleet:claude");
    let tasks = await h.tasks();
    expect(busy(tasks).map((t) => t.issue)).toEqual([one]);

    // The app dies; a new instance comes up on the same GitHub.
    await h.app.stop();
    const app2 = await startAppInstance(h.gh);
    const three = await h.newIssue("Three");
    await h.label(three, "fleet:claude");
    await app2.reconcile();
    tasks = await h.tasks();
    expect(busy(tasks).map((t) => t.issue)).toEqual([one]);
    expect(byIssue(tasks, one)?.attempts).toBe(1);
    await app2.stop();

    // Later still, with the first lease long expired (no worker ever claimed it): reclaimed and retried.
    const later = new Date(Date.now() + 60 * 60_000);
    const app3 = await startAppInstance(h.gh, { clock: () => later });
    await h.comment(one, "/fleet status");
    await app3.reconcile();
    tasks = await h.tasks();
    expect(busy(tasks)).toHaveLength(1);
    const requeued = byIssue(tasks, one)!;
    // Expired: back in the queue behind the others (FIFO reset), so "two" now holds the slot.
    expect(requeued.state).toBe("queued");
    expect(busy(tasks)[0]!.issue).toBe(two);
    await app3.stop();
  });
});

describe("dependency cycles", () => {
  it("are shown on every issue involved, which stay blocked while the others run", async () => {
    const h = await startHarness({ files: { ".github/fleet.yml": "dispatch: local\nmax_concurrent: 2\n" } });
    try {
      // #a -> #b -> #c -> #a; #d depends on #a only (blocked, not in the cycle).
      const a = await h.newIssue("A");
      const b = await h.newIssue("B", `Depends on #${a}`);
      const c = await h.newIssue("C", `Depends on #${b}`);
      const d = await h.newIssue("D", `Depends on #${a}`);
      await h.mona.rest.issues.update({
        owner: h.owner,
        repo: h.name,
        issue_number: a,
        body: `Depends on #${c}`,
      });
      for (const n of [a, b, c, d]) await h.label(n, "fleet:claude");
      const free = await h.newIssue("Free");
      await h.label(free, "fleet:claude");
      const tasks = await h.tasks();
      for (const n of [a, b, c, d]) expect(byIssue(tasks, n)?.state).toBe("blocked");
      expect(byIssue(tasks, free)?.state).toBe("dispatched");
      await h.app.flush();
      for (const n of [a, b, c]) {
        const tracking = h.botComments(n).find((x) => x.body.includes("fleet:tracking"))?.body ?? "";
        expect(tracking).toContain("a dependency cycle (");
        // The cycle is named by its issues, starting and ending at the same one.
        for (const m of [a, b, c]) expect(tracking).toContain(`#${m}`);
        expect(tracking).toContain('remove one of its "Depends on" lines');
      }
      const outside = h.botComments(d).find((x) => x.body.includes("fleet:tracking"))?.body ?? "";
      expect(outside).toContain(`blocked by #${a}`);
      expect(outside).not.toContain("cycle");
    } finally {
      await h.stop();
    }
  });
});

describe("invalid configuration", () => {
  it("is explained on the issue with every problem and its key path, and nothing is queued", async () => {
    const h = await startHarness({
      files: {
        ".github/fleet.yml": "max_concurrent: -2\ndispatch: cloud\ncoders:\n  claude:\n    model: 42\n",
      },
    });
    try {
      const issue = await h.newIssue("Config is broken");
      await h.label(issue, "fleet:claude");
      const body = await waitFor(
        "the config comment",
        async () => h.botComments(issue).find((c) => c.body.includes("fleet.yml"))?.body,
      );
      expect(body).toContain("max_concurrent");
      expect(body).toContain("dispatch");
      expect(body).toContain("coders.claude.model");
      expect(await h.tasks()).toHaveLength(0);
    } finally {
      await h.stop();
    }
  });
});

describe("periodic reconcile", () => {
  it("sweeps every issue once, then only the issues updated since, and still finds a label whose webhook was lost", async () => {
    const h = await startHarness({ files: { ".github/fleet.yml": "dispatch: local\nmax_concurrent: 5\n" } });
    const LIST = "GET /repos/{owner}/{repo}/issues";
    const READ = "GET /repos/{owner}/{repo}/issues/{issue_number}";
    const sweep = async () => {
      const mark = h.gh.requests.mark();
      await h.app.reconcile();
      const mine = h.gh.requests.entries.filter((e) => e.seq > mark && e.actor === h.gh.botLogin);
      return { lists: mine.filter((e) => e.route === LIST), reads: mine.filter((e) => e.route === READ) };
    };
    try {
      const live = await h.newIssue("Live");
      await h.label(live, "fleet:claude");
      const first = await sweep();
      expect(first.lists).toHaveLength(1);
      expect(first.reads).toHaveLength(1); // the live task's issue

      // The labeled webhook of a second issue never arrives.
      const lost = await h.newIssue("Lost");
      h.gh.faults.inject({
        route: "POST /repos/{owner}/{repo}/issues/{issue_number}/labels",
        dropDelivery: true,
        times: 1,
      });
      await h.label(lost, "fleet:claude");
      expect((await h.tasks()).some((t) => t.issue === lost)).toBe(false);

      const second = await sweep();
      expect(second.lists).toHaveLength(1);
      expect(second.reads).toHaveLength(0);
      expect((await h.tasks()).find((t) => t.issue === lost)?.state).toBe("dispatched");

      // Closing the live task's issue with its webhook lost too: the next sweep sees it in its list.
      h.gh.faults.inject({
        route: "PATCH /repos/{owner}/{repo}/issues/{issue_number}",
        dropDelivery: true,
        times: 1,
      });
      await h.mona.rest.issues.update({ owner: h.owner, repo: h.name, issue_number: live, state: "closed" });
      const third = await sweep();
      expect(third.reads).toHaveLength(0);
      expect((await h.tasks()).find((t) => t.issue === live)?.state).toBe("cancelled");
    } finally {
      await h.stop();
    }
  });
});

describe("/fleet retry on a rate-limited task", () => {
  it("queues it without waiting for the limit's reset, as `fleet retry` does", async () => {
    const h = await startHarness({ files: { ".github/fleet.yml": "dispatch: local\nmax_concurrent: 5\n" } });
    try {
      const issue = await h.newIssue("Limited");
      await h.label(issue, "fleet:claude");
      const task = (await h.tasks()).find((t) => t.issue === issue)!;
      // As a worker records a run stopped by the provider's limit (the reset an hour away).
      const store = createGitHubStateStore({
        github: githubOverOctokit(h.mona),
        owner: h.owner,
        repo: h.name,
      });
      const resetAt = new Date(Date.now() + 3_600_000).toISOString();
      await store.update(({ doc }) => {
        if (!doc.tasks[task.id]) return null;
        const { lease: _lease, ...rest } = doc.tasks[task.id]!;
        const t: Task = { ...rest, state: "rate-limited", resetAt };
        return {
          doc: { ...doc, tasks: { ...doc.tasks, [task.id]: t } },
          message: `rate-limited gh-${issue}`,
        };
      });
      await h.comment(issue, "/fleet retry");
      const after = (await h.tasks()).find((t) => t.id === task.id)!;
      expect(["queued", "dispatched"]).toContain(after.state);
      expect(h.botComments(issue).some((c) => c.body.includes("Nothing to retry"))).toBe(false);
    } finally {
      await h.stop();
    }
  }, 60_000);
});

describe("reconcile and pull requests", () => {
  it("a PR merged, or closed, while its webhook was lost ends its task: done, or failed", async () => {
    const h = await startHarness({ files: { ".github/fleet.yml": "dispatch: local\nmax_concurrent: 5\n" } });
    const ref = { owner: h.owner, repo: h.name };
    const store = createGitHubStateStore({ github: githubOverOctokit(h.mona), ...ref });
    /** A task at pr-open with a real PR on its branch, as a worker's outcome commit leaves it. */
    const taskWithPr = async (title: string) => {
      const issue = await h.newIssue(title);
      await h.label(issue, "fleet:claude");
      const task = (await h.tasks()).find((t) => t.issue === issue)!;
      const branch = `fleet/${issue}-work`;
      const main = await h.mona.rest.git.getRef({ ...ref, ref: "heads/main" });
      const blob = await h.mona.rest.git.createBlob({ ...ref, content: `${title}\n` });
      const tree = await h.mona.rest.git.createTree({
        ...ref,
        base_tree: main.data.object.sha,
        tree: [{ path: `${issue}.txt`, mode: "100644", type: "blob", sha: blob.data.sha }],
      });
      const commit = await h.mona.rest.git.createCommit({
        ...ref,
        message: title,
        tree: tree.data.sha,
        parents: [main.data.object.sha],
      });
      await h.mona.rest.git.createRef({ ...ref, ref: `refs/heads/${branch}`, sha: commit.data.sha });
      const pr = (await h.mona.rest.pulls.create({ ...ref, title, head: branch, base: "main" })).data.number;
      await h.settle();
      await store.update(({ doc }) => {
        // On the store's cached state first: null (not there yet) makes it try on fresh state.
        if (!doc.tasks[task.id]) return null;
        const { lease: _lease, ...rest } = doc.tasks[task.id]!;
        const t: Task = { ...rest, state: "pr-open", branch, pr };
        return { doc: { ...doc, tasks: { ...doc.tasks, [task.id]: t } }, message: `pr-open gh-${issue}` };
      });
      return { id: task.id, pr };
    };
    try {
      const merged = await taskWithPr("Merged unheard");
      const closed = await taskWithPr("Closed unheard");
      h.gh.faults.inject({
        route: "PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge",
        dropDelivery: true,
      });
      h.gh.faults.inject({ route: "PATCH /repos/{owner}/{repo}/pulls/{pull_number}", dropDelivery: true });
      await h.mona.rest.pulls.merge({ ...ref, pull_number: merged.pr });
      await h.settle();
      const state = async (id: string) => (await h.tasks()).find((t) => t.id === id)?.state;
      expect(await state(merged.id)).toBe("pr-open");
      // The first sweep is a full one: it reads each pr-open task's PR. One read fails (a 502): the
      // sweep finishes the rest and fails, so the next starts from the same point and reads it again.
      h.gh.faults.inject({ route: "GET /repos/{owner}/{repo}/pulls/{pull_number}", status: 502, times: 1 });
      await h.app.reconcile();
      expect(await state(merged.id)).toBe("pr-open");
      await h.app.reconcile();
      expect(await state(merged.id)).toBe("done");
      expect(await state(closed.id)).toBe("pr-open");

      // The next sweep lists only what was updated since: the PR closed meanwhile is in that list.
      await h.mona.rest.pulls.update({ ...ref, pull_number: closed.pr, state: "closed" });
      await h.settle();
      await h.app.reconcile();
      const failed = (await h.tasks()).find((t) => t.id === closed.id)!;
      expect(failed.state).toBe("failed");
      expect(failed.reason).toMatch(/closed without merging \(found by reconcile\)/);
    } finally {
      h.gh.faults.clear();
      await h.stop();
    }
  }, 60_000);
});

describe("configuration between events", () => {
  it("is read once for many events, and a fix pushed to the default branch applies to the next label", async () => {
    const h = await startHarness({ files: { ".github/fleet.yml": "dispatch: cloud\n" } });
    const CONFIG_READS = "GET /repos/{owner}/{repo}/contents/{path}";
    try {
      const mark = h.gh.requests.mark();
      const first = await h.newIssue("One");
      const second = await h.newIssue("Two");
      await h.label(first, "fleet:claude");
      await h.label(second, "fleet:claude");
      await h.settle();
      for (const n of [first, second])
        expect(h.botComments(n).some((c) => c.body.includes("fleet.yml"))).toBe(true);
      const byApp = h.gh.requests.entries.filter((e) => e.seq > mark && e.actor === h.gh.botLogin);
      expect(byApp.filter((e) => e.route === CONFIG_READS)).toHaveLength(1);

      // Fixing the file is a push to the default branch: the cached (invalid) config is dropped.
      const { data: current } = await h.mona.rest.repos.getContent({
        owner: h.owner,
        repo: h.name,
        path: ".github/fleet.yml",
      });
      await h.mona.rest.repos.createOrUpdateFileContents({
        owner: h.owner,
        repo: h.name,
        path: ".github/fleet.yml",
        message: "fleet: dispatch locally",
        content: Buffer.from("dispatch: local\n").toString("base64"),
        sha: (current as { sha: string }).sha,
      });
      await h.settle();
      const third = await h.newIssue("Three");
      await h.label(third, "fleet:claude");
      await h.settle();
      const task = (await h.tasks()).find((t) => t.issue === third);
      expect(task?.state).toBe("dispatched");
      expect(h.botComments(third).some((c) => c.body.includes("fleet.yml"))).toBe(false);
    } finally {
      await h.stop();
    }
  });
});

describe("per-user daily task limit", () => {
  it("holds a flood of labels from one person at the door, with the reason on the issue", async () => {
    const h = await startHarness({
      files: { ".github/fleet.yml": "dispatch: local\nper_user_daily_tasks: 1\n" },
    });
    try {
      const first = await h.newIssue("First");
      const second = await h.newIssue("Second");
      await h.label(first, "fleet:claude");
      await h.label(second, "fleet:claude");
      const tasks = await h.tasks();
      expect(tasks.map((t) => t.issue)).toEqual([first]);
      const notice = h.botComments(second).find((c) => c.body.includes("did not queue"));
      expect(notice?.body).toContain("per_user_daily_tasks");
      expect(notice?.body).toContain("@mona");
    } finally {
      await h.stop();
    }
  });
});
