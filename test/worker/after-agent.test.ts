// What an agent leaves in its worktree, and what Fleet does with it before its own git touches it:
// real git, a real bare repository, files written as a hostile agent would.
import { access, chmod, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { commitAll, forgetCommit } from "../../src/worker/4-publish.ts";
import { checkOutgoing } from "../../src/worker/sandbox/outgoing-check.ts";
import { addWorktree, cleanAfterAgent, removeWorktree } from "../../src/worker/workspace/worktree.ts";

const env = { GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" };
const id = ["-c", "user.name=Seed", "-c", "user.email=seed@example.invalid"];
const git = (cwd: string, ...args: string[]) => execa("git", [...id, ...args], { cwd, env });
const exists = (p: string) =>
  access(p).then(
    () => true,
    () => false,
  );
const TOKEN = "fleet-run-0123456789abcdef0123456789abcdef0123456789abcdef";
const SECRETS = [{ label: "this run's model-gateway token", value: TOKEN }];

let root: string;
let url: string;
let workDir: string;
let seedSha: string;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), "fleet-after-agent-"));
  const bare = join(root, "origin.git");
  workDir = join(root, "work");
  await execa("git", ["init", "--bare", "-q", "-b", "main", bare], { env });
  const seed = join(root, "seed");
  await execa("git", ["init", "-q", "-b", "main", seed], { env });
  await writeFile(join(seed, "README.md"), "# widgets\n");
  // A submodule path: the checkout leaves it empty, and the agent may fill it.
  const sub = join(root, "sub");
  await execa("git", ["init", "-q", "-b", "main", sub], { env });
  await writeFile(join(sub, "lib.txt"), "lib\n");
  await git(sub, "add", "-A");
  await git(sub, "commit", "-q", "-m", "lib");
  const subSha = (await git(sub, "rev-parse", "HEAD")).stdout.trim();
  await git(seed, "add", "-A");
  await git(seed, "update-index", "--add", "--cacheinfo", `160000,${subSha},vendor/lib`);
  await writeFile(
    join(seed, ".gitmodules"),
    '[submodule "vendor/lib"]\n\tpath = vendor/lib\n\turl = ../sub\n',
  );
  await git(seed, "add", ".gitmodules");
  await git(seed, "commit", "-q", "-m", "seed");
  seedSha = subSha;
  await git(seed, "push", "-q", bare, "main");
  url = `file://${bare}`;
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe("after the agent, before Fleet's git", () => {
  it("a repository planted in a submodule path never runs its filter driver on the host", async () => {
    const wt = await addWorktree(workDir, { repo: "octo/widgets", cloneUrl: url }, "t1", "fleet/1-x");
    const marker = join(root, "filter-ran");
    // The agent's nested repository at the recorded commit, with a filter on every file.
    const lib = join(wt.path, "vendor", "lib");
    await mkdir(lib, { recursive: true });
    await execa("git", ["init", "-q", "-b", "main", lib], { env });
    await git(lib, "fetch", "-q", join(root, "sub"), "main");
    await git(lib, "reset", "-q", "--hard", seedSha);
    await git(lib, "config", "filter.x.clean", `sh -c 'env > ${marker}; cat'`);
    await writeFile(join(lib, ".gitattributes"), "* filter=x\n");
    await writeFile(join(lib, "lib.txt"), "changed\n");
    await writeFile(join(wt.path, "OK.md"), "ok\n");

    await cleanAfterAgent(wt);
    await commitAll(wt, "change\n");
    expect(await exists(marker)).toBe(false);
    expect(await exists(join(lib, ".git"))).toBe(false);
    await removeWorktree(wt);
  });

  it("removes FIFOs, setuid bits and world-writable modes, and writes the .git link back", async () => {
    const wt = await addWorktree(workDir, { repo: "octo/widgets", cloneUrl: url }, "t2", "fleet/2-x");
    await execa("mkfifo", [join(wt.path, "pipe")]);
    await writeFile(join(wt.path, "tool"), "#!/bin/sh\n");
    await chmod(join(wt.path, "tool"), 0o4777);
    await mkdir(join(wt.path, "open"));
    await chmod(join(wt.path, "open"), 0o777);
    await rm(join(wt.path, ".git"));
    await mkdir(join(wt.path, ".git"));
    await symlink("/etc/passwd", join(wt.path, "link"));

    await cleanAfterAgent(wt);
    expect(await exists(join(wt.path, "pipe"))).toBe(false);
    expect((await stat(join(wt.path, "tool"))).mode & 0o7777).toBe(0o755);
    expect((await stat(join(wt.path, "open"))).mode & 0o7777).toBe(0o755);
    expect(await readFile(join(wt.path, ".git"), "utf8")).toBe(`gitdir: ${wt.gitDir}\n`);
    // A symlink stays what it is (committed as a link); its target is never touched.
    expect((await stat("/etc/passwd")).mode & 0o7777).toBe(0o644);
    await removeWorktree(wt);
  });

  it("finds the run's token on a line that starts with ++, in a file name, and split over two files", async () => {
    const cases: Array<[string, (p: string) => Promise<void>, RegExp]> = [
      ["plus", (p) => writeFile(join(p, "a.txt"), `++${TOKEN}\n`), /`a\.txt` gives away a secret/],
      ["name", (p) => writeFile(join(p, `k-${TOKEN}`), "x\n"), /the names of the files it adds/],
      [
        "split",
        async (p) => {
          await writeFile(join(p, "1.txt"), `${TOKEN.slice(0, 30)}\n`);
          await writeFile(join(p, "2.txt"), `${TOKEN.slice(30)}\n`);
        },
        /the change as a whole gives away a secret/,
      ],
    ];
    for (const [name, plant, reason] of cases) {
      const wt = await addWorktree(
        workDir,
        { repo: "octo/widgets", cloneUrl: url },
        `t-${name}`,
        `fleet/3-${name}`,
      );
      await plant(wt.path);
      await commitAll(wt, "change\n");
      expect(await checkOutgoing(wt, wt.startSha, SECRETS, []), name).toMatch(reason);
      await removeWorktree(wt);
    }
  });

  it("a refused commit leaves the cache clone: branch back at the start, its objects gone", async () => {
    const wt = await addWorktree(workDir, { repo: "octo/widgets", cloneUrl: url }, "t4", "fleet/4-x");
    await writeFile(join(wt.path, "leak.txt"), `${TOKEN}\n`);
    await commitAll(wt, "leak\n");
    const blob = (await execa("git", ["--git-dir", wt.gitDir, "rev-parse", "HEAD:leak.txt"], { env })).stdout;
    await forgetCommit(wt, wt.startSha);
    const inCache = await execa("git", ["--git-dir", wt.cacheDir, "cat-file", "-e", blob], {
      env,
      reject: false,
    });
    expect(inCache.exitCode).not.toBe(0);
    const head = (await execa("git", ["--git-dir", wt.gitDir, "rev-parse", "HEAD"], { env })).stdout;
    expect(head).toBe(wt.startSha);
    await removeWorktree(wt);
  });
});
