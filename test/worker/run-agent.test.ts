import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AgentAdapter, AgentEvent } from "../../src/agents/types.ts";
import {
  buildAgentEnv,
  LineSplitter,
  livingProcessesInGroup,
  runAgent,
} from "../../src/worker/sandbox/run-agent.ts";
import { scratchDirsRemovedAfterAll } from "../support/scratch-dirs.ts";

const scratchDir = scratchDirsRemovedAfterAll();

/** An adapter whose "agent" is a node script; its stdout lines are JSON events or plain text. */
function scriptAdapter(script: string, env: Record<string, string> = {}): AgentAdapter {
  return {
    coder: "script",
    displayName: "Script",
    defaultModel: "none",
    binary: process.execPath,
    credentialEnv: "SCRIPT_KEY",
    command: (inv) => ({
      file: process.execPath,
      args: ["-e", script],
      env: { ...env, ...(inv.credential ? { [inv.credential.name]: inv.credential.value } : {}) },
      stdin: { text: inv.prompt },
    }),
    parseLine: (line) => {
      try {
        return [JSON.parse(line) as AgentEvent];
      } catch {
        return [{ type: "unknown", raw: line }];
      }
    },
  };
}

const dir = () => scratchDir("run-agent-test-");
const inv = (cwd: string) => ({ prompt: "hello", model: "m1", phase: "work" as const, cwd, home: cwd });

describe("buildAgentEnv", () => {
  const planted = ["GITHUB_TOKEN", "PRIVATE_KEY", "WEBHOOK_SECRET", "ANTHROPIC_API_KEY"];
  beforeEach(() => {
    for (const k of planted) process.env[k] = `planted-${k}`;
  });
  afterEach(() => {
    for (const k of planted) delete process.env[k];
  });

  it("is the minimal base plus the adapter's own variables", () => {
    const env = buildAgentEnv({ env: { OPENAI_API_KEY: "mine" } }, { home: "/h", path: "/bin" });
    expect(Object.keys(env).sort()).toEqual(["HOME", "LANG", "OPENAI_API_KEY", "PATH", "TMPDIR"]);
    expect(env.HOME).toBe("/h");
  });

  it("planted GITHUB_TOKEN / PRIVATE_KEY in process.env do not reach the child", async () => {
    const cwd = dir();
    const adapter = scriptAdapter(
      "process.stdout.write(JSON.stringify({type:'text',text:JSON.stringify(process.env)})+'\\n')",
    );
    const texts: string[] = [];
    const r = await runAgent(
      adapter,
      { ...inv(cwd), credential: { name: "SCRIPT_KEY", value: "only-this" } },
      {
        timeoutMs: 20_000,
        stallMs: 20_000,
        onEvent: (e) => e.type === "text" && texts.push(e.text),
      },
    );
    expect(r.reason).toBe("completed");
    const childEnv = JSON.parse(texts[0] ?? "{}") as Record<string, string>;
    for (const k of planted) expect(childEnv[k]).toBeUndefined();
    expect(childEnv.SCRIPT_KEY).toBe("only-this");
    expect(childEnv.HOME).toBe(cwd);
    // Whatever node itself adds aside, nothing beyond the base and the adapter's variables.
    const extra = Object.keys(childEnv).filter(
      (k) => !["PATH", "HOME", "LANG", "TMPDIR", "SCRIPT_KEY"].includes(k),
    );
    expect(extra).toEqual([]);
  });
});

describe("LineSplitter", () => {
  it("joins partial chunks, strips CRLF, keeps multi-byte characters split across chunks", () => {
    const lines: string[] = [];
    const s = new LineSplitter((l) => lines.push(l));
    const bytes = Buffer.from('{"a":1}\r\n{"b":"é€"}\npart', "utf8");
    for (let i = 0; i < bytes.length; i++) s.push(bytes.subarray(i, i + 1));
    s.push(Buffer.from("ial\n\nlast"));
    s.end();
    expect(lines).toEqual(['{"a":1}', '{"b":"é€"}', "partial", "", "last"]);
  });

  it("passes a huge line on in bounded pieces", () => {
    const lines: string[] = [];
    const s = new LineSplitter((l) => lines.push(l), 1000);
    s.push("x".repeat(2500));
    s.push("\nok\n");
    expect(lines.map((l) => l.length)).toEqual([1000, 1000, 500, 2]);
  });
});

