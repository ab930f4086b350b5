// What an agent's files are on the host. Its worktree and its HOME are folders of the worker's, shown
// writable in the sandbox, where the agent is uid 0 of its own user namespace: the same uid as the
// worker on the host. A setuid program it writes there is, on the host, a setuid program of the
// worker's user (root, for a root worker), and its HOME outlives the run. Another local user must
// never be able to reach one. Real bubblewrap, real git.
import { chmod, mkdir, mkdtemp, rm, stat, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentAdapter, AgentEvent } from "../../src/agents/types.ts";
import { worktreeMounts } from "../../src/worker/run-context.ts";
import { freshAgentHome } from "../../src/worker/sandbox/agent-home.ts";
import { forbiddenFolders } from "../../src/worker/sandbox/bubblewrap.ts";
import { runAgent } from "../../src/worker/sandbox/run-agent.ts";
import { agentHomeDir } from "../../src/worker/workspace/artifacts.ts";
import { addWorktree, removeWorktree } from "../../src/worker/workspace/worktree.ts";

const env = { GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" };
let root: string;
let workDir: string;
let url: string;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "fleet-host-files-"));
  // As a worker's HOME commonly is (Debian's default 0755): other users may pass through it.
  await chmod(root, 0o755);
  workDir = join(root, "work");
  await mkdir(workDir, { mode: 0o755 });
  await chmod(workDir, 0o755);
  const bare = join(root, "origin.git");
  await execa("git", ["init", "--bare", "-q", "-b", "main", bare], { env });
  const seed = join(root, "seed");
  await execa("git", ["init", "-q", "-b", "main", seed], { env });
  await writeFile(join(seed, "README.md"), "# widgets\n");
  const id = ["-c", "user.name=Seed", "-c", "user.email=seed@example.invalid"];
  await execa("git", [...id, "add", "-A"], { cwd: seed, env });
  await execa("git", [...id, "commit", "-q", "-m", "seed"], { cwd: seed, env });
  await execa("git", ["push", "-q", bare, "main"], { cwd: seed, env });
  url = `file://${bare}`;
});

afterAll(() => rm(root, { recursive: true, force: true }));

/** Whether a user who is neither the owner nor in the group can reach `path` (search on every folder above it). */
async function reachableByOthers(path: string): Promise<boolean> {
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    if (((await stat(dir)).mode & 0o001) === 0) return false;
    if (dirname(dir) === dir) return true;
  }
}

const scriptAdapter = (file: string): AgentAdapter => ({
  coder: "script",
  displayName: "Script",
  defaultModel: "none",
  binary: file,
  credentialEnv: "SCRIPT_KEY",
  command: () => ({ file, args: [], env: {}, stdin: "ignore" }),
  parseLine: (line) => [{ type: "text", text: line } as AgentEvent],
});

describe("an agent's setuid programs on the host", () => {
  it("are out of every other local user's reach, in its worktree and in its HOME", async () => {
    const wt = await addWorktree(workDir, { repo: "octo/widgets", cloneUrl: url }, "t1", "fleet/1-suid");
    const home = agentHomeDir(workDir, "t1");
    // The folder of HOMEs as an earlier worker left it (made with the default mode by runAgent).
    await mkdir(dirname(home), { mode: 0o755 });
    await chmod(dirname(home), 0o755);
    await freshAgentHome(home);
    const script = join(root, "agent-pkg", "agent.sh");
    await mkdir(dirname(script), { recursive: true });
    // Programs of the host's user, setuid, and every folder the agent owns opened to everyone.
    await writeFile(
      script,
      [
        "#!/bin/bash",
        "cp /usr/bin/id ./suid-id && chmod 4755 ./suid-id",
        'cp /usr/bin/id "$HOME/suid-id" && chmod 4755 "$HOME/suid-id"',
        'chmod 755 . "$HOME"',
        "ls -l ./suid-id",
        "",
      ].join("\n"),
    );
    await chmod(script, 0o755);
    const seen: string[] = [];
    try {
      const r = await runAgent(
        scriptAdapter(script),
        { prompt: "", model: "none", phase: "work", cwd: wt.path, home },
        {
          timeoutMs: 30_000,
          stallMs: 30_000,
          sandbox: worktreeMounts(wt, undefined, "work"),
          forbidden: forbiddenFolders(workDir),
          onEvent: (e) => {
            if (e.type === "text") seen.push(e.text);
          },
        },
      );
      expect(r.reason, seen.join("\n")).toBe("completed");
      for (const planted of [join(wt.path, "suid-id"), join(home, "suid-id")]) {
        // The agent did make it setuid (a program of the worker's user on the host)...
        expect((await stat(planted)).mode & 0o4000).toBe(0o4000);
        // ...and no other user of the machine can get to it to run it.
        expect(await reachableByOthers(planted), planted).toBe(false);
      }
    } finally {
      await removeWorktree(wt);
    }
  }, 60_000);
});

