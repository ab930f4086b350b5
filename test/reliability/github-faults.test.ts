import {
  GIT_INFO_REFS_ROUTE,
  GIT_RECEIVE_PACK_ROUTE,
  GIT_UPLOAD_PACK_ROUTE,
  type GitHubEmulator,
  startGitHubEmulator,
} from "@fleet/github-emulator";
import { Octokit } from "@octokit/rest";
import { afterEach, describe, expect, it } from "vitest";
import { type FleetServer, startFleetServer } from "../../src/app/server.ts";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import { createGitHubStateStore } from "../../src/state/github-store.ts";
import { FLEET_APP } from "../support/fleet-app.ts";

const COMMENTS = "POST /repos/{owner}/{repo}/issues/{issue_number}/comments";
const CONTENTS = "PUT /repos/{owner}/{repo}/contents/{path}";
const TREES = "POST /repos/{owner}/{repo}/git/trees";
const owner = "octo-org";
const repo = "widgets";
const full = `${owner}/${repo}`;

describe("GitHub faults on write routes", () => {
  let gh: GitHubEmulator | undefined;
  let app: FleetServer | undefined;
  afterEach(async () => {
    await app?.stop();
    await gh?.stop();
    app = undefined;
    gh = undefined;
  });

  /** The emulator and the app writing state over `stateTransport`, three open issues without labels yet. */
  async function start(stateTransport: "git" | "api") {
    gh = await startGitHubEmulator(FLEET_APP);
    const em = gh;
    await em.createRepo({
      owner,
      name: repo,
      files: { "README.md": "# widgets\n", ".github/fleet.yml": "dispatch: local\n" },
    });
    em.addCollaborator(full, "mona", "write");
    app = await startFleetServer({
      appId: em.appId,
      privateKey: em.privateKey,
      webhookSecret: em.webhookSecret,
      baseUrl: em.url,
      resilient: true,
      logLevel: "fatal",
      trackerIntervalMs: 0,
      reconcileMs: 0,
      stateTransport,
    });
    const fleet = app;
    em.setWebhookUrl(fleet.webhookUrl);
    const mona = new Octokit({ baseUrl: em.url, auth: em.userToken("mona") });
    const settle = async () => {
      for (let i = 0; i < 20; i++) {
        await em.waitForDeliveries();
        await fleet.idle();
        if (!em.deliveries().some((d) => d.status === "pending")) return;
      }
    };
    const issues: number[] = [];
    for (const title of ["One", "Two", "Three"]) {
      const { data } = await mona.rest.issues.create({ owner, repo, title });
      issues.push(data.number);
    }
    await settle();
    const label = async () => {
      for (const n of issues)
        await mona.rest.issues.addLabels({ owner, repo, issue_number: n, labels: ["fleet:claude"] });
      await settle();
    };
    return { em, mona, issues, label };
  }

  /** No labeled issue was dropped: exactly one task and one tracking comment each. */
  async function expectOneTaskAndCommentEach(em: GitHubEmulator, mona: Octokit, issues: number[]) {
    const reader = createGitHubStateStore({ github: githubOverOctokit(mona), owner, repo });
    const tasks = Object.values((await reader.read()).doc.tasks);
    for (const n of issues) {
      expect(
        tasks.filter((t) => t.issue === n),
        `tasks for #${n}`,
      ).toHaveLength(1);
      const tracking = em
        .comments(full, n)
        .filter((c) => c.user.type === "Bot" && c.body.includes("fleet:tracking"));
      expect(tracking, `tracking comments on #${n}`).toHaveLength(1);
    }
  }

  it("state over the REST API: 5xx and secondary rate limits are retried and no labeled issue is dropped", async () => {
    const { em, mona, issues, label } = await start("api");
    const mark = em.requests.mark();
    em.faults.inject({ route: COMMENTS, status: 502, times: 2 });
    em.faults.inject({ route: CONTENTS, status: 403, retryAfter: 1, times: 1 });
    em.faults.inject({ route: TREES, status: 503, times: 1 });
    await label();
    await expectOneTaskAndCommentEach(em, mona, issues);

    // The faults were really answered, and each faulted route later succeeded.
    const after = em.requests.entries.filter((e) => e.seq > mark);
    const hits = (route: string, ok: (s: number) => boolean) =>
      after.filter((e) => e.route === route && ok(e.status)).length;
    expect(hits(COMMENTS, (s) => s === 502)).toBe(2);
    expect(hits(COMMENTS, (s) => s < 300)).toBeGreaterThanOrEqual(3);
    const stateWrites403 = hits(CONTENTS, (s) => s === 403);
    const trees503 = hits(TREES, (s) => s === 503);
    // At least one state-write fault must have been hit (whichever route the store used).
    expect(stateWrites403 + trees503).toBeGreaterThanOrEqual(1);
    if (stateWrites403) expect(hits(CONTENTS, (s) => s < 300)).toBeGreaterThanOrEqual(1);
    if (trees503) expect(hits(TREES, (s) => s < 300)).toBeGreaterThanOrEqual(1);
    // State went over REST: no git pushes of the state branch.
    expect(em.gitRequests.entries.filter((e) => e.service === "git-receive-pack")).toEqual([]);
  }, 40_000);

  it("state over git: 5xx and rate limits on fetch and push are retried and no labeled issue is dropped", async () => {
    const { em, mona, issues, label } = await start("git");
    // The branch exists before the labels, so the app's first read downloads it: a fetch that finds
    // the branch absent or unmoved makes no upload-pack request for the fault to hit.
    await createGitHubStateStore({ github: githubOverOctokit(mona), owner, repo }).update(({ doc }) => ({
      doc,
      message: "seed the state branch",
    }));
    const mark = em.requests.mark();
    const gitMark = em.gitRequests.mark();
    em.faults.inject({ route: COMMENTS, status: 502, times: 2 });
    em.faults.inject({ route: GIT_RECEIVE_PACK_ROUTE, status: 502, times: 2 });
    em.faults.inject({ route: GIT_UPLOAD_PACK_ROUTE, status: 503, times: 1 });
    em.faults.inject({ route: GIT_INFO_REFS_ROUTE, status: 429, retryAfter: 1, times: 1 });
    await label();
    await expectOneTaskAndCommentEach(em, mona, issues);

    // The faults were really answered, and each faulted route later succeeded.
    const after = em.requests.entries.filter((e) => e.seq > mark);
    expect(after.filter((e) => e.route === COMMENTS && e.status === 502)).toHaveLength(2);
    expect(after.filter((e) => e.route === COMMENTS && e.status < 300).length).toBeGreaterThanOrEqual(3);
    const git = em.gitRequests.entries.filter((e) => e.seq > gitMark);
    const gitHits = (op: string, ok: (s: number) => boolean) =>
      git.filter((e) => e.path.endsWith(`.git/${op}`) && ok(e.status)).map((e) => e.seq);
    expect(gitHits("info/refs", (s) => s === 429)).toHaveLength(1);
    expect(gitHits("git-receive-pack", (s) => s === 502)).toHaveLength(2);
    const laterOk = (op: string, fault: number) => {
      const last = Math.max(...gitHits(op, (s) => s === fault));
      return gitHits(op, (s) => s === 200).filter((seq) => seq > last).length;
    };
    expect(gitHits("git-upload-pack", (s) => s === 503)).toHaveLength(1);
    expect(laterOk("git-upload-pack", 503)).toBeGreaterThanOrEqual(1);
    expect(laterOk("info/refs", 429)).toBeGreaterThanOrEqual(1);
    expect(laterOk("git-receive-pack", 502)).toBeGreaterThanOrEqual(1);
    // No state write went over REST.
    expect(after.filter((e) => e.route === CONTENTS || e.route === TREES)).toEqual([]);
  }, 60_000);
});
