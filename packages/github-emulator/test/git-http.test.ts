import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { createAppAuth } from "@octokit/auth-app";
import { Octokit } from "@octokit/rest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GitHubEmulator, startGitHubEmulator } from "../src/index.ts";
import { userOctokit } from "../src/test-helpers.ts";

const run = promisify(execFile);
const env = {
  ...process.env,
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_TERMINAL_PROMPT: "0",
};
const basic = (token: string) =>
  `Authorization: Basic ${Buffer.from(`x-access-token:${token}`).toString("base64")}`;

/** git with an optional token in `http.extraHeader`; resolves to exit code and output instead of throwing. */
async function git(cwd: string, token: string | undefined, ...args: string[]) {
  const auth = token ? ["-c", `http.extraHeader=${basic(token)}`] : [];
  try {
    const r = await run(
      "git",
      ["-c", "user.name=Test", "-c", "user.email=test@example.invalid", ...auth, ...args],
      { cwd, env },
    );
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return { code: err.code ?? 1, stdout: err.stdout ?? "", stderr: err.stderr ?? "" };
  }
}

let em: GitHubEmulator;
let work: string;
let httpUrl: string;
let privateUrl: string;
let botToken: string;

beforeAll(async () => {
  em = await startGitHubEmulator();
  ({ httpUrl } = await em.createRepo({ owner: "acme", name: "app", files: { "README.md": "hello\n" } }));
  ({ httpUrl: privateUrl } = await em.createRepo({
    owner: "acme",
    name: "secret",
    private: true,
    files: { "README.md": "secret\n" },
  }));
  em.addCollaborator("acme/app", "reader", "read");
  const app = new Octokit({
    baseUrl: em.url,
    authStrategy: createAppAuth,
    auth: { appId: em.appId, privateKey: em.privateKey, installationId: em.installationId("acme/app") },
  });
  ({ token: botToken } = (await app.auth({ type: "installation" })) as { token: string });
  work = await mkdtemp(join(tmpdir(), "fleet-gh-git-http-"));
});
afterAll(async () => {
  await em?.stop();
  await rm(work, { recursive: true, force: true });
});

