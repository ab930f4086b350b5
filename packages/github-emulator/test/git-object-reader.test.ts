import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GitObjectReader } from "../src/git-object-reader.ts";
import { GitRepo, type TreeEntry } from "../src/git-repo.ts";

// The emulator reads objects and refs through one long-lived `git cat-file --batch-command` per
// repository. These tests hold its answers to git's own commands, and show that what other git
// processes write afterwards (a push of loose objects, a push kept as a pack, a ref packed then
// deleted) is seen by a reader started before.

const env = {
  ...process.env,
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_AUTHOR_NAME: "a",
  GIT_AUTHOR_EMAIL: "a@example.invalid",
  GIT_COMMITTER_NAME: "a",
  GIT_COMMITTER_EMAIL: "a@example.invalid",
};
let dir: string;
let bare: string;
let work: string;
let repo: GitRepo;
const git = (cwd: string, ...args: string[]) => execFileSync("git", args, { cwd, env }).toString().trim();
/** `git ls-tree -z -l` itself, parsed as GitRepo lists trees. */
function lsTree(treeish: string, path?: string): TreeEntry[] {
  const out = execFileSync("git", ["ls-tree", "-z", "-l", treeish, ...(path ? ["--", path] : [])], {
    cwd: bare,
    env,
  }).toString();
  return out
    .split("\0")
    .filter(Boolean)
    .map((line) => {
      const tab = line.indexOf("\t");
      const [mode, type, sha, size] = line.slice(0, tab).split(/\s+/);
      const entry = { mode: mode!, type: type as TreeEntry["type"], sha: sha!, path: line.slice(tab + 1) };
      return size === "-" ? entry : { ...entry, size: Number(size) };
    });
}
const plain = (entries: TreeEntry[]) =>
  entries.map((e) => Object.fromEntries(Object.entries(e).filter(([, v]) => v !== undefined)));

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "gh-emulator-reader-"));
  bare = join(dir, "r.git");
  work = join(dir, "w");
  repo = await GitRepo.init(bare, "main");
  git(dir, "init", "-q", "-b", "main", work);
  mkdirSync(join(work, "src/deep dir/x"), { recursive: true });
  writeFileSync(join(work, "a.txt"), "one\n");
  writeFileSync(join(work, "run.sh"), "#!/bin/sh\n");
  chmodSync(join(work, "run.sh"), 0o755);
  writeFileSync(join(work, "src/deep dir/x/ü ñ.md"), "deep\n");
  writeFileSync(join(work, "src/b.ts"), "b\n".repeat(1000));
  symlinkSync("a.txt", join(work, "link"));
  git(work, "add", ".");
  git(work, "commit", "-qm", "first\n\nwith a body");
  git(work, "push", "-q", bare, "main");
});
afterAll(() => {
  repo.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("the emulator's object reader", () => {
  it("lists one level of a tree, or the entry at a path, exactly as git ls-tree -l does", async () => {
    const head = git(work, "rev-parse", "HEAD");
    const cases: Array<[string, string?]> = [
      [head],
      [head, "src"],
      [head, "src/deep dir/x/ü ñ.md"],
      [`${head}:src`],
      [`${head}:src`, "deep dir"],
      [`${head}:src/deep dir`, "x"],
      [`${head}:`, "src/b.ts"],
      ["main", "run.sh"],
      [head, "link"],
      [git(work, "rev-parse", "HEAD:src")],
    ];
    for (const [treeish, path] of cases)
      expect(plain(await repo.lsTree(treeish, { path })), `${treeish} ${path ?? ""}`).toEqual(
        lsTree(treeish, path),
      );
    // What git lists nothing for (or refuses to list) is an empty list.
    for (const [treeish, path] of [
      [head, "nope"],
      [head, "a.txt/x"],
      [`${head}:a.txt`],
      ["no-such-ref"],
    ] as const)
      expect(await repo.lsTree(treeish, { path })).toEqual([]);
  });

  it("reads blobs, commits, types and sizes, and resolves refs and commit-ishes as git does", async () => {
    const head = git(work, "rev-parse", "HEAD");
    const blob = git(work, "rev-parse", "HEAD:src/b.ts");
    expect((await repo.readBlob(blob)).toString()).toBe("b\n".repeat(1000));
    expect(await repo.objectType(blob)).toBe("blob");
    expect(await repo.objectSize(blob)).toBe(2000);
    expect(await repo.objectType("0".repeat(40))).toBeUndefined();
    await expect(repo.readBlob(head)).rejects.toThrow(/not a blob/);
    const commit = await repo.readCommit(head);
    expect(commit).toMatchObject({ sha: head, message: "first\n\nwith a body", parents: [] });
    expect(commit?.tree).toBe(git(work, "rev-parse", "HEAD^{tree}"));
    expect(await repo.readCommit(blob)).toBeUndefined();
    expect(await repo.resolveRef("refs/heads/main")).toBe(head);
    expect(await repo.resolveRef("refs/heads/nope")).toBeUndefined();
    expect(await repo.resolveCommitish("main")).toBe(head);
    expect(await repo.resolveCommitish(head.slice(0, 12))).toBe(head);
    expect(await repo.resolveCommitish("nope")).toBeUndefined();
  });

  it("leaves names git's batch reader cannot take to git's own commands, and one that stops it fails alone", async () => {
    const head = git(work, "rev-parse", "HEAD");
    // Relative paths and `@{…}` stop `git cat-file --batch-command` in a bare repository; they are
    // answered as `git rev-parse --verify` and `git ls-tree` answer them.
    expect(await repo.resolveCommitish("main:./a.txt")).toBeUndefined();
    expect(await repo.resolveCommitish("main@{u}")).toBeUndefined();
    expect(await repo.resolveCommitish("main\0junk")).toBeUndefined();
    for (const path of ["./src/b.ts", "src/./b.ts", "src//b.ts", "."])
      expect(plain(await repo.lsTree("main", { path })), path).toEqual(lsTree("main", path));
    // Asked of the reader itself, such a name fails its own read only: the reads behind it are
    // asked again of a new process, and answered.
    const reader = new GitObjectReader(bare, { GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" });
    try {
      const [before, bad, after, missing] = await Promise.allSettled([
        reader.info("refs/heads/main"),
        reader.info("main:./a.txt"),
        reader.contents(`${head}:a.txt`),
        reader.info("nope"),
      ]);
      expect(before).toMatchObject({ status: "fulfilled", value: { sha: head, type: "commit" } });
      expect(bad.status).toBe("rejected");
      expect(after).toMatchObject({ status: "fulfilled", value: { type: "blob" } });
      expect((after as PromiseFulfilledResult<{ data: Buffer }>).value.data.toString()).toBe("one\n");
      expect(missing).toEqual({ status: "fulfilled", value: undefined });
      // Closed with a read in flight: that read fails, and no late answer of the old process reaches a
      // read of the new one.
      const inFlight = reader.contents(`${head}:src/b.ts`);
      reader.close();
      await expect(inFlight).rejects.toThrow(/closed/);
      expect(await reader.info(`${head}:a.txt`)).toMatchObject({ type: "blob", size: 4 });
      expect(await reader.info(head)).toMatchObject({ type: "commit" });
      expect(await reader.info("nope")).toBeUndefined();
    } finally {
      reader.close();
    }
  });

  it("reads a large blob whole", async () => {
    const big = Buffer.alloc(12 * 2 ** 20);
    for (let i = 0; i < big.length; i += 4096) big.write(`${i}\n`, i);
    const sha = await repo.writeBlob(big);
    expect((await repo.readBlob(sha)).equals(big)).toBe(true);
    expect(await repo.objectSize(sha)).toBe(big.length);
  });

  it("sees what other git processes write after it started: loose objects, a kept pack, a packed ref deleted", async () => {
    expect(await repo.resolveCommitish("main")).toBeDefined(); // the reader is running
    for (let i = 0; i < 150; i++) writeFileSync(join(work, `f${i}.txt`), `f${i}\n`);
    git(work, "add", ".");
    git(work, "commit", "-qm", "many");
    git(work, "push", "-q", bare, "main");
    // More objects than receive.unpackLimit: the push is kept as a pack, not unpacked.
    expect(readdirSync(join(bare, "objects/pack")).some((f) => f.endsWith(".pack"))).toBe(true);
    const head = git(work, "rev-parse", "HEAD");
    expect(await repo.resolveRef("refs/heads/main")).toBe(head);
    expect((await repo.readCommit(head))?.message).toBe("many");
    expect(plain(await repo.lsTree(head, { path: "f149.txt" }))).toEqual(lsTree(head, "f149.txt"));
    git(bare, "update-ref", "refs/heads/other", head);
    expect(await repo.resolveCommitish("other")).toBe(head);
    git(bare, "pack-refs", "--all");
    git(bare, "update-ref", "-d", "refs/heads/other");
    expect(await repo.resolveCommitish("other")).toBeUndefined();
  });

  it("tells an ancestor as git merge-base --is-ancestor does, through merges and past a long history", async () => {
    const head = git(work, "rev-parse", "HEAD");
    const tree = git(work, "rev-parse", "HEAD^{tree}");
    const who = { name: "a", email: "a@example.invalid" };
    const commit = (parents: string[], message: string) =>
      repo.commitTree({ tree, parents, message, author: who });
    const side = await commit([head], "side");
    const main1 = await commit([head], "main 1");
    const merge = await commit([main1, side], "merge");
    // 230 commits on top of the merge, in one fast-import: more than the reader walks before asking git.
    const stream = Array.from(
      { length: 230 },
      (_, i) =>
        `commit refs/heads/long\ncommitter a <a@example.invalid> 1700000000 +0000\ndata <<END\nlong ${i}\nEND\n${i === 0 ? `from ${merge}\n` : ""}\n`,
    ).join("");
    execFileSync("git", ["fast-import", "--quiet"], { cwd: bare, env, input: stream });
    const long = git(bare, "rev-parse", "refs/heads/long");
    const unrelated = await commit([], "root of its own");
    const all = [head, side, main1, merge, long, unrelated, git(work, "rev-parse", "HEAD~1")];
    for (const a of all)
      for (const d of all) {
        const byGit =
          spawnSync("git", ["merge-base", "--is-ancestor", a, d], { cwd: bare, env }).status === 0;
        expect(await repo.isAncestor(a, d), `${a} of ${d}`).toBe(byGit);
      }
    expect(await repo.isAncestor("nope", head)).toBe(false);
  });

  it("answers reads made at once in order, and starts again after it was closed", async () => {
    const head = git(work, "rev-parse", "HEAD");
    const blobs = lsTree(head).filter((e) => e.type === "blob");
    const read = await Promise.all(blobs.map((b) => repo.readBlob(b.sha)));
    expect(read.map((b) => b.length)).toEqual(blobs.map((b) => b.size));
    repo.close();
    expect(await repo.resolveRef("refs/heads/main")).toBe(head);
  });

  it("reads one full ref exactly as for-each-ref finds it: loose, packed, packed then moved or deleted, never a prefix or a DWIM name", async () => {
    const head = git(work, "rev-parse", "HEAD");
    const first = git(work, "rev-parse", "HEAD^{tree}");
    /** for-each-ref itself, the exact name only. */
    const exact = (ref: string) => {
      const out = spawnSync("git", ["for-each-ref", "--format=%(refname) %(objectname) %(objecttype)", ref], {
        cwd: bare,
        env,
      }).stdout.toString();
      const line = out.split("\n").find((l) => l.split(" ")[0] === ref);
      if (!line) return undefined;
      const [name, sha, type] = line.split(" ");
      return { ref: name!, sha: sha!, type: type! };
    };
    git(bare, "update-ref", "refs/heads/fleet/state", head);
    git(bare, "tag", "-a", "-m", "v", "v1", head);
    git(bare, "update-ref", "refs/weird/tree", first);
    git(bare, "symbolic-ref", "refs/heads/alias", "refs/heads/main");
    const names = [
      "refs/heads/main",
      "refs/heads/fleet/state",
      "refs/heads/fleet",
      "refs/heads/fleet/state/deeper",
      "refs/tags/v1",
      "refs/weird/tree",
      "refs/heads/alias",
      "refs/heads/absent",
      "refs/heads/main.lock",
      "refs/heads/a..b",
      "refs/heads/.hidden",
      "refs/heads/main@{1}",
      "heads/main",
      "main",
    ];
    const check = async () => {
      for (const name of names) expect(await repo.readRef(name), name).toEqual(exact(name));
    };
    await check();
    git(bare, "pack-refs", "--all");
    await check();
    // Packed, then written loose again (the loose file wins), then deleted from both.
    const next = git(bare, "commit-tree", first, "-p", head, "-m", "next");
    git(bare, "update-ref", "refs/heads/fleet/state", next);
    await check();
    expect((await repo.readRef("refs/heads/fleet/state"))?.sha).toBe(next);
    git(bare, "update-ref", "-d", "refs/tags/v1");
    git(bare, "update-ref", "-d", "refs/heads/fleet/state");
    await check();
    expect(await repo.readRef("refs/heads/fleet/state")).toBeUndefined();
    expect((await repo.readRef("refs/heads/main"))?.sha).toBe(head);
  });
});
