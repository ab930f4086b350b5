// The agent's private HOME is kept across its runs (plan, work, retries, rebase), so an agent can leave
// symlinks there for the next run's setup to follow: `~/.gemini/settings.json -> ~/.bashrc` of the
// worker. Fleet's settings files and the mount points of `home: inherit` are never written through
// them. Real files, the real gemini adapter's settings file, runAgent with and without bubblewrap.
import { lstat, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { geminiAdapter } from "../../src/agents/gemini.ts";
import type { AgentInvocation } from "../../src/agents/types.ts";
import { inheritedHomeMounts } from "../../src/worker/sandbox/bubblewrap.ts";
import { runAgent } from "../../src/worker/sandbox/run-agent.ts";

let root: string;
let home: string;
let cwd: string;
let victimDir: string;
let bashrc: string;
let fakeGemini: string;

const ORIGINAL = "# the worker's own .bashrc\n";

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), "fleet-home-symlink-"));
  home = join(root, "agent-home");
  cwd = join(root, "wt");
  victimDir = join(root, "worker-home");
  bashrc = join(victimDir, ".bashrc");
  for (const d of [home, cwd, victimDir]) await mkdir(d, { recursive: true });
  await writeFile(bashrc, ORIGINAL);
  // Stands in for the gemini CLI: shows its settings file, then tries to change it.
  const bin = join(root, "bin");
  await mkdir(bin);
  fakeGemini = join(bin, "fake-gemini");
  await writeFile(
    fakeGemini,
    '#!/bin/sh\necho "SETTINGS $(cat "$HOME/.gemini/settings.json")"\n' +
      'if echo tampered > "$HOME/.gemini/settings.json" 2>/dev/null; then echo WROTE; else echo READONLY; fi\n',
    { mode: 0o755 },
  );
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const inv = (): AgentInvocation => ({
  prompt: "hi",
  model: "gemini-2.5-pro",
  phase: "work",
  cwd,
  home,
  modelBaseUrl: "http://127.0.0.1:9",
  credential: { name: "GEMINI_API_KEY", value: "run-token" },
});

async function run(sandboxed: boolean): Promise<string[]> {
  const lines: string[] = [];
  await runAgent(geminiAdapter, inv(), {
    timeoutMs: 30_000,
    stallMs: 30_000,
    binaryPath: fakeGemini,
    onLine: (l) => lines.push(l),
    ...(sandboxed ? { sandbox: { writable: [cwd], readOnly: [] } } : {}),
  });
  return lines;
}

/** What an earlier run of the agent left in its HOME. */
async function plantFileLink() {
  await mkdir(join(home, ".gemini"), { recursive: true });
  await symlink(bashrc, join(home, ".gemini", "settings.json"));
}
async function plantFolderLink() {
  await symlink(victimDir, join(home, ".gemini"));
}

describe("Fleet's settings files in the agent's HOME", () => {
  for (const sandboxed of [false, true]) {
    const how = sandboxed ? "in bubblewrap" : "with sandbox: none";
    it(`${how}: a settings.json symlink to the worker's .bashrc is not written through`, async () => {
      await plantFileLink();
      const lines = await run(sandboxed);
      expect(await readFile(bashrc, "utf8")).toBe(ORIGINAL);
      expect(lines.find((l) => l.startsWith("SETTINGS "))).toContain('"usageStatisticsEnabled":false');
      const info = await lstat(join(home, ".gemini", "settings.json"));
      expect(info.isSymbolicLink()).toBe(false);
      // In a sandbox the file is Fleet's, read-only; it is not kept in the HOME the agent writes.
      if (sandboxed) expect(lines).toContain("READONLY");
    });

    it(`${how}: a ~/.gemini symlink to the worker's HOME is not written into`, async () => {
      await plantFolderLink();
      await run(sandboxed);
      expect(await readdir(victimDir)).toEqual([".bashrc"]);
      expect(await readFile(bashrc, "utf8")).toBe(ORIGINAL);
      expect((await lstat(join(home, ".gemini"))).isDirectory()).toBe(true);
    });
  }
});

describe("home: inherit's mount points in the agent's HOME", () => {
  it("refuses a path with a symlinked component and creates nothing through it", async () => {
    const userHome = join(root, "user-home");
    await mkdir(join(userHome, ".claude"), { recursive: true });
    await writeFile(join(userHome, ".claude", "CLAUDE.md"), "memory\n");
    await writeFile(join(userHome, ".claude.json"), "{}\n");
    // ~/.claude -> the worker's HOME, ~/.claude.json -> its .bashrc.
    await symlink(victimDir, join(home, ".claude"));
    await symlink(bashrc, join(home, ".claude.json"));
    const mounts = await inheritedHomeMounts("claude", userHome, home);
    expect(mounts).toEqual([]);
    expect(await readdir(victimDir)).toEqual([".bashrc"]);
    expect(await readFile(bashrc, "utf8")).toBe(ORIGINAL);
  });

  it("still makes the mount points of a clean HOME", async () => {
    const userHome = join(root, "user-home");
    await mkdir(join(userHome, ".claude", "skills"), { recursive: true });
    await writeFile(join(userHome, ".claude", "CLAUDE.md"), "memory\n");
    const mounts = await inheritedHomeMounts("claude", userHome, home);
    expect(mounts.map((m) => m.target).sort()).toEqual(
      [join(home, ".claude", "CLAUDE.md"), join(home, ".claude", "skills")].sort(),
    );
    expect((await lstat(join(home, ".claude", "CLAUDE.md"))).isFile()).toBe(true);
    expect((await lstat(join(home, ".claude", "skills"))).isDirectory()).toBe(true);
  });
});
