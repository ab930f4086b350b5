import { Octokit } from "@octokit/rest";
import { afterAll, describe, expect, it } from "vitest";
import { type FleetServer, startFleetServer } from "../../src/app/server.ts";
import { type GitHubEmulator, startGitHubEmulator } from "../../src/offline/github/index.ts";
import { createGitHubStateStore } from "../../src/state/github-store.ts";

const COMMENTS = "POST /repos/{owner}/{repo}/issues/{issue_number}/comments";
const CONTENTS = "PUT /repos/{owner}/{repo}/contents/{path}";
const TREES = "POST /repos/{owner}/{repo}/git/trees";

describe("GitHub faults on write routes", () => {
  let gh: GitHubEmulator | undefined;
  let app: FleetServer | undefined;
  afterAll(async () => {
    await app?.stop();
    await gh?.stop();
  });

  it("5xx and secondary rate limits are retried and no labeled issue is dropped", async () => {
    gh = await startGitHubEmulator();
    const owner = "octo-org";
    const repo = "widgets";
    const full = `${owner}/${repo}`;
    await gh.createRepo({
      owner,
      name: repo,
      files: { "README.md": "# widgets\n", ".github/fleet.yml": "dispatch: local\n" },
    });
    gh.addCollaborator(full, "mona", "write");
    app = await startFleetServer({
      appId: gh.appId,
      privateKey: gh.privateKey,
      webhookSecret: gh.webhookSecret,
      baseUrl: gh.url,
      resilient: true,
      logLevel: "fatal",
      trackerIntervalMs: 0,
      reconcileMs: 0,
    });
    gh.setWebhookUrl(app.webhookUrl);
    const mona = new Octokit({ baseUrl: gh.url, auth: gh.userToken("mona") });
    const settle = async () => {
      for (let i = 0; i < 20; i++) {
        await gh!.waitForDeliveries();
        await app!.idle();
        if (!gh!.deliveries().some((d) => d.status === "pending")) return;
      }
    };

    const issues: number[] = [];
    for (const title of ["One", "Two", "Three"]) {
      const { data } = await mona.rest.issues.create({ owner, repo, title });
      issues.push(data.number);
    }
    await settle();
    const mark = gh.requests.mark();

    gh.faults.inject({ route: COMMENTS, status: 502, times: 2 });
    gh.faults.inject({ route: CONTENTS, status: 403, retryAfter: 1, times: 1 });
    gh.faults.inject({ route: TREES, status: 503, times: 1 });

    for (const n of issues) {
      await mona.rest.issues.addLabels({ owner, repo, issue_number: n, labels: ["fleet:claude"] });
    }
    await settle();

    const reader = createGitHubStateStore({ octokit: mona, owner, repo });
    const tasks = Object.values((await reader.read()).doc.tasks);
    for (const n of issues) {
      expect(
        tasks.filter((t) => t.issue === n),
        `tasks for #${n}`,
      ).toHaveLength(1);
      const tracking = gh
        .comments(full, n)
        .filter((c) => c.user.type === "Bot" && c.body.includes("fleet:tracking"));
      expect(tracking, `tracking comments on #${n}`).toHaveLength(1);
    }

    // The faults were really answered, and each faulted route later succeeded.
    const after = gh.requests.entries.filter((e) => e.seq > mark);
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
  }, 40_000);
});
