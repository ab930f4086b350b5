import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { type GitHubEmulator, startGitHubEmulator } from "@fleet/github-emulator";
import { Octokit } from "@octokit/rest";
import { execa } from "execa";
import { afterAll, describe, expect, it } from "vitest";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import { createGitHubStateStore } from "../../src/state/github-store.ts";
import { waitFor } from "../support/bot-client.ts";
import { FLEET_APP } from "../support/fleet-app.ts";
import { freePort } from "../support/free-port.ts";

const root = resolve(import.meta.dirname, "../..");
const PERMISSION = "GET /repos/{owner}/{repo}/collaborators/{username}/permission";

// `fleet serve` is Probot's runner with Fleet's app: it answers deliveries on receipt, so a stop must
// let the answered ones finish, or a label GitHub saw answered would wait for the next reconcile.
describe("fleet serve stopped by SIGTERM", () => {
  let gh: GitHubEmulator | undefined;
  let cwd: string | undefined;
  afterAll(async () => {
    await gh?.stop();
    if (cwd) await rm(cwd, { recursive: true, force: true });
  });

  it("finishes the deliveries it answered before it exits", async () => {
    gh = await startGitHubEmulator(FLEET_APP);
    const owner = "octo-org";
    const repo = "widgets";
    await gh.createRepo({
      owner,
      name: repo,
      files: { "README.md": "# widgets\n", ".github/fleet.yml": "dispatch: local\n" },
    });
    gh.addCollaborator(`${owner}/${repo}`, "mona", "write");
    const mona = new Octokit({ baseUrl: gh.url, auth: gh.userToken("mona") });
    const issue = (await mona.rest.issues.create({ owner, repo, title: "Label, then stop" })).data.number;

    const port = await freePort();
    cwd = await mkdtemp(join(tmpdir(), "fleet-serve-"));
    const env: Record<string, string | undefined> = {
      ...process.env,
      APP_ID: String(gh.appId),
      PRIVATE_KEY: gh.privateKey,
      WEBHOOK_SECRET: gh.webhookSecret,
      // Probot reaches a GitHub other than github.com through GHE_HOST (the API under /api/v3).
      GHE_HOST: new URL(gh.url).host,
      GHE_PROTOCOL: "http",
      PORT: String(port),
      LOG_LEVEL: "warn",
      NO_SMEE_SETUP: "true",
    };
    delete env.WEBHOOK_PROXY_URL;
    const child = execa(process.execPath, [join(root, "bin/fleet.js"), "serve"], {
      cwd,
      env,
      extendEnv: false,
      reject: false,
      all: true,
      // The stop may take its drain and flush windows: execa's SIGKILL after 5 s would cut it short.
      forceKillAfterDelay: false,
    });
    await waitFor(
      "fleet serve listening",
      async () =>
        (await fetch(`http://127.0.0.1:${port}/ping`)
          .then((r) => r.status)
          .catch(() => 0)) === 200,
      20_000,
    );
    gh.setWebhookUrl(`http://127.0.0.1:${port}/api/github/webhooks`);
    // The labeler's permission comes back after 1.5 s: the delivery is answered long before it is handled.
    gh.faults.inject({ route: PERMISSION, latencyMs: 1_500 });
    await mona.rest.issues.addLabels({ owner, repo, issue_number: issue, labels: ["fleet:claude"] });
    await gh.waitForDeliveries();
    const labeled = gh.deliveries().findLast((d) => d.event === "issues" && d.action === "labeled")!;
    expect(labeled.status).toBe(200);
    const reader = createGitHubStateStore({ github: githubOverOctokit(mona), owner, repo });
    const taskOfIssue = async () =>
      Object.values((await reader.read()).doc.tasks).find((t) => t.issue === issue);
    expect(await taskOfIssue()).toBeUndefined();

    child.kill("SIGTERM");
    const result = await child;
    expect(result.exitCode, result.all).toBe(0);
    expect(result.all).toMatch(/SIGTERM, finishing 1 deliveries/);
    expect((await taskOfIssue())?.state, result.all).toBe("dispatched");
  }, 60_000);
});
