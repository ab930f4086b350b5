import { createAppAuth } from "@octokit/auth-app";
import { Octokit } from "@octokit/rest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GitHubEmulator, startGitHubEmulator } from "../src/index.ts";
import { userOctokit } from "../src/test-helpers.ts";

let em: GitHubEmulator;

beforeAll(async () => {
  em = await startGitHubEmulator();
  await em.createRepo({ owner: "acme", name: "api", files: { "README.md": "x\n" } });
  em.addCollaborator("acme/api", "maria", "write");
});
afterAll(async () => {
  await em?.stop();
});

describe("OpenAPI check, faults, counts, app auth", () => {
  it("rejects a body GitHub would reject (body: 123) with 422 Invalid request", async () => {
    const gh = userOctokit(em, "maria");
    await gh.issues.create({ owner: "acme", repo: "api", title: "t" });
    const err = await gh
      .request("POST /repos/{owner}/{repo}/issues/{issue_number}/comments", {
        owner: "acme",
        repo: "api",
        issue_number: 1,
        body: 123 as unknown as string,
      })
      .catch((e) => e);
    expect(err.status).toBe(422);
    expect(err.response.data.message).toMatch(/^Invalid request/);
    expect(err.response.data.errors[0]).toMatchObject({ field: "body", code: "invalid" });
    expect(em.comments("acme/api", 1)).toEqual([]);
  });

  it("reports routes it does not implement (404, recorded) and routes not in the spec", async () => {
    const gh = userOctokit(em, "maria");
    const err = await gh
      .request("GET /repos/{owner}/{repo}/releases", { owner: "acme", repo: "api" })
      .catch((e) => e);
    expect(err.status).toBe(404);
    expect(err.response.data.message).toBe("Not Found (not implemented by the GitHub emulator)");
    const bogus = await gh.request("GET /definitely/not/github").catch((e) => e);
    expect(bogus.status).toBe(404);
    expect(em.unimplemented()).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ method: "GET", route: "GET /repos/{owner}/{repo}/releases", inSpec: true }),
        expect.objectContaining({ method: "GET", path: "/definitely/not/github", inSpec: false }),
      ]),
    );
  });

  it("injects a 5xx once, then succeeds", async () => {
    const gh = userOctokit(em, "maria");
    em.faults.inject({ route: "GET /repos/{owner}/{repo}/issues/{issue_number}", status: 502, times: 1 });
    await expect(gh.issues.get({ owner: "acme", repo: "api", issue_number: 1 })).rejects.toMatchObject({
      status: 502,
    });
    const { data } = await gh.issues.get({ owner: "acme", repo: "api", issue_number: 1 });
    expect(data.number).toBe(1);
  });

  it("injects a secondary rate limit: 403 with retry-after and GitHub's message", async () => {
    const gh = userOctokit(em, "maria");
    em.faults.inject({
      route: "/repos/{owner}/{repo}/issues/{issue_number}/comments",
      status: 403,
      retryAfter: 7,
      times: 1,
    });
    const err = await gh.issues
      .createComment({ owner: "acme", repo: "api", issue_number: 1, body: "hi" })
      .catch((e) => e);
    expect(err.status).toBe(403);
    expect(err.response.headers["retry-after"]).toBe("7");
    expect(err.response.data.message).toMatch(/You have exceeded a secondary rate limit/);
    await gh.issues.createComment({ owner: "acme", repo: "api", issue_number: 1, body: "hi" });
    expect(em.comments("acme/api", 1).map((c) => c.body)).toEqual(["hi"]);
    em.faults.clear();
  });

  it("counts requests by class and route", async () => {
    const gh = userOctokit(em, "maria");
    const mark = em.requests.mark();
    await gh.issues.get({ owner: "acme", repo: "api", issue_number: 1 });
    await gh.issues.listComments({ owner: "acme", repo: "api", issue_number: 1 });
    await gh.issues.createComment({ owner: "acme", repo: "api", issue_number: 1, body: "counted" });
    await gh.issues.addLabels({ owner: "acme", repo: "api", issue_number: 1, labels: ["bug"] });
    await gh.issues.create({ owner: "acme", repo: "api", title: "another" });
    const c = em.counts({ since: mark });
    expect(c).toEqual({
      total: 5,
      reads: 2,
      writes: 3,
      contentCreating: 2,
      byRoute: {
        "GET /repos/{owner}/{repo}/issues/{issue_number}": 1,
        "GET /repos/{owner}/{repo}/issues/{issue_number}/comments": 1,
        "POST /repos/{owner}/{repo}/issues/{issue_number}/comments": 1,
        "POST /repos/{owner}/{repo}/issues/{issue_number}/labels": 1,
        "POST /repos/{owner}/{repo}/issues": 1,
      },
    });
  });

  it("runs the app installation token flow: JWT -> access token -> repo call as the bot", async () => {
    const appOctokit = new Octokit({
      baseUrl: em.url,
      authStrategy: createAppAuth,
      auth: { appId: em.appId, privateKey: em.privateKey },
    });
    const { data: app } = await appOctokit.apps.getAuthenticated();
    expect(app?.slug).toBe("emulated-app");
    const { data: inst } = await appOctokit.apps.getRepoInstallation({ owner: "acme", repo: "api" });
    expect(inst.id).toBe(em.installationId("acme/api"));
    // A JWT is not a repository credential.
    const { token: jwt } = (await appOctokit.auth({ type: "app" })) as { token: string };
    const withJwt = new Octokit({ baseUrl: em.url, auth: jwt });
    await expect(withJwt.issues.get({ owner: "acme", repo: "api", issue_number: 1 })).rejects.toMatchObject({
      status: 401,
    });

    const bot = new Octokit({
      baseUrl: em.url,
      authStrategy: createAppAuth,
      auth: { appId: em.appId, privateKey: em.privateKey, installationId: inst.id },
    });
    const { data: comment } = await bot.issues.createComment({
      owner: "acme",
      repo: "api",
      issue_number: 1,
      body: "from the app",
    });
    expect(comment.user?.login).toBe("emulated-app[bot]");
    expect(comment.user?.type).toBe("Bot");
    const routes = em.requests.entries.map((e) => e.route);
    expect(routes).toContain("POST /app/installations/{installation_id}/access_tokens");

    const forged = new Octokit({ baseUrl: em.url, auth: "ghs_not_a_real_token" });
    await expect(forged.issues.get({ owner: "acme", repo: "api", issue_number: 1 })).rejects.toMatchObject({
      status: 401,
    });
  });

  it("serves rate limit headers, GET /user and GET /repos/{owner}/{repo}", async () => {
    const gh = userOctokit(em, "maria");
    const res = await gh.users.getAuthenticated();
    expect(res.data.login).toBe("maria");
    expect(Number(res.headers["x-ratelimit-limit"])).toBe(5000);
    expect(Number(res.headers["x-ratelimit-remaining"])).toBeLessThan(5000);
    const { data: repo } = await gh.repos.get({ owner: "acme", repo: "api" });
    expect(repo.default_branch).toBe("main");
    expect(repo.permissions?.push).toBe(true);
  });
});

