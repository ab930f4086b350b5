// What a sandbox is shown of an agent CLI's interpreter when that interpreter lives in the worker's
// HOME (a node in ~/bin or ~/.local/bin): the interpreter, never the folder that holds it with the
// user's keys and Fleet's state.
import { access, chmod, copyFile, link, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentAdapter, AgentEvent } from "../../src/agents/types.ts";
import {
  bubblewrapArgs,
  executableMounts,
  holdsAny,
  interpreterMounts,
} from "../../src/worker/sandbox/bubblewrap.ts";
import { runAgent } from "../../src/worker/sandbox/run-agent.ts";

let scratch: string;
let home: string;
let fleetHome: string;

/** Puts a real node binary at `path` (a hard link where the filesystem allows, else a copy). */
async function placeNode(path: string) {
  if (
    await access(path).then(
      () => true,
      () => false,
    )
  )
    return;
  await mkdir(join(path, ".."), { recursive: true });
  await link(process.execPath, path).catch(() => copyFile(process.execPath, path));
  await chmod(path, 0o755);
}

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), "fleet-mounts-"));
  home = join(scratch, "home");
  fleetHome = join(home, ".fleet");
  await mkdir(join(home, ".ssh"), { recursive: true });
  await writeFile(join(home, ".ssh", "id_rsa"), "PRIVATE-KEY-CANARY\n");
  await writeFile(join(home, ".npmrc"), "//registry.npmjs.org/:_authToken=NPM-TOKEN-CANARY\n");
  await mkdir(join(fleetHome, "work"), { recursive: true });
  await writeFile(join(fleetHome, "state.json"), "FLEET-STATE-CANARY\n");
  await mkdir(join(home, ".local", "share", "opencode"), { recursive: true });
  await writeFile(join(home, ".local", "share", "opencode", "auth.json"), "OPENCODE-AUTH-CANARY\n");
});

afterAll(() => rm(scratch, { recursive: true, force: true }));

/** An "agent": a node script with `interpreter` on its #! line that tries to read the worker's files. */
async function agentScript(interpreter: string): Promise<string> {
  const script = join(scratch, "agent-pkg", "agent.js");
  await mkdir(join(scratch, "agent-pkg"), { recursive: true });
  const files = [
    join(home, ".ssh", "id_rsa"),
    join(home, ".npmrc"),
    join(fleetHome, "state.json"),
    join(home, ".local", "share", "opencode", "auth.json"),
  ];
  await writeFile(
    script,
    `#!${interpreter}\nconst fs = require("fs");\nfor (const f of ${JSON.stringify(files)}) { try { console.log(JSON.stringify({ type: "text", text: fs.readFileSync(f, "utf8") })); } catch (e) { console.log(JSON.stringify({ type: "text", text: "unreadable " + e.code })); } }\n`,
  );
  await chmod(script, 0o755);
  return script;
}

const adapter = (file: string): AgentAdapter => ({
  coder: "script",
  displayName: "Script",
  defaultModel: "none",
  binary: file,
  credentialEnv: "SCRIPT_KEY",
  command: () => ({ file, args: [], env: {}, stdin: "ignore" }),
  parseLine: (line) => {
    try {
      return [JSON.parse(line) as AgentEvent];
    } catch {
      return [{ type: "unknown", raw: line }];
    }
  },
});

describe("an agent CLI whose interpreter is in the worker's HOME", () => {
  for (const where of ["bin/node", ".local/bin/node"]) {
    it(`~/${where}: the sandbox shows the interpreter, not HOME, ~/.local or $FLEET_HOME`, async () => {
      const node = join(home, where);
      await placeNode(node);
      const forbidden = [home, fleetHome, join(fleetHome, "work")];
      const mounts = await interpreterMounts(node, forbidden);
      expect(mounts).toEqual([node]);
      const script = await agentScript(node);
      const cwd = await mkdtemp(join(scratch, "cwd-"));
      const agentHome = await mkdtemp(join(scratch, "agent-home-"));
      const texts: string[] = [];
      const r = await runAgent(
        adapter(script),
        { prompt: "", model: "none", phase: "work", cwd, home: agentHome },
        {
          timeoutMs: 20_000,
          stallMs: 20_000,
          sandbox: { writable: [cwd], readOnly: [] },
          forbidden,
          onEvent: (e) => {
            if (e.type === "text") texts.push(e.text);
          },
        },
      );
      expect(r.reason, r.error).toBe("completed");
      expect(texts).toHaveLength(4);
      for (const t of texts) expect(t).toBe("unreadable ENOENT");
    }, 60_000);
  }

  it("a mount that is, or holds, a forbidden folder is refused outright", async () => {
    expect(holdsAny(scratch, [home])).toBe(true);
    expect(holdsAny(home, [home])).toBe(true);
    expect(holdsAny(join(home, "bin"), [home])).toBe(false);
    await expect(
      bubblewrapArgs({ writable: [], readOnly: [scratch] }, "/", { forbidden: [home] }),
    ).rejects.toThrow(/refusing to show the agent .*: it is, or holds, the worker's HOME/);
    // The package of a CLI inside HOME is shown (it holds nothing forbidden), its interpreter narrowly.
    const node = join(home, "bin", "node");
    await placeNode(node);
    const script = await agentScript(node);
    const mounts = await executableMounts(script, [home]);
    expect(mounts).toContain(node);
    expect(mounts.some((m) => holdsAny(m, [home]))).toBe(false);
  });
});
