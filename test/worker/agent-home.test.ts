// A run's HOME starts empty but for the session it resumes: the coder's session files, regular files
// found without following a link, and nothing else an earlier run left there.
import { lstat, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freshAgentHome } from "../../src/worker/sandbox/agent-home.ts";

let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), "fleet-agent-home-"));
});
afterAll(() => rm(scratch, { recursive: true, force: true }));

async function files(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string, rel: string) => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      if (e.isDirectory()) await walk(join(d, e.name), `${rel}${e.name}/`);
      else out.push(`${rel}${e.name}`);
    }
  };
  await walk(dir, "");
  return out.sort();
}

async function plant(home: string, entries: Record<string, string>) {
  for (const [rel, content] of Object.entries(entries)) {
    await mkdir(join(home, rel, ".."), { recursive: true });
    await writeFile(join(home, rel), content);
  }
}

describe("freshAgentHome", () => {
  it("empties the HOME when nothing is resumed", async () => {
    const home = join(scratch, "a");
    await plant(home, { ".claude/settings.json": "{}", ".bashrc": "echo hi", "x/y": "z" });
    expect(await freshAgentHome(home)).toEqual([]);
    expect(await files(home)).toEqual([]);
    expect((await lstat(home)).mode & 0o777).toBe(0o700);
  });

  it("carries Claude's session transcript, and drops its settings, memory file and other sessions", async () => {
    const home = join(scratch, "b");
    const id = "0b5c8e0e-1111-4222-8333-944445555666";
    await plant(home, {
      [`.claude/projects/-work-repo/${id}.jsonl`]: "transcript\n",
      ".claude/projects/-work-repo/other-session.jsonl": "another\n",
      ".claude/settings.json": '{"hooks":{}}',
      ".claude/CLAUDE.md": "always do X",
      ".claude.json": "{}",
    });
    expect(await freshAgentHome(home, { coder: "claude", sessionId: id })).toEqual([
      `.claude/projects/-work-repo/${id}.jsonl`,
    ]);
    expect(await files(home)).toEqual([`.claude/projects/-work-repo/${id}.jsonl`]);
    expect(await readFile(join(home, `.claude/projects/-work-repo/${id}.jsonl`), "utf8")).toBe(
      "transcript\n",
    );
  });

  it("follows no link: a session file that is a symlink, or reached through one, is not carried", async () => {
    const home = join(scratch, "c");
    const secret = join(scratch, "secret.txt");
    await writeFile(secret, "worker's secret\n");
    const id = "abc123";
    await mkdir(join(home, ".claude", "projects", "p"), { recursive: true });
    await symlink(secret, join(home, ".claude", "projects", "p", `${id}.jsonl`));
    await mkdir(join(scratch, "elsewhere", "q"), { recursive: true });
    await writeFile(join(scratch, "elsewhere", "q", `${id}.jsonl`), "planted\n");
    await symlink(join(scratch, "elsewhere"), join(home, ".claude", "projects", "linked"));
    expect(await freshAgentHome(home, { coder: "claude", sessionId: id })).toEqual([]);
    expect(await files(home)).toEqual([]);
  });

  it("carries each coder's own session layout, and a session id that is not a plain name carries nothing", async () => {
    const home = join(scratch, "d");
    await plant(home, {
      "sessions/2026/12/04/rollout-2026-12-04T11-39-17-01a240d9-fb80.jsonl": "codex\n",
      "config.toml": "[mcp_servers]",
    });
    expect(await freshAgentHome(home, { coder: "codex", sessionId: "01a240d9-fb80" })).toEqual([
      "sessions/2026/12/04/rollout-2026-12-04T11-39-17-01a240d9-fb80.jsonl",
    ]);
    await plant(home, {
      ".gemini/tmp/proj/chats/session-2026-12-04T11-39-f9feacc3.jsonl": "g",
      ".gemini/settings.json": "{}",
    });
    expect(await freshAgentHome(home, { coder: "gemini", sessionId: "f9feacc3-3245-452c" })).toEqual([
      ".gemini/tmp/proj/chats/session-2026-12-04T11-39-f9feacc3.jsonl",
    ]);
    await plant(home, { ".local/share/opencode/opencode.db": "db", ".config/opencode/opencode.json": "{}" });
    expect(await freshAgentHome(home, { coder: "opencode", sessionId: "ses_1" })).toEqual([
      ".local/share/opencode/opencode.db",
    ]);
    await plant(home, { ".claude/projects/p/x.jsonl": "t" });
    expect(await freshAgentHome(home, { coder: "claude", sessionId: "../x" })).toEqual([]);
  });
});
