import { Octokit } from "@octokit/rest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import { createGitHubStateStore } from "../../src/state/github-store.ts";
import { type Harness, startHarness } from "../support/harness.ts";

const FLEET_YML = "dispatch: local\nmax_concurrent: 2\nbudgets: { daily_usd: 50 }\n";

/** `@name` outside backticks: a mention GitHub would turn into a notification. */
const pings = (body: string, login: string): boolean =>
  new RegExp(`(^|[^\`\\w])@${login}(?![\\w-])`).test(body.replace(/`+[^`]*`+/g, ""));

describe("the control plane: /fleet config set changes operational keys only", () => {
  let h: Harness;
  let now = new Date("2026-03-01T10:00:00Z");
  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": FLEET_YML }, clock: () => now });
  });
  afterAll(async () => h?.stop());

  const store = () =>
    createGitHubStateStore({ github: githubOverOctokit(h.mona), owner: h.owner, repo: h.name });
  const lastReply = (issue: number) => h.botComments(issue).at(-1)?.body ?? "";

  it("refuses a writer's coders.claude.credentials=GITHUB_TOKEN and allowed_roles=read, changing nothing", async () => {
    const issue = await h.newIssue("Settings");
    await h.comment(issue, "/fleet config set max_concurrent=3");
    const before = (await store().read()).doc.config;
    expect(before).toEqual({ max_concurrent: 3 });

    await h.comment(issue, "/fleet config set coders.claude.credentials=GITHUB_TOKEN");
    let reply = lastReply(issue);
    expect(reply).toContain("Fleet did not change the config");
    expect(reply).toContain("coders.claude.credentials is file-only");
    expect(reply).toContain("which secrets an agent receives");
    expect(reply).toContain(".github/fleet.yml on the default branch");

    await h.comment(issue, "/fleet config set allowed_roles=read");
    reply = lastReply(issue);
    expect(reply).toContain("allowed_roles is file-only");
    expect(reply).toContain("who may drive Fleet");

    // All or nothing: a valid key beside a file-only one is not applied either.
    await h.comment(issue, "/fleet config set max_concurrent=5 dispatch=actions sandbox=none");
    reply = lastReply(issue);
    expect(reply).toContain("dispatch is file-only");
    expect(reply).toContain("sandbox is file-only");

    // A budget is lowered, never raised above the file's.
    await h.comment(issue, "/fleet config set budgets.daily_usd=80");
    expect(lastReply(issue)).toContain("budgets.daily_usd can only be lowered");

    expect((await store().read()).doc.config).toEqual(before);
    await h.comment(issue, "/fleet config set budgets.daily_usd=20");
    expect((await store().read()).doc.config).toEqual({ max_concurrent: 3, "budgets.daily_usd": 20 });
  });

  it("drops only a stored override that no longer fits the file, with a notice; the others stay", async () => {
    // An older Fleet stored a file-only key; the file then lowers the budget below the override.
    await store().update(({ doc }) => ({
      doc: { ...doc, config: { ...doc.config, allowed_roles: ["read"] } },
      message: "an override stored by an older Fleet",
    }));
    const { data: current } = await h.mona.rest.repos.getContent({
      owner: h.owner,
      repo: h.name,
      path: ".github/fleet.yml",
    });
    await h.mona.rest.repos.createOrUpdateFileContents({
      owner: h.owner,
      repo: h.name,
      path: ".github/fleet.yml",
      message: "fleet: a smaller daily budget",
      content: Buffer.from(FLEET_YML.replace("daily_usd: 50", "daily_usd: 10")).toString("base64"),
      sha: (current as { sha: string }).sha,
    });
    await h.settle();

    const issue = await h.newIssue("Next task");
    await h.label(issue, "fleet:claude");
    const notice = h.botComments(issue).find((c) => c.body.includes("dropped config overrides"));
    expect(notice?.body).toContain("`budgets.daily_usd=20`");
    expect(notice?.body).toContain("can only be lowered");
    expect(notice?.body).toContain("`allowed_roles=read`");
    expect(notice?.body).toContain("allowed_roles is file-only");
    expect((await store().read()).doc.config).toEqual({ max_concurrent: 3 });
    expect((await h.tasks()).find((t) => t.issue === issue)?.state).toBe("dispatched");
  });

  it("webhooks and the reconcile act on the same effective config: a stored allowed_roles never admits a triager", async () => {
    await store().update(({ doc }) => ({
      doc: { ...doc, config: { ...doc.config, allowed_roles: ["triage"] } },
      message: "a file-only key in the state",
    }));
    h.gh.addCollaborator(h.full, "trudy", "triage");
    const trudy = new Octokit({ baseUrl: h.gh.url, auth: h.gh.userToken("trudy") });
    const issue = await h.newIssue("Labeled by a triager");
    await trudy.rest.issues.addLabels({
      owner: h.owner,
      repo: h.name,
      issue_number: issue,
      labels: ["fleet:claude"],
    });
    await h.settle();
    expect((await h.tasks()).some((t) => t.issue === issue)).toBe(false);
    // The reconcile finds the label without its task and checks the labeler as the webhook did.
    await h.app.reconcile();
    await h.settle();
    expect((await h.tasks()).some((t) => t.issue === issue)).toBe(false);
  });

  it("answers a reader's five commands once within the hour, without pinging anyone", async () => {
    h.gh.addCollaborator(h.full, "mallory", "read");
    const mallory = new Octokit({ baseUrl: h.gh.url, auth: h.gh.userToken("mallory") });
    const issue = await h.newIssue("Reader's target");
    const fromFleet = () => h.botComments(issue);
    for (const command of [
      "/fleet retry",
      "/fleet config set max_concurrent=9 cc @octo-org/everyone",
      "/fleet help",
      "/fleet bogus @mona",
      "/fleet status",
    ]) {
      await h.comment(issue, command, mallory);
    }
    expect(fromFleet()).toHaveLength(1);
    const reply = fromFleet()[0]!.body;
    expect(reply).toContain("Fleet ignored a request from `@mallory`");
    for (const login of ["mallory", "mona", "octo-org/everyone"]) expect(pings(reply, login)).toBe(false);
    // Kept compactly in the state: one entry per person and issue.
    // (the triager refused above has an entry of their own)
    expect((await store().read()).doc.replies).toEqual({
      [`${issue}:mallory`]: expect.any(Number),
      [`${issue - 1}:trudy`]: expect.any(Number),
    });
    expect((await store().read()).doc.config.max_concurrent).toBe(3);

    // After the hour, one more answer; the stale entries are pruned.
    now = new Date(now.getTime() + 61 * 60_000);
    await h.comment(issue, "/fleet retry", mallory);
    await h.comment(issue, "/fleet retry", mallory);
    expect(fromFleet()).toHaveLength(2);
    expect(Object.keys((await store().read()).doc.replies ?? {})).toEqual([`${issue}:mallory`]);
  });

  it("repeats a maintainer's text without pinging the people it names", async () => {
    const issue = await h.newIssue("Cancelled");
    await h.label(issue, "fleet:claude");
    await h.comment(issue, "/fleet cancel ask @octo-org/everyone and @carol first");
    await h.app.flush();
    const tracking = h.botComments(issue).find((c) => c.body.includes("fleet:tracking"))!.body;
    expect(tracking).toContain("`@octo-org/everyone`");
    for (const login of ["octo-org/everyone", "carol", "mona"]) expect(pings(tracking, login)).toBe(false);
  });
});
