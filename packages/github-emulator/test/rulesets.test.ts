// Branch rulesets, as far as the emulator models them: "Require a pull request before merging" on the
// branches a ruleset targets refuses direct updates (git push, REST) from everyone not in its bypass
// list, and lets pull requests merge.
// https://docs.github.com/en/repositories/configuring-branches-and-merges-in-your-repository/managing-rulesets/about-rulesets
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createAppAuth } from "@octokit/auth-app";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GitHubEmulator, startGitHubEmulator } from "../src/index.ts";
import { gitAs, tokenOctokit, userOctokit } from "../src/test-helpers.ts";

const owner = "acme";
const repo = "ruled";
const FULL = `${owner}/${repo}`;

let em: GitHubEmulator;
let httpUrl: string;
let work: string;
let dir: string;

beforeAll(async () => {
  em = await startGitHubEmulator();
  ({ httpUrl } = await em.createRepo({ owner, name: repo, files: { "README.md": "# ruled\n" } }));
  em.addCollaborator(FULL, "mona", "write");
  work = await mkdtemp(join(tmpdir(), "fleet-gh-rulesets-"));
  dir = join(work, "clone");
  expect((await gitAs(work, em.userToken(owner), ["clone", "-q", httpUrl, dir])).code).toBe(0);
});
afterAll(async () => {
  await em?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

/** An installation token of the app for this repository with `contents: write` only. */
async function contentsToken(): Promise<string> {
  const auth = createAppAuth({ appId: em.appId, privateKey: em.privateKey });
  const jwt = ((await auth({ type: "app" })) as { token: string }).token;
  const { data } = await tokenOctokit(em, jwt).rest.apps.createInstallationAccessToken({
    installation_id: em.installationId(FULL),
    repositories: [repo],
    permissions: { contents: "write" },
  });
  return data.token;
}

/** A new commit on the clone's current branch. */
async function commit(name: string): Promise<string> {
  await writeFile(join(dir, name), `${name}\n`);
  await gitAs(dir, undefined, ["add", "."]);
  await gitAs(dir, undefined, ["commit", "-q", "-m", `Add ${name}`]);
  return (await gitAs(dir, undefined, ["rev-parse", "HEAD"])).stdout.trim();
}

const remoteHead = async (branch: string) =>
  (await gitAs(dir, em.userToken(owner), ["ls-remote", "origin", `refs/heads/${branch}`])).stdout.split(
    "\t",
  )[0];

describe("branch rulesets", () => {
  it("without one, an app token with contents: write pushes the default branch", async () => {
    // App permissions have no branch scope: contents: write reaches every branch.
    const sha = await commit("before-ruleset.txt");
    expect((await gitAs(dir, await contentsToken(), ["push", "-q", "origin", "HEAD:main"])).code).toBe(0);
    expect(await remoteHead("main")).toBe(sha);
  });

  it("'Require a pull request' on the default branch refuses direct updates, by git and REST, and lets a pull request merge", async () => {
    em.addRuleset(FULL, {
      name: "main through pull requests",
      include: ["~DEFAULT_BRANCH"],
      rules: ["pull_request"],
      bypass: [owner],
    });
    const token = await contentsToken();
    const before = await remoteHead("main");
    await commit("direct.txt");

    const byApp = await gitAs(dir, token, ["push", "origin", "HEAD:main"]);
    expect(byApp.code).not.toBe(0);
    expect(byApp.stderr).toContain("GH013: Repository rule violations found for refs/heads/main.");
    expect(byApp.stderr).toContain("- Changes must be made through a pull request.");
    // A person with write access, not in the bypass list, the same.
    expect((await gitAs(dir, em.userToken("mona"), ["push", "origin", "HEAD:main"])).code).not.toBe(0);
    expect(await remoteHead("main")).toBe(before);

    // By REST: moving the ref, or writing a file on the branch.
    const app = tokenOctokit(em, token);
    const refused = (p: Promise<unknown>) =>
      p.then(
        () => ({ status: 200, message: "" }),
        (e: { status: number; response: { data: { message: string } } }) => ({
          status: e.status,
          message: e.response.data.message,
        }),
      );
    const violation = {
      status: 422,
      message: "Repository rule violations found\n\nChanges must be made through a pull request.\n\n",
    };
    const { data: tip } = await app.rest.git.getRef({ owner, repo, ref: "heads/main" });
    expect(
      await refused(
        app.rest.git.updateRef({ owner, repo, ref: "heads/main", sha: tip.object.sha, force: true }),
      ),
    ).toEqual(violation);
    const put = (branch: string) =>
      app.rest.repos.createOrUpdateFileContents({
        owner,
        repo,
        path: "api.txt",
        message: "By the API",
        content: Buffer.from("api\n").toString("base64"),
        branch,
      });
    expect(await refused(put("main"))).toEqual(violation);
    expect(await remoteHead("main")).toBe(before);

    // Other branches are open to it, and a pull request merges into the default branch.
    expect((await gitAs(dir, token, ["push", "-q", "origin", "HEAD:refs/heads/topic"])).code).toBe(0);
    expect((await put("topic")).status).toBe(201);
    const mona = userOctokit(em, "mona");
    const { data: pr } = await mona.rest.pulls.create({
      owner,
      repo,
      head: "topic",
      base: "main",
      title: "Topic",
    });
    expect((await mona.rest.pulls.merge({ owner, repo, pull_number: pr.number })).data.merged).toBe(true);
    expect(await remoteHead("main")).not.toBe(before);

    // The bypass list: the owner pushes directly.
    await gitAs(dir, em.userToken(owner), ["pull", "-q", "--no-rebase", "origin", "main"]);
    const sha = await commit("by-owner.txt");
    expect((await gitAs(dir, em.userToken(owner), ["push", "-q", "origin", "HEAD:main"])).code).toBe(0);
    expect(await remoteHead("main")).toBe(sha);
  });

  it("targets branches by pattern (fnmatch) and leaves the others alone", async () => {
    const token = await contentsToken();
    await commit("release.txt");
    expect((await gitAs(dir, token, ["push", "-q", "origin", "HEAD:refs/heads/release/1"])).code).toBe(0);
    expect((await gitAs(dir, token, ["push", "-q", "origin", "HEAD:refs/heads/fleet/1-x"])).code).toBe(0);
    em.addRuleset(FULL, { name: "releases", include: ["refs/heads/release/*"], rules: ["pull_request"] });
    await commit("release-2.txt");
    const release = await gitAs(dir, token, ["push", "origin", "HEAD:refs/heads/release/1"]);
    expect(release.code).not.toBe(0);
    expect(release.stderr).toContain("GH013: Repository rule violations found for refs/heads/release/1.");
    expect((await gitAs(dir, token, ["push", "-q", "origin", "HEAD:refs/heads/fleet/1-x"])).code).toBe(0);
  });
});
