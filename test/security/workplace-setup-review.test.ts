// Setup steps as a hostile agent meets them: on a task branch an earlier run pushed, setup runs what
// the agent committed (an install script, a lockfile), and what setup leaves in the worktree is read by
// Fleet outside the sandbox (git status and hashes, the setup cache's copy, the log). Real bubblewrap,
// real git, real files.
import { constants } from "node:fs";
import {
  lstat,
  mkdir,
  mkdtemp,
  open,
  readFile,
  rm,
  stat,
  symlink,
  truncate,
  unlink,
  writeFile,
} from "node:fs/promises";
import { type AddressInfo, createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { networkPolicyOf } from "../../src/core/network-policy.ts";
import { commitAll, MAX_COMMITTED_FILE_BYTES } from "../../src/worker/4-publish.ts";
import { forbiddenFolders } from "../../src/worker/sandbox/bubblewrap.ts";
import { LineSplitter } from "../../src/worker/sandbox/run-agent.ts";
import { restoreSetupCache, saveSetupCache } from "../../src/worker/workspace/setup-cache.ts";
import { runSetup, type SetupResult } from "../../src/worker/workspace/setup-steps.ts";
import {
  addWorktree,
  cleanAfterAgent,
  removeWorktree,
  type Worktree,
} from "../../src/worker/workspace/worktree.ts";

const env = { GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" };
const id = ["-c", "user.name=Seed", "-c", "user.email=seed@example.invalid"];
const git = (cwd: string, ...args: string[]) => execa("git", [...id, ...args], { cwd, env });

let root: string;
let workDir: string;
let url: string;
/** A listener of the host's, on its loopback: what `setup_network: host` reaches. */
let listener: Server;
let port: number;
const reachedBy: string[] = [];
let seq = 0;

/** The install script as a repository has it; `who` says whose version connected. */
const prepare = (who: string) =>
  `(exec 3<>/dev/tcp/127.0.0.1/${port} && echo ${who} >&3) 2>/dev/null && echo REACHED-${who} || echo not-reached-${who}\n`;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "fleet-setup-review-"));
  workDir = join(root, "work");
  listener = createServer((s) => s.on("data", (d) => reachedBy.push(String(d).trim())));
  await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
  port = (listener.address() as AddressInfo).port;
  const bare = join(root, "origin.git");
  await execa("git", ["init", "--bare", "-q", "-b", "main", bare], { env });
  const seed = join(root, "seed");
  await execa("git", ["init", "-q", "-b", "main", seed], { env });
  await mkdir(join(seed, "scripts"));
  await writeFile(join(seed, "README.md"), "# widgets\n");
  await writeFile(join(seed, "scripts", "prepare.sh"), prepare("MAINTAINERS"));
  // Tracked names a pathspec would read as a pattern.
  await writeFile(join(seed, "gen*.txt"), "generated\n");
  await writeFile(join(seed, "gen-by-hand.txt"), "by hand\n");
  await git(seed, "add", "-A");
  await git(seed, "commit", "-q", "-m", "seed");
  await git(seed, "push", "-q", bare, "main");
  // An earlier run of task 7 pushed its branch: the agent changed the install script setup runs.
  await git(seed, "checkout", "-q", "-b", "fleet/7-agent");
  await writeFile(join(seed, "scripts", "prepare.sh"), prepare("AGENT"));
  await git(seed, "commit", "-q", "-am", "agent's change");
  await git(seed, "push", "-q", bare, "fleet/7-agent");
  url = `file://${bare}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => listener?.close(() => resolve()));
  await rm(root, { recursive: true, force: true });
});

async function worktree(branch: string): Promise<Worktree> {
  return addWorktree(workDir, { repo: "octo/widgets", cloneUrl: url }, `t${++seq}`, branch);
}

/** Runs setup as runTask does, in bubblewrap; `setupNetwork` is `setup_network`, the agent's is the proxy. */
async function setup(wt: Worktree, commands: string[], setupNetwork = networkPolicyOf("host")) {
  const artifactsDir = join(root, "artifacts", String(seq));
  const home = join(root, "homes", String(seq));
  await mkdir(artifactsDir, { recursive: true });
  await mkdir(home, { recursive: true });
  const result = await runSetup({ commands, cache: [], network: setupNetwork }, wt, {
    repo: "octo/widgets",
    workDir,
    artifactsDir,
    home,
    sandbox: "bubblewrap",
    agentNetwork: networkPolicyOf(undefined),
    forbidden: forbiddenFolders(workDir),
    timeouts: { runMs: 60_000, stallMs: 60_000 },
    redact: (text) => text,
  });
  return { result, logPath: join(artifactsDir, "setup.log") };
}

/** `work` or "hung" when it has not finished after a while (a read of a FIFO never returns). */
function unlessHung<T>(work: Promise<T>): Promise<T | "hung"> {
  return Promise.race([work, new Promise<"hung">((resolve) => setTimeout(() => resolve("hung"), 15_000))]);
}

/** Lets a reader blocked on the FIFO at `path` go (an end of file), so nothing is left hanging. */
async function releaseFifo(path: string) {
  const fh = await open(path, constants.O_WRONLY | constants.O_NONBLOCK).catch(() => undefined);
  await fh?.close();
}

describe("setup steps against a hostile agent", () => {
  it("runs an agent's committed install script with the agent's network, never setup_network's", async () => {
    // The default branch's commit: setup_network (host) is what setup gets.
    const fresh = await worktree("fleet/8-fresh");
    expect(fresh.continued).toBe(false);
    const first = await setup(fresh, ["bash scripts/prepare.sh"]);
    expect(first.result.ok).toBe(true);
    expect(await readFile(first.logPath, "utf8")).toContain("REACHED-MAINTAINERS");
    await removeWorktree(fresh);

    // The task branch an earlier run pushed: the agent's script gets no more than the agent has.
    const continued = await worktree("fleet/7-agent");
    expect(continued.continued).toBe(true);
    const again = await setup(continued, ["bash scripts/prepare.sh"]);
    expect(again.result.ok).toBe(true);
    const log = await readFile(again.logPath, "utf8");
    expect(log).toContain("not-reached-AGENT");
    expect(log).not.toContain("REACHED-AGENT\n");
    await removeWorktree(continued);
    await new Promise((resolve) => setImmediate(resolve));
    expect(reachedBy).not.toContain("AGENT");
  }, 60_000);

  it("records what setup made without reading a FIFO it left where a tracked file was", async () => {
    const wt = await worktree("fleet/9-fifo");
    const fifo = join(wt.path, "README.md");
    try {
      const r = await unlessHung(setup(wt, ["rm README.md && mkfifo README.md"]));
      expect(r === "hung" ? "hung" : (r.result as SetupResult).ok).toBe(true);
    } finally {
      await releaseFifo(fifo);
      await unlink(fifo).catch(() => undefined);
      await removeWorktree(wt);
    }
  }, 60_000);

  it("commits a link the agent put where setup changed a tracked file, without following it to the host", async () => {
    const wt = await worktree("fleet/10-link");
    // A FIFO of the host's, outside everything the sandbox shows: Fleet must never open it.
    const hostFifo = join(root, "host-fifo");
    await execa("mkfifo", [hostFifo]);
    try {
      const { result } = await setup(wt, ["echo setup-made > README.md"]);
      expect(result.ok).toBe(true);
      // The agent's turn: README.md becomes a link to the host's FIFO.
      await rm(join(wt.path, "README.md"));
      await symlink(hostFifo, join(wt.path, "README.md"));
      await cleanAfterAgent(wt);
      const sha = await unlessHung(commitAll(wt, "agent's change\n"));
      expect(sha).not.toBe("hung");
      const entry = (await git(wt.path, "--git-dir", wt.gitDir, "ls-tree", "HEAD", "README.md")).stdout;
      expect(entry).toMatch(/^120000 blob /);
    } finally {
      await releaseFifo(hostFifo);
      await removeWorktree(wt);
    }
  }, 60_000);

  it("refuses to have git read a file GitHub would refuse, made sparse at no cost to the agent", async () => {
    const wt = await worktree("fleet/12-sparse");
    try {
      // A gigabyte of nothing: no disk, no time for the agent; git add would read and hash all of it.
      await writeFile(join(wt.path, "huge.bin"), "");
      await truncate(join(wt.path, "huge.bin"), 1024 * 1024 * 1024);
      await writeFile(join(wt.path, "CHANGE.md"), "change\n");
      await cleanAfterAgent(wt);
      await expect(commitAll(wt, "agent's change\n")).rejects.toThrow(
        /`huge\.bin` of 1,073,741,824 bytes.*100 MB/,
      );
      // Nor many files each under the limit that add up to more than a push may hold.
      await rm(join(wt.path, "huge.bin"));
      for (let i = 0; i < 21; i++) {
        await writeFile(join(wt.path, `part${i}.bin`), "");
        await truncate(join(wt.path, `part${i}.bin`), MAX_COMMITTED_FILE_BYTES);
      }
      await expect(commitAll(wt, "agent's change\n")).rejects.toThrow(/more than 2 GB/);
      for (let i = 0; i < 21; i++) await rm(join(wt.path, `part${i}.bin`));
      // A file just under the limit is committed as any other.
      await writeFile(join(wt.path, "huge.bin"), "");
      await truncate(join(wt.path, "huge.bin"), MAX_COMMITTED_FILE_BYTES);
      expect(await commitAll(wt, "agent's change\n")).toMatch(/^[0-9a-f]{40}$/);
    } finally {
      await removeWorktree(wt);
    }
  }, 60_000);

  it("never commits what setup made, whatever .gitignore the agent writes to take it back", async () => {
    const wt = await worktree("fleet/13-negate");
    try {
      const { result } = await setup(wt, [
        "echo setup-was-here > SETUP_NOTE.md",
        "mkdir -p vendor/dep && echo 'module.exports = 42;' > vendor/dep/index.js",
      ]);
      expect(result.ok).toBe(true);
      // The agent's turn: a change of its own, and a .gitignore that un-ignores everything setup made.
      await writeFile(join(wt.path, ".gitignore"), "!SETUP_NOTE.md\n!/vendor/\n!*\n");
      await writeFile(join(wt.path, "CHANGE.md"), "change\n");
      await cleanAfterAgent(wt);
      await commitAll(wt, "agent's change\n");
      const committed = (
        await git(wt.path, "--git-dir", wt.gitDir, "diff", "--name-only", "HEAD~1", "HEAD")
      ).stdout
        .split("\n")
        .filter(Boolean)
        .sort();
      expect(committed).toEqual([".gitignore", "CHANGE.md"]);
    } finally {
      await removeWorktree(wt);
    }
  }, 60_000);

  it("keeps the agent's change to a file whose name matches, as a pattern, one setup changed", async () => {
    const wt = await worktree("fleet/14-glob");
    try {
      const { result } = await setup(wt, ["echo regenerated > 'gen*.txt'"]);
      expect(result.ok).toBe(true);
      await writeFile(join(wt.path, "gen-by-hand.txt"), "the agent's change\n");
      await cleanAfterAgent(wt);
      expect(await commitAll(wt, "agent's change\n")).toMatch(/^[0-9a-f]{40}$/);
      const committed = (await git(wt.path, "--git-dir", wt.gitDir, "diff", "--name-only", "HEAD~1", "HEAD"))
        .stdout;
      expect(committed.split("\n").filter(Boolean)).toEqual(["gen-by-hand.txt"]);
    } finally {
      await removeWorktree(wt);
    }
  }, 60_000);

  it("keeps setup's output bounded: its log on the worker's disk and the end shown on the issue", async () => {
    const wt = await worktree("fleet/11-noisy");
    try {
      const { result, logPath } = await setup(
        wt,
        ["head -c 24000000 /dev/zero | tr '\\0' x; echo; exit 3"],
        networkPolicyOf("none"),
      );
      expect(result.ok).toBe(false);
      if (!result.ok) {
        expect(result.reason).toMatch(/failed with exit status 3/);
        expect(result.reason.length).toBeLessThan(65_536);
      }
      expect((await stat(logPath)).size).toBeLessThan(9 * 1024 * 1024);
    } finally {
      await removeWorktree(wt);
    }
  }, 60_000);

  it("splits output into the same lines however it is cut into chunks, a runaway line in capped pieces", () => {
    const lines: string[] = [];
    const s = new LineSplitter((l) => lines.push(l), 100_000);
    const long = "x".repeat(250_000);
    const text = `first\r\nsecond\n${long}\nlast-without-break`;
    // Chunks of every few characters, cutting the CRLF and the runaway line anywhere.
    for (let i = 0; i < text.length; i += 7) s.push(text.slice(i, i + 7));
    s.end();
    expect(lines.slice(0, 2)).toEqual(["first", "second"]);
    expect(lines.slice(2, -1).join("")).toBe(long);
    expect(lines.slice(2, -1).every((l) => l.length <= 100_000)).toBe(true);
    expect(lines.at(-1)).toBe("last-without-break");
  });

  it("never caches a host folder setup put on the way to a cached one through a link", async () => {
    const host = join(root, "worker-project");
    await mkdir(join(host, "node_modules"), { recursive: true });
    await writeFile(join(host, "node_modules", "secret.txt"), "WORKER-HOST-SECRET\n");
    const tree = join(root, "cache-tree");
    await mkdir(tree, { recursive: true });
    // What setup left: `pkg` a link to the worker's folder, `pkg/node_modules` the cached folder.
    await symlink(host, join(tree, "pkg"));
    const cacheWork = join(root, "cache-work");
    await saveSetupCache(cacheWork, "octo/widgets", "k1", tree, ["pkg/node_modules"]);
    const grep = await execa("grep", ["-rl", "WORKER-HOST-SECRET", cacheWork], { reject: false });
    expect(grep.stdout).toBe("");
    // And a later task restoring the key gets none of it.
    const later = join(root, "cache-later");
    await mkdir(later, { recursive: true });
    await restoreSetupCache(cacheWork, "octo/widgets", "k1", later, ["pkg/node_modules"]);
    expect(
      await lstat(join(later, "pkg", "node_modules", "secret.txt")).catch(() => undefined),
    ).toBeUndefined();
  });
});
