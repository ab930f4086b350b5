import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createNodeMiddleware, Probot, ProbotOctokit } from "probot";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GitHubEmulator, startGitHubEmulator } from "../src/index.ts";
import { userOctokit } from "../src/test-helpers.ts";

let em: GitHubEmulator;
let server: Server;
const seen: Array<{ event: string; action: string; sender: string }> = [];

beforeAll(async () => {
  em = await startGitHubEmulator();
  await em.createRepo({ owner: "acme", name: "bot", files: { "README.md": "x\n" } });
  em.addCollaborator("acme/bot", "maria", "write");
  const probot = new Probot({
    appId: em.appId,
    privateKey: em.privateKey,
    secret: em.webhookSecret,
    baseUrl: em.url,
    logLevel: "warn",
    // Counting tests must see every request once: no hidden retries or throttling waits.
    Octokit: ProbotOctokit.defaults({ throttle: { enabled: false }, retry: { enabled: false } }),
  });
  const middleware = await createNodeMiddleware(
    (app) => {
      app.on("issues.labeled", async (context) => {
        seen.push({
          event: context.name,
          action: context.payload.action,
          sender: context.payload.sender.login,
        });
        // The app ignores its own events, as Fleet must.
        if (context.payload.sender.type === "Bot") return;
        await context.octokit.rest.issues.createComment(
          context.issue({ body: `Queued for ${context.payload.label?.name}` }),
        );
        await context.octokit.rest.issues.addLabels(context.issue({ labels: ["fleet:queued"] }));
      });
    },
    { probot },
  );
  server = createServer((req, res) => {
    Promise.resolve(
      middleware(req, res, () => {
        res.writeHead(404);
        res.end();
      }),
    ).catch(() => {
      res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  em.setWebhookUrl(`http://127.0.0.1:${(server.address() as AddressInfo).port}/api/github/webhooks`);
});
afterAll(async () => {
  await em?.stop();
  await new Promise((r) => server?.close(r));
});

describe("the real Probot against the emulator", () => {
  it("receives issues.labeled, replies with a comment as the bot, and ignores its own label event", async () => {
    const gh = userOctokit(em, "maria");
    await gh.issues.create({ owner: "acme", repo: "bot", title: "Build it" });
    const mark = em.requests.mark();
    await gh.issues.addLabels({ owner: "acme", repo: "bot", issue_number: 1, labels: ["fleet:claude"] });
    // The app's own label is enqueued while the first delivery is still in flight (Probot answers
    // after its handlers finish), so one wait covers the cascade.
    await em.waitForDeliveries();

    expect(em.comments("acme/bot", 1)).toEqual([
      {
        id: expect.any(Number),
        body: "Queued for fleet:claude",
        user: { login: "emulated-app[bot]", type: "Bot" },
      },
    ]);
    expect(em.issue("acme/bot", 1)?.labels).toEqual(["fleet:claude", "fleet:queued"]);
    expect(seen).toEqual([
      { event: "issues", action: "labeled", sender: "maria" },
      { event: "issues", action: "labeled", sender: "emulated-app[bot]" },
    ]);
    expect(
      em
        .deliveries()
        .filter((d) => d.event === "issues")
        .every((d) => d.status === 200),
    ).toBe(true);
    const c = em.counts({ since: mark });
    expect(c.byRoute["POST /app/installations/{installation_id}/access_tokens"]).toBe(1);
    expect(c.byRoute["POST /repos/{owner}/{repo}/issues/{issue_number}/comments"]).toBe(1);
    expect(c.contentCreating).toBe(1);
  });
});