describe("runAgent with a scripted process", () => {
  it("parses events, logs every raw line (stderr marked), takes totals from the result", async () => {
    const cwd = dir();
    const log = join(cwd, "agent.log");
    const script = `
      const out = (o) => process.stdout.write(JSON.stringify(o) + "\\n");
      let input = ""; process.stdin.on("data", d => input += d).on("end", () => {
        out({ type: "init", sessionId: "sess-1" });
        process.stdout.write('{"type":"text","text":"' + input + '"}\\r\\n');
        process.stdout.write('{"type":"text","text":"' + "y".repeat(300000) + '"}\\n');
        process.stderr.write("a warning\\n");
        process.stdout.write("not json\\n");
        out({ type: "result", ok: true, totals: { usage: { input: 1, output: 2, cacheRead: 3, cacheWrite: 4, reasoning: 0 }, costUsd: null, turns: 1, durationMs: 0, model: "" } });
      });`;
    const events: AgentEvent[] = [];
    const r = await runAgent(
      scriptAdapter(script),
      { ...inv(cwd), credential: { name: "SCRIPT_KEY", value: "v" } },
      {
        timeoutMs: 20_000,
        stallMs: 20_000,
        logFile: log,
        onEvent: (e) => events.push(e),
      },
    );
    expect(r.reason).toBe("completed");
    expect(r.exitCode).toBe(0);
    expect(r.sessionId).toBe("sess-1");
    expect(events.map((e) => e.type)).toEqual(["init", "text", "text", "unknown", "result"]);
    expect(events[1]).toEqual({ type: "text", text: "hello" });
    expect((events[2] as { text: string }).text.length).toBe(300_000);
    expect(r.events).toBe(5);
    expect(r.totals?.model).toBe("m1");
    expect(r.totals?.credential).toBe("SCRIPT_KEY");
    expect(r.totals?.usage).toEqual({ input: 1, output: 2, cacheRead: 3, cacheWrite: 4, reasoning: 0 });
    expect(r.totals?.durationMs).toBeGreaterThan(0);
    const logged = readFileSync(log, "utf8").split("\n");
    expect(logged).toContain("[stderr] a warning");
    expect(logged).toContain("not json");
    expect(logged.length).toBe(7); // six lines and the final newline
  });

  it("an agent that reported its end and does not exit is stopped after the exit grace: its run is what it reported", async () => {
    const cwd = dir();
    const result = (ok: boolean) =>
      `process.stdout.write(JSON.stringify({ type: "result", ok: ${ok}, totals: { usage: { input: 5, output: 1, cacheRead: 0, cacheWrite: 0, reasoning: 0 }, costUsd: null, turns: 1, durationMs: 0, model: "" } }) + "\\n"); setInterval(() => {}, 1000);`;
    const opts = { timeoutMs: 30_000, stallMs: 20_000, exitGraceMs: 300, killGraceMs: 500 };
    const started = Date.now();
    const done = await runAgent(scriptAdapter(result(true)), inv(cwd), opts);
    // Well before the stall timeout: the grace after the result, then SIGTERM.
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(done.reason).toBe("completed");
    expect(done.totals?.usage.input).toBe(5);
    const failed = await runAgent(scriptAdapter(result(false)), inv(cwd), opts);
    expect(failed.reason).toBe("failed");
    // Quiet before any result: a stall, as ever.
    const quiet = await runAgent(scriptAdapter("setInterval(() => {}, 1000)"), inv(cwd), {
      ...opts,
      stallMs: 300,
    });
    expect(quiet.reason).toBe("stall");
  });

  it("a non-zero exit is failed; a rate limit before it makes it rate-limited", async () => {
    const cwd = dir();
    const failed = await runAgent(scriptAdapter("process.exit(3)"), inv(cwd), {
      timeoutMs: 20_000,
      stallMs: 20_000,
    });
    expect(failed).toMatchObject({ reason: "failed", exitCode: 3 });
    const limited = await runAgent(
      scriptAdapter(
        `console.log(JSON.stringify({type:"rate_limit",message:"slow down",resetsAt:"2026-01-01T00:00:00.000Z"})); process.exit(1)`,
      ),
      inv(cwd),
      { timeoutMs: 20_000, stallMs: 20_000 },
    );
    expect(limited.reason).toBe("rate-limited");
    expect(limited.rateLimit).toEqual({
      message: "slow down",
      resetsAt: "2026-01-01T00:00:00.000Z",
      retryAfterSeconds: undefined,
    });
  });

  it("a missing executable is a spawn error", async () => {
    const adapter = {
      ...scriptAdapter(""),
      command: () => ({ file: "/nonexistent/agent", args: [], env: {}, stdin: "ignore" as const }),
    };
    const r = await runAgent(adapter, inv(dir()), { timeoutMs: 5000, stallMs: 5000 });
    expect(r.reason).toBe("spawn-error");
    expect(r.spawnError).toMatch(/ENOENT/);
  });

  // The script starts a grandchild that would outlive it, then goes quiet or keeps talking.
  const treeScript = (talk: boolean) => `
    const { spawn } = require("node:child_process");
    const g = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
    console.log(JSON.stringify({ type: "text", text: "grandchild " + g.pid }));
    ${talk ? 'setInterval(() => console.log(JSON.stringify({ type: "text", text: "tick" })), 50);' : "setInterval(() => {}, 1000);"}
    process.on("SIGTERM", () => {}); // ignores SIGTERM: only SIGKILL ends it
  `;

  for (const [name, opts, reason] of [
    ["stall", { timeoutMs: 30_000, stallMs: 500 }, "stall"],
    ["timeout", { timeoutMs: 800, stallMs: 30_000 }, "timeout"],
  ] as const) {
    it(`${name}: kills the whole process tree (SIGTERM, then SIGKILL)`, async () => {
      const r = await runAgent(scriptAdapter(treeScript(name === "timeout")), inv(dir()), {
        ...opts,
        killGraceMs: 300,
      });
      expect(r.reason).toBe(reason);
      expect(r.signal).toBe("SIGKILL");
      expect(await livingProcessesInGroup(r.pid!)).toEqual([]);
    });
  }

  it("cancel via AbortSignal kills the tree", async () => {
    const ac = new AbortController();
    let grandchild = 0;
    const r = await runAgent(scriptAdapter(treeScript(false)), inv(dir()), {
      timeoutMs: 30_000,
      stallMs: 30_000,
      signal: ac.signal,
      killGraceMs: 300,
      onEvent: (e) => {
        if (e.type === "text" && e.text.startsWith("grandchild")) {
          grandchild = Number(e.text.split(" ")[1]);
          ac.abort();
        }
      },
    });
    expect(r.reason).toBe("cancelled");
    expect(grandchild).toBeGreaterThan(0);
    expect(await livingProcessesInGroup(r.pid!)).toEqual([]);
  });
});