describe("git smart HTTP", () => {
  it("clones and pushes with an installation token; the push emits push and synchronize as the bot", async () => {
    expect(httpUrl).toBe(`${em.url}/acme/app.git`);
    const dir = join(work, "bot");
    const restMark = em.requests.mark();
    const gitMark = em.gitRequests.mark();
    expect((await git(work, botToken, "clone", "-q", httpUrl, dir)).code).toBe(0);
    await git(dir, undefined, "checkout", "-q", "-b", "fleet/7-fix");
    await writeFile(join(dir, "fix.txt"), "one\n");
    await git(dir, undefined, "add", ".");
    await git(dir, undefined, "commit", "-q", "-m", "First fix");
    const pushed = await git(dir, botToken, "push", "-q", "origin", "fleet/7-fix");
    expect(pushed).toMatchObject({ code: 0 });

    const gh = userOctokit(em, "acme");
    const head = (await git(dir, undefined, "rev-parse", "HEAD")).stdout.trim();
    const { data: ref } = await gh.git.getRef({ owner: "acme", repo: "app", ref: "heads/fleet/7-fix" });
    expect(ref.object.sha).toBe(head);
    const { data: pr } = await gh.pulls.create({
      owner: "acme",
      repo: "app",
      head: "fleet/7-fix",
      base: "main",
      title: "Fix",
    });

    await writeFile(join(dir, "fix.txt"), "two\n");
    await git(dir, undefined, "commit", "-q", "-am", "Second fix");
    expect((await git(dir, botToken, "push", "-q", "origin", "fleet/7-fix")).code).toBe(0);
    const second = (await git(dir, undefined, "rev-parse", "HEAD")).stdout.trim();

    // Reported before the push returns (the file:// hook reports asynchronously).
    const pushes = em.deliveries().filter((d) => d.event === "push");
    expect(pushes.map((d) => (d.payload as { after: string }).after)).toEqual([head, second]);
    const sync = em.deliveries().find((d) => d.event === "pull_request" && d.action === "synchronize");
    expect(sync?.payload).toMatchObject({
      number: pr.number,
      after: second,
      sender: { login: em.botLogin },
    });
    const [created, moved] = em.deliveries().filter((d) => d.event === "push");
    expect(created!.payload).toMatchObject({
      ref: "refs/heads/fleet/7-fix",
      created: true,
      // A new branch lists the commits no other branch has, as GitHub does.
      commits: [{ id: head, message: "First fix", added: ["fix.txt"] }],
      head_commit: { id: head },
      pusher: { name: em.botLogin },
      sender: { login: em.botLogin, type: "Bot" },
    });
    expect(moved!.payload).toMatchObject({
      before: head,
      created: false,
      forced: false,
      head_commit: { id: second, message: "Second fix" },
      pusher: { name: em.botLogin },
    });

    // Git requests are logged apart; the REST counts saw only the two REST calls above.
    const gitCounts = em.gitRequests.counts({ since: gitMark });
    expect(gitCounts.fetches).toBeGreaterThanOrEqual(2);
    expect(gitCounts.pushes).toBe(4);
    expect(em.gitRequests.entries.at(-1)).toMatchObject({
      method: "POST",
      service: "git-receive-pack",
      status: 200,
      actor: em.botLogin,
    });
    expect(em.counts({ since: restMark }).byRoute).toEqual({
      "GET /repos/{owner}/{repo}/git/ref/{ref}": 1,
      "POST /repos/{owner}/{repo}/pulls": 1,
    });
  });

  it("asks for credentials (401, Basic realm) without or with a bad token; public repositories clone anonymously", async () => {
    const noAuth = await fetch(`${privateUrl}/info/refs?service=git-upload-pack`);
    expect(noAuth.status).toBe(401);
    expect(noAuth.headers.get("www-authenticate")).toBe('Basic realm="GitHub"');
    const bad = await fetch(`${httpUrl}/info/refs?service=git-upload-pack`, {
      headers: { authorization: `Basic ${Buffer.from("x-access-token:ghs_nope").toString("base64")}` },
    });
    expect(bad.status).toBe(401);
    const pushNoAuth = await fetch(`${httpUrl}/info/refs?service=git-receive-pack`);
    expect(pushNoAuth.status).toBe(401);

    const denied = await git(work, undefined, "clone", "-q", privateUrl, join(work, "anon-secret"));
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toMatch(/could not read Username|Authentication failed/);
    expect((await git(work, undefined, "clone", "-q", httpUrl, join(work, "anon"))).code).toBe(0);
    expect((await git(work, botToken, "clone", "-q", privateUrl, join(work, "bot-secret"))).code).toBe(0);
    // An outsider cannot even see a private repository.
    const outsider = await git(work, em.userToken("outsider"), "ls-remote", privateUrl);
    expect(outsider.code).not.toBe(0);
    expect(outsider.stderr).toMatch(/not found/i);
  });

  it("lets a read-only collaborator fetch but refuses the push (403)", async () => {
    const token = em.userToken("reader");
    const dir = join(work, "reader");
    expect((await git(work, token, "clone", "-q", httpUrl, dir)).code).toBe(0);
    await writeFile(join(dir, "r.txt"), "r\n");
    await git(dir, undefined, "add", ".");
    await git(dir, undefined, "commit", "-q", "-m", "reader change");
    const before = em.deliveries().length;
    const pushed = await git(dir, token, "push", "origin", "HEAD:refs/heads/reader");
    expect(pushed.code).not.toBe(0);
    expect(pushed.stderr).toMatch(/403/);
    expect(em.gitRequests.entries.at(-1)).toMatchObject({ service: "git-receive-pack", status: 403 });
    const { stdout } = await git(work, token, "ls-remote", httpUrl, "refs/heads/reader");
    expect(stdout).toBe("");
    expect(em.deliveries().length).toBe(before);
  });

  it("rejects a non-fast-forward push and keeps the branch", async () => {
    const token = em.userToken("acme");
    const a = join(work, "nff-a");
    const b = join(work, "nff-b");
    await git(work, token, "clone", "-q", httpUrl, a);
    await git(work, token, "clone", "-q", httpUrl, b);
    for (const [dir, text] of [
      [a, "from a\n"],
      [b, "from b\n"],
    ] as const) {
      await writeFile(join(dir, "race.txt"), text);
      await git(dir, undefined, "add", ".");
      await git(dir, undefined, "commit", "-q", "-m", text.trim());
    }
    expect((await git(a, token, "push", "-q", "origin", "main")).code).toBe(0);
    const loser = await git(b, token, "push", "origin", "main");
    expect(loser.code).not.toBe(0);
    expect(loser.stderr).toMatch(/rejected/);
    const head = (await git(a, undefined, "rev-parse", "HEAD")).stdout.trim();
    const { stdout } = await git(work, token, "ls-remote", httpUrl, "refs/heads/main");
    expect(stdout.split("\t")[0]).toBe(head);
  });
});
