import { createHmac } from "node:crypto";
import { type GitHubEmulator, startGitHubEmulator } from "@fleet/github-emulator";
import { Octokit } from "@octokit/rest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FleetServer, startFleetServer } from "../../src/app/server.ts";
import { FLEET_APP } from "../support/fleet-app.ts";

const REPO = "octo-org/widgets";

describe("labeled issue -> tracking comment, over real HTTP", () => {
  let gh: GitHubEmulator;
  let app: FleetServer;
  let maintainer: Octokit;
  let outsider: Octokit;

  beforeAll(async () => {
    gh = await startGitHubEmulator(FLEET_APP);
    await gh.createRepo({
      owner: "octo-org",
      name: "widgets",
      files: { "README.md": "# widgets\n", ".github/fleet.yml": "dispatch: local\n" },
    });
    gh.addCollaborator(REPO, "mona", "write");
    app = await startFleetServer({
      appId: gh.appId,
      privateKey: gh.privateKey,
      webhookSecret: gh.webhookSecret,
      baseUrl: gh.url,
      resilient: false,
      logLevel: "fatal",
      trackerIntervalMs: 0,
    });
    gh.setWebhookUrl(app.webhookUrl);
    maintainer = new Octokit({ baseUrl: gh.url, auth: gh.userToken("mona") });
    outsider = new Octokit({ baseUrl: gh.url, auth: gh.userToken("mallory") });
  });

  afterAll(async () => {
    await app?.stop();
    await gh?.stop();
  });

  /** Deliveries answered and handled (the app answers first and handles after), until both are quiet. */
  async function settle(): Promise<void> {
    for (let i = 0; i < 10; i++) {
      await gh.waitForDeliveries();
      await app.idle();
      if (!gh.deliveries().some((d) => d.status === "pending")) return;
    }
  }

  async function newIssue(title: string): Promise<number> {
    const { data } = await maintainer.rest.issues.create({
      owner: "octo-org",
      repo: "widgets",
      title,
      body: "Please.",
    });
    return data.number;
  }

  const fleetComments = (issue: number) => gh.comments(REPO, issue).filter((c) => c.user.type === "Bot");

  it("answers fleet:claude with one tracking comment, and a redelivery edits it", async () => {
    const issue = await newIssue("Add a changelog");
    await maintainer.rest.issues.addLabels({
      owner: "octo-org",
      repo: "widgets",
      issue_number: issue,
      labels: ["fleet:claude"],
    });
    await settle();

    const comments = fleetComments(issue);
    expect(comments).toHaveLength(1);
    expect(comments[0]!.body).toMatch(/<!-- fleet:tracking fl-[0-9a-z]+ -->/);
    // A free slot: queued and dispatched in the same commit.
    expect(comments[0]!.body).toMatch(/Fleet task `fl-[0-9a-z]+`: dispatched/);
    expect(comments[0]!.body).toContain("`claude`");

    const labeled = gh.deliveries().filter((d) => d.event === "issues" && d.action === "labeled");
    const last = labeled.at(-1)!;
    expect(await gh.redeliver(last.id)).toBe(200);
    await settle();
    expect(fleetComments(issue)).toHaveLength(1);
  });

  it("uses the model named in the label", async () => {
    const issue = await newIssue("Refactor the parser");
    await maintainer.rest.issues.addLabels({
      owner: "octo-org",
      repo: "widgets",
      issue_number: issue,
      labels: ["fleet:claude:opus"],
    });
    await settle();
    const [comment] = fleetComments(issue);
    expect(comment?.body).toContain("`opus`");
  });

  it("explains a malformed label and queues nothing", async () => {
    const issue = await newIssue("Typo in label");
    await maintainer.rest.issues.addLabels({
      owner: "octo-org",
      repo: "widgets",
      issue_number: issue,
      labels: ["fleet:clade"],
    });
    await settle();
    const comments = fleetComments(issue);
    expect(comments).toHaveLength(1);
    expect(comments[0]!.body).toContain("fleet:clade");
    expect(comments[0]!.body).toMatch(/claude/);
    expect(comments[0]!.body).not.toContain("fleet:tracking");
    // The app is still alive and answering after the bad label.
    await maintainer.rest.issues.addLabels({
      owner: "octo-org",
      repo: "widgets",
      issue_number: issue,
      labels: ["fleet:codex"],
    });
    await settle();
    expect(
      fleetComments(issue).some((c) => c.body.includes("fleet:tracking") && c.body.includes("`codex`")),
    ).toBe(true);
  });

  it("refuses a sender without write access and queues nothing", async () => {
    const issue = await newIssue("From a stranger");
    gh.addCollaborator(REPO, "mallory", "read");
    await outsider.rest.issues
      .addLabels({ owner: "octo-org", repo: "widgets", issue_number: issue, labels: ["fleet:claude"] })
      .catch(() => undefined);
    await settle();
    const bodies = fleetComments(issue).map((c) => c.body);
    expect(bodies.some((b) => b.includes("fleet:tracking"))).toBe(false);
  });

  it("rejects a webhook with a wrong signature and writes nothing", async () => {
    const issue = await newIssue("Forged");
    const before = gh.counts().total;
    const payload = JSON.stringify({
      action: "labeled",
      label: { name: "fleet:claude" },
      issue: { number: issue },
      repository: { name: "widgets", owner: { login: "octo-org" } },
      sender: { login: "mona", type: "User" },
      installation: { id: gh.installationId(REPO) },
    });
    const wrong = `sha256=${createHmac("sha256", "not-the-secret").update(payload).digest("hex")}`;
    const res = await fetch(app.webhookUrl, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-github-event": "issues",
        "x-github-delivery": "forged-1",
        "x-hub-signature-256": wrong,
      },
      body: payload,
    });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(fleetComments(issue)).toHaveLength(0);
    expect(gh.counts().total).toBe(before);
  });
});
