import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GitHubEmulator, startGitHubEmulator } from "../src/index.ts";
import { userOctokit } from "../src/test-helpers.ts";

const run = promisify(execFile);
const env = { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" };
const git = (cwd: string, ...args: string[]) =>
  run("git", ["-c", "user.name=Test", "-c", "user.email=test@example.invalid", ...args], { cwd, env });

let em: GitHubEmulator;
let work: string;
let cloneUrl: string;

beforeAll(async () => {
  em = await startGitHubEmulator();
  ({ cloneUrl } = await em.createRepo({
    owner: "acme",
    name: "app",
    files: { "README.md": "hello\n", "src/a.txt": "a\n" },
  }));
  work = await mkdtemp(join(tmpdir(), "fleet-gh-test-"));
});
afterAll(async () => {
  await em?.stop();
  await rm(work, { recursive: true, force: true });
});

describe("git-backed repositories", () => {
  it("sees a real git push and opens a PR on the pushed branch; a missing branch is refused 422", async () => {
    const dir = join(work, "clone");
    await run("git", ["clone", "-q", cloneUrl, dir], { env });
    await git(dir, "checkout", "-q", "-b", "fleet/1-feature");
    await writeFile(join(dir, "feature.txt"), "new feature\n");
    await git(dir, "add", ".");
    await git(dir, "commit", "-q", "-m", "Add feature");
    await git(dir, "push", "-q", "origin", "fleet/1-feature");
    const { stdout: head } = await git(dir, "rev-parse", "HEAD");

    const gh = userOctokit(em, "acme");
    const { data: ref } = await gh.git.getRef({ owner: "acme", repo: "app", ref: "heads/fleet/1-feature" });
    expect(ref.object.sha).toBe(head.trim());
    const { data: file } = await gh.repos.getContent({
      owner: "acme",
      repo: "app",
      path: "feature.txt",
      ref: "fleet/1-feature",
    });
    expect(Buffer.from((file as { content: string }).content, "base64").toString()).toBe("new feature\n");

    const { data: pr } = await gh.pulls.create({
      owner: "acme",
      repo: "app",
      head: "fleet/1-feature",
      base: "main",
      title: "Feature",
      body: "Closes #1",
    });
    expect(pr.head.sha).toBe(head.trim());
    expect(pr.changed_files).toBe(1);
    expect(em.pulls("acme/app")).toMatchObject([
      { number: pr.number, head: "fleet/1-feature", base: "main", state: "open", merged: false },
    ]);

    await expect(
      gh.pulls.create({ owner: "acme", repo: "app", head: "fleet/nope", base: "main", title: "x" }),
    ).rejects.toMatchObject({
      status: 422,
      response: { data: { message: "Validation Failed" } },
    });

    const { data: merged } = await gh.pulls.merge({ owner: "acme", repo: "app", pull_number: pr.number });
    expect(merged.merged).toBe(true);
    const { data: mainRef } = await gh.git.getRef({ owner: "acme", repo: "app", ref: "heads/main" });
    expect(mainRef.object.sha).toBe(merged.sha);
    const { data: mergeCommit } = await gh.git.getCommit({
      owner: "acme",
      repo: "app",
      commit_sha: merged.sha,
    });
    expect(mergeCommit.parents.map((p) => p.sha)).toContain(head.trim());
    expect(em.pulls("acme/app")[0]).toMatchObject({ state: "closed", merged: true });
    await expect(
      gh.pulls.merge({ owner: "acme", repo: "app", pull_number: pr.number }),
    ).rejects.toMatchObject({ status: 405 });
    await em.waitForDeliveries();
    const events = em.deliveries().map((d) => `${d.event}.${d.action ?? ""}`);
    expect(events).toContain("push.");
    expect(events).toContain("pull_request.closed");
  });

  it("refuses a contents write with a stale sha (409) and accepts the current one", async () => {
    const gh = userOctokit(em, "acme");
    const { data: cur } = await gh.repos.getContent({ owner: "acme", repo: "app", path: "src/a.txt" });
    const sha = (cur as { sha: string }).sha;
    const put = (s: string | undefined, text: string) =>
      gh.repos.createOrUpdateFileContents({
        owner: "acme",
        repo: "app",
        path: "src/a.txt",
        message: "edit",
        content: Buffer.from(text).toString("base64"),
        ...(s ? { sha: s } : {}),
      });
    const { data: ok } = await put(sha, "b\n");
    await expect(put(sha, "c\n")).rejects.toMatchObject({
      status: 409,
      response: { data: { message: `src/a.txt does not match ${sha}` } },
    });
    await expect(put(undefined, "c\n")).rejects.toMatchObject({ status: 422 });
    const { data: created } = await gh.repos.createOrUpdateFileContents({
      owner: "acme",
      repo: "app",
      path: "docs/new/deep.md",
      message: "add",
      content: Buffer.from("deep").toString("base64"),
      branch: "main",
    });
    expect(created.content?.path).toBe("docs/new/deep.md");
    expect(ok.commit.sha).not.toBe(created.commit.sha);
  });

  it("refuses a non-fast-forward ref update with 422 and accepts it with force", async () => {
    const gh = userOctokit(em, "acme");
    const { data: main } = await gh.git.getRef({ owner: "acme", repo: "app", ref: "heads/main" });
    const base = main.object.sha;
    const { data: baseCommit } = await gh.git.getCommit({ owner: "acme", repo: "app", commit_sha: base });
    const { data: tree } = await gh.git.createTree({
      owner: "acme",
      repo: "app",
      base_tree: baseCommit.tree.sha,
      tree: [{ path: "state/fleet.json", mode: "100644", type: "blob", content: '{"v":1}' }],
    });
    const { data: c1 } = await gh.git.createCommit({
      owner: "acme",
      repo: "app",
      message: "state 1",
      tree: tree.sha,
      parents: [base],
    });
    await gh.git.createRef({ owner: "acme", repo: "app", ref: "refs/heads/fleet/state", sha: c1.sha });
    await expect(
      gh.git.createRef({ owner: "acme", repo: "app", ref: "refs/heads/fleet/state", sha: c1.sha }),
    ).rejects.toMatchObject({
      status: 422,
      response: { data: { message: "Reference already exists" } },
    });
    // A sibling of c1 (same parent) is not a fast-forward from c1.
    const { data: c2 } = await gh.git.createCommit({
      owner: "acme",
      repo: "app",
      message: "state 2",
      tree: tree.sha,
      parents: [base],
    });
    await expect(
      gh.git.updateRef({ owner: "acme", repo: "app", ref: "heads/fleet/state", sha: c2.sha }),
    ).rejects.toMatchObject({
      status: 422,
      response: { data: { message: "Update is not a fast forward" } },
    });
    const { data: forced } = await gh.git.updateRef({
      owner: "acme",
      repo: "app",
      ref: "heads/fleet/state",
      sha: c2.sha,
      force: true,
    });
    expect(forced.object.sha).toBe(c2.sha);
    const { data: blobTree } = await gh.git.getTree({
      owner: "acme",
      repo: "app",
      tree_sha: tree.sha,
      recursive: "1",
    });
    const entry = blobTree.tree.find((e) => e.path === "state/fleet.json")!;
    const { data: blob } = await gh.git.getBlob({ owner: "acme", repo: "app", file_sha: entry.sha! });
    expect(Buffer.from(blob.content, "base64").toString()).toBe('{"v":1}');
  });

  it("serializes concurrent fast-forward CAS updates: exactly one of two racing writers wins", async () => {
    const gh = userOctokit(em, "acme");
    const { data: ref } = await gh.git.getRef({ owner: "acme", repo: "app", ref: "heads/fleet/state" });
    const parent = ref.object.sha;
    const { data: pc } = await gh.git.getCommit({ owner: "acme", repo: "app", commit_sha: parent });
    const mk = (m: string) =>
      gh.git.createCommit({ owner: "acme", repo: "app", message: m, tree: pc.tree.sha, parents: [parent] });
    const [a, b] = await Promise.all([mk("a"), mk("b")]);
    const results = await Promise.allSettled([
      gh.git.updateRef({ owner: "acme", repo: "app", ref: "heads/fleet/state", sha: a.data.sha }),
      gh.git.updateRef({ owner: "acme", repo: "app", ref: "heads/fleet/state", sha: b.data.sha }),
    ]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    expect(results.filter((r) => r.status === "rejected")).toHaveLength(1);
  });
});