describe("the session files a new run carries", () => {
  it("are bounded in all, however many sparse copies of the session the agent made", async () => {
    const home = join(root, "homes-carry", "t2");
    const id = "0b5c8e0e-1111-4222-8333-944445555666";
    // In its plan phase the agent writes copies of its session in many project folders, each just
    // under the per-file cap and sparse (no disk, no time); approval starts the run that carries it.
    for (let i = 0; i < 6; i++) {
      const file = join(home, ".claude", "projects", `-copy-${i}`, `${id}.jsonl`);
      await mkdir(dirname(file), { recursive: true });
      await writeFile(file, "");
      await truncate(file, 100 * 1024 * 1024);
    }
    const kept = await freshAgentHome(home, { coder: "claude", sessionId: id });
    let bytes = 0;
    for (const rel of kept) bytes += (await stat(join(home, rel))).size;
    // Real bytes on the worker's disk now: no more than one session file's cap.
    expect(bytes).toBeLessThanOrEqual(256 * 1024 * 1024);
    expect(kept.length).toBeGreaterThan(0);
  }, 60_000);
});

/**
 * Runs `script` (TypeScript, given the repository's root as its argument) as a user that is not root:
 * as root, permissions never stop a removal, so the worker's user is played by `nobody` then.
 */
async function asUnprivileged(script: string): Promise<string> {
  const file = join(root, `unprivileged-${Math.random().toString(36).slice(2)}.mts`);
  await writeFile(file, script);
  await chmod(file, 0o644);
  const node = [process.execPath, "--import", "tsx", file, resolve(".")];
  const asRoot = process.getuid?.() === 0;
  const r = await execa(
    asRoot ? "setpriv" : node[0]!,
    asRoot ? ["--reuid=65534", "--regid=65534", "--clear-groups", "--", ...node] : node.slice(1),
    { cwd: resolve("."), env: { PATH: process.env.PATH ?? "", HOME: root, TMPDIR: "/tmp" }, reject: false },
  );
  return `${r.stdout}\n${r.stderr}`;
}

describe("what an agent made read-only", () => {
  it("is still removed by the worker: the worktree after the run, the HOME at the next run", async () => {
    // Played out by the worker's user (not root): the agent owns what it made and may lock it.
    const out = await asUnprivileged(`
import { chmod, mkdir, mkdtemp, writeFile, access } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execFileSync } from "node:child_process";
const repo = process.argv[2];
const { addWorktree, removeWorktree } = await import(join(repo, "src/worker/workspace/worktree.ts"));
const { freshAgentHome } = await import(join(repo, "src/worker/sandbox/agent-home.ts"));
const env = { GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" };
const root = await mkdtemp(join(tmpdir(), "fleet-locked-"));
const bare = join(root, "origin.git");
const run = (args, cwd) => execFileSync("git", args, { cwd, env: { ...process.env, ...env } });
run(["init", "--bare", "-q", "-b", "main", bare], root);
const seed = join(root, "seed");
run(["init", "-q", "-b", "main", seed], root);
await writeFile(join(seed, "README.md"), "x\\n");
const id = ["-c", "user.name=S", "-c", "user.email=s@example.invalid"];
run([...id, "add", "-A"], seed);
run([...id, "commit", "-q", "-m", "s"], seed);
run(["push", "-q", bare, "main"], seed);
const workDir = join(root, "work");
const lock = async (top) => {
  await mkdir(join(top, "locked", "inner"), { recursive: true });
  await writeFile(join(top, "locked", "inner", "file"), "x");
  await chmod(join(top, "locked", "inner"), 0o500);
  await chmod(join(top, "locked"), 0o000);
  await chmod(top, 0o500);
};
const gone = (p) => access(p).then(() => "still there", () => "gone");
const wt = await addWorktree(workDir, { repo: "o/r", cloneUrl: "file://" + bare }, "t1", "fleet/1-x");
await lock(wt.path);
let worktree;
try { await removeWorktree(wt); worktree = await gone(wt.path); } catch (e) { worktree = "threw " + e.code; }
const home = join(workDir, "homes", "t1");
await mkdir(home, { recursive: true });
await lock(home);
let next;
try { await freshAgentHome(home); next = await gone(join(home, "locked")); } catch (e) { next = "threw " + e.code; }
console.log(JSON.stringify({ uid: process.getuid(), worktree, home: next }));
`);
    const line = out.split("\n").find((l) => l.startsWith("{"));
    expect(line, out).toBeDefined();
    const result = JSON.parse(line!) as { uid: number; worktree: string; home: string };
    expect(result.uid).not.toBe(0);
    expect(result).toMatchObject({ worktree: "gone", home: "gone" });
  }, 90_000);
});
