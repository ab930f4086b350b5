// What an agent's files are on the host. Its worktree and its HOME are folders of the worker's, shown
// writable in the sandbox, where the agent is uid 0 of its own user namespace: the same uid as the
// worker on the host. A setuid program it writes there is, on the host, a setuid program of the
// worker's user (root, for a root worker), and its HOME outlives the run. Another local user must
// never be able to reach one. Real bubblewrap, real git.
import { chmod, mkdir, mkdtemp, rm, stat, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentAdapter, AgentEvent } from "../../src/agents/types.ts";
import { freshAgentHome } from "../../src/worker/agent-home.ts";
import { agentHomeDir } from "../../src/worker/artifacts.ts";
import { runAgent } from "../../src/worker/run-agent.ts";
import { worktreeMounts } from "../../src/worker/run-context.ts";
import { forbiddenFolders } from "../../src/worker/sandbox.ts";
import { addWorktree, removeWorktree } from "../../src/worker/worktree.ts";

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