describe("limits and extra routes", () => {
  it("enforces content-creation secondary limits when asked, and the primary rate limit", async () => {
    const limited = await startGitHubEmulator({ contentLimits: { perMinute: 3 }, rateLimit: 10 });
    try {
      await limited.createRepo({ owner: "acme", name: "lim" });
      const gh = userOctokit(limited, "acme");
      for (let i = 0; i < 3; i++) await gh.issues.create({ owner: "acme", repo: "lim", title: `t${i}` });
      const err = await gh.issues.create({ owner: "acme", repo: "lim", title: "t4" }).catch((e) => e);
      expect(err.status).toBe(403);
      expect(Number(err.response.headers["retry-after"])).toBeGreaterThan(0);
      expect(err.response.data.message).toMatch(/secondary rate limit/);
      // Reads are not content creation, but they spend the primary limit of 10 until it runs out.
      let over: { status?: number; response?: { headers: Record<string, string> } } = {};
      for (let i = 0; i < 12 && over.status !== 403; i++) {
        over = await gh.issues.get({ owner: "acme", repo: "lim", issue_number: 1 }).catch((e) => e);
      }
      expect(over.status).toBe(403);
      expect(over.response?.headers["x-ratelimit-remaining"]).toBe("0");
    } finally {
      await limited.stop();
    }
  });

  it("refuses a caller's request beyond 100 in flight at once, as GitHub's secondary limit does; other callers and later requests pass", async () => {
    const limited = await startGitHubEmulator({});
    try {
      await limited.createRepo({ owner: "acme", name: "busy" });
      // Every request is held 300 ms in the server, so 101 sent at once are all in flight together.
      limited.faults.inject({ route: "GET /repos/{owner}/{repo}", latencyMs: 300 });
      const acme = userOctokit(limited, "acme");
      const [answers, other] = await Promise.all([
        Promise.all(
          Array.from({ length: 101 }, () =>
            acme.repos.get({ owner: "acme", repo: "busy" }).then(
              (r) => r.status,
              (e) => e,
            ),
          ),
        ),
        // Another caller's limit is its own.
        userOctokit(limited, "maria").repos.get({ owner: "acme", repo: "busy" }),
      ]);
      expect(other.status).toBe(200);
      const refused = answers.filter((a) => typeof a !== "number");
      expect(answers.filter((a) => a === 200)).toHaveLength(100);
      expect(refused).toHaveLength(1);
      expect(refused[0].status).toBe(403);
      expect(refused[0].response.data.message).toMatch(/secondary rate limit/);
      expect(Number(refused[0].response.headers["retry-after"])).toBeGreaterThan(0);
      expect(limited.peakConcurrentRequests()).toEqual({ "user:acme": 100, "user:maria": 1 });
      // Once they are answered, the same caller is served again.
      limited.faults.clear();
      expect((await acme.repos.get({ owner: "acme", repo: "busy" })).status).toBe(200);
    } finally {
      await limited.stop();
    }
  });

  it("serves commits, compare and comment reactions", async () => {
    const gh = userOctokit(em, "maria");
    const { data: c } = await gh.repos.getCommit({ owner: "acme", repo: "api", ref: "main" });
    expect(c.commit.message).toBe("Initial commit");
    const { data: cmp } = await gh.repos.compareCommitsWithBasehead({
      owner: "acme",
      repo: "api",
      basehead: "main...main",
    });
    expect(cmp.status).toBe("identical");
    const { data: comment } = await gh.issues.createComment({
      owner: "acme",
      repo: "api",
      issue_number: 1,
      body: "/fleet status",
    });
    const first = await gh.reactions.createForIssueComment({
      owner: "acme",
      repo: "api",
      comment_id: comment.id,
      content: "eyes",
    });
    const again = await gh.reactions.createForIssueComment({
      owner: "acme",
      repo: "api",
      comment_id: comment.id,
      content: "eyes",
    });
    expect([first.status, again.status]).toEqual([201, 200]);
  });
});
