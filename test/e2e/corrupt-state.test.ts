import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STATE_PATH } from "../../src/core/state-doc.ts";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import { dashboardIssueOf } from "../../src/queue/dashboard.ts";
import { createGitHubStateStore } from "../../src/state/github-store.ts";
import { type Harness, startHarness } from "../support/harness.ts";

const FLEET_YML = "dispatch: local\ndashboard: true\ndashboard_interval_seconds: 0\n";
const BRANCH = "fleet/state";

describe("a corrupt or invalid state document", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": FLEET_YML } });
  });
  afterAll(async () => h?.stop());

  const stateFile = async () => {
    const { data } = await h.mona.rest.repos.getContent({
      owner: h.owner,
      repo: h.name,
      path: STATE_PATH,
      ref: BRANCH,
    });
    const file = data as { sha: string; content: string };
    return { sha: file.sha, text: Buffer.from(file.content, "base64").toString("utf8") };
  };
  const writeState = async (text: string, sha: string, message: string) =>
    h.mona.rest.repos.createOrUpdateFileContents({
      owner: h.owner,
      repo: h.name,
      path: STATE_PATH,
      branch: BRANCH,
      message,
      content: Buffer.from(text).toString("base64"),
      sha,
    });
  const head = async () =>
    (await h.mona.rest.git.getRef({ owner: h.owner, repo: h.name, ref: `heads/${BRANCH}` })).data.object.sha;

  it("is reported on the triggering issue and the dashboard with the remedy, never overwritten, and the app stays up", async () => {
    const first = await h.newIssue("First task");
    await h.label(first, "fleet:claude");
    await h.app.flush();
    const good = await stateFile();
    const doc = JSON.parse(good.text);
    const dashboard = dashboardIssueOf(doc);
    expect(dashboard).toBeDefined();

    // A hand edit that parses but is wrong: a lease in slot -1.
    const taskId = Object.keys(doc.tasks)[0]!;
    doc.tasks[taskId].lease.slot = -1;
    await writeState(`${JSON.stringify(doc, null, 2)}\n`, good.sha, "hand edit");
    const corruptHead = await head();

    const second = await h.newIssue("Second task");
    await h.label(second, "fleet:claude");
    const notice = h.botComments(second).find((c) => c.body.includes("fleet:notice state-corrupt"));
    expect(notice?.body).toContain("Fleet's state is unreadable");
    expect(notice?.body).toContain(`task "${taskId}", field "lease.slot"`);
    expect(notice?.body).toMatch(/fix or revert the last commit on fleet\/state/i);
    expect(notice?.body).toContain("will not overwrite");
    const board = await h.mona.rest.issues.get({ owner: h.owner, repo: h.name, issue_number: dashboard! });
    expect(board.data.body).toContain("Fleet's state is unreadable");
    expect(board.data.body).toMatch(/fix or revert the last commit on fleet\/state/i);
    // Nothing was written over it.
    expect(await head()).toBe(corruptHead);

    // Text that is not JSON at all, found by a command on another issue: one notice there, edited in place.
    const now = await stateFile();
    await writeState("{ this is not json", now.sha, "broken merge");
    const brokenHead = await head();
    await h.comment(first, "/fleet status");
    await h.comment(first, "/fleet status");
    const notices = h.botComments(first).filter((c) => c.body.includes("fleet:notice state-corrupt"));
    expect(notices).toHaveLength(1);
    expect(notices[0]!.body).toContain("not valid JSON");
    expect(await head()).toBe(brokenHead);

    // The remedy works: put the good document back, label again, and the task is queued.
    const broken = await stateFile();
    await writeState(good.text, broken.sha, "revert the hand edits");
    await h.mona.rest.issues.removeLabel({
      owner: h.owner,
      repo: h.name,
      issue_number: second,
      name: "fleet:claude",
    });
    await h.settle();
    await h.label(second, "fleet:claude");
    const reader = createGitHubStateStore({
      github: githubOverOctokit(h.mona),
      owner: h.owner,
      repo: h.name,
    });
    expect(Object.values((await reader.read()).doc.tasks).map((t) => t.issue)).toContain(second);
  });
});
