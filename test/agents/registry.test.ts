import { describe, expect, it } from "vitest";
import { agyAdapter } from "../../src/agents/agy.ts";
import { geminiAdapter } from "../../src/agents/gemini.ts";
import { adapters, getAdapter, knownCoders } from "../../src/agents/index.ts";
import type { AgentEvent } from "../../src/agents/types.ts";
import { CODER_NAMES, CODERS } from "../../src/core/coders.ts";

describe("registry", () => {
  it("knows claude, codex, agy, gemini and opencode, keyed by coder", () => {
    expect(knownCoders.sort()).toEqual(["agy", "claude", "codex", "gemini", "opencode"]);
    for (const c of knownCoders) expect(adapters[c]?.coder).toBe(c);
    expect(getAdapter("codex")?.binary).toBe("codex");
    expect(getAdapter("nope")).toBeUndefined();
    expect(getAdapter("toString")).toBeUndefined();
  });

  it("takes each adapter's facts from the core registry, one adapter per registered coder", () => {
    expect(Object.keys(adapters)).toEqual([...CODER_NAMES]);
    for (const c of Object.values(CODERS)) {
      const a = getAdapter(c.name)!;
      expect(a).toMatchObject({
        coder: c.name,
        displayName: c.displayName,
        defaultModel: c.defaultModel,
        binary: c.binary,
        credentialEnv: c.credential.env,
        credentialAliases: c.credential.aliases,
      });
      expect(a.upstream).toBe(c.gateway?.upstream);
      expect(a.modelRoutes).toBe(c.gateway?.routes);
      const cmd = a.command({ prompt: "p", model: "m", phase: "work", cwd: "/w" });
      expect(cmd.file).toBe(c.binary);
      expect(cmd.stdin === "ignore" ? "argv" : "stdin").toBe(c.promptOn);
    }
  });

  it("passes the base URL in the variable the registry names, when the CLI reads one", () => {
    for (const c of Object.values(CODERS)) {
      const cmd = getAdapter(c.name)!.command({
        prompt: "p",
        model: "m",
        phase: "work",
        cwd: "/w",
        modelBaseUrl: "http://127.0.0.1:9",
      });
      if (c.gateway?.variable) expect(cmd.env[c.gateway.variable]).toBe("http://127.0.0.1:9");
    }
  });

  it("no adapter throws on garbage lines", () => {
    const garbage = [
      "",
      "   ",
      "}{",
      "null",
      "42",
      '"str"',
      '{"type":null}',
      '{"event":{}}',
      "\u0000\u0001",
      "x".repeat(100_000),
    ];
    for (const a of Object.values(adapters)) {
      for (const line of garbage) {
        const events = a.parseLine(line);
        expect(Array.isArray(events)).toBe(true);
        for (const e of events) expect(["unknown", "error"]).toContain(e.type);
      }
    }
  });
});

// Recorded lines in the documented agy stream-json shape (the agy binary is not on npm).
const agyLines = [
  '{"event":"init","session_id":"conv-1","model":"gemini-3-pro","timestamp":"2026-07-28T10:00:00Z"}',
  '{"event":"step_update","step_type":"planner_response","text":"I will add the file."}',
  '{"event":"step_update","step_type":"tool_call","tool_id":"t1","tool_info":{"name":"write_file","input":{"path":"A.md"}}}',
  '{"event":"step_update","step_type":"tool_result","tool_id":"t1","status":"success","output":"wrote A.md"}',
  '{"event":"step_update","step_type":"thinking","text":"..."}',
  '{"event":"result","status":"success","result":"Added A.md","session_id":"conv-1","duration_ms":1234,"num_turns":2,"usage":{"input_tokens":900,"output_tokens":120,"cached_input_tokens":300}}',
];

describe("agy adapter (documented format, recorded lines)", () => {
  it("command: -p <prompt> --output-format stream-json, yolo only in the work phase", () => {
    const work = agyAdapter.command({ prompt: "go", model: "m", phase: "work", cwd: "." });
    expect(work.args).toEqual(["-p", "go", "--output-format", "stream-json", "--model", "m", "--yolo"]);
    expect(agyAdapter.command({ prompt: "go", model: "m", phase: "plan", cwd: "." }).args).not.toContain(
      "--yolo",
    );
  });

  it("parses init, steps and the result with usage", () => {
    const events = agyLines.flatMap((l) => agyAdapter.parseLine(l));
    expect(events.map((e) => e.type)).toEqual(["init", "text", "tool_use", "tool_result", "result"]);
    expect(events[0]).toMatchObject({ sessionId: "conv-1", model: "gemini-3-pro" });
    expect(events[2]).toEqual({ type: "tool_use", name: "write_file", input: { path: "A.md" }, id: "t1" });
    expect(events[4]).toEqual({
      type: "result",
      ok: true,
      sessionId: "conv-1",
      summary: "Added A.md",
      totals: {
        usage: { input: 900, output: 120, cacheRead: 300, cacheWrite: 0, reasoning: 0 },
        costUsd: null,
        turns: 2,
        durationMs: 1234,
        model: "",
      },
    });
    expect(agyAdapter.parseLine('{"event":"step_update","step_type":"brand_new"}')[0]?.type).toBe("unknown");
  });
});

// Recorded lines in the format gemini-cli declares (packages/core/src/output/types.ts).
const geminiLines = [
  '{"type":"init","timestamp":"2026-01-01T00:00:00.000Z","session_id":"g-1","model":"gemini-2.5-pro"}',
  '{"type":"message","timestamp":"2026-01-01T00:00:00.100Z","role":"user","content":"list files"}',
  '{"type":"message","timestamp":"2026-01-01T00:00:01.000Z","role":"assistant","content":"Listing.","delta":true}',
  '{"type":"tool_use","timestamp":"2026-01-01T00:00:01.100Z","tool_name":"run_shell_command","tool_id":"c1","parameters":{"command":"ls"}}',
  '{"type":"tool_result","timestamp":"2026-01-01T00:00:01.500Z","tool_id":"c1","status":"success","output":"a.txt"}',
  '{"type":"error","timestamp":"2026-01-01T00:00:01.600Z","severity":"warning","message":"Loop detected"}',
  '{"type":"result","timestamp":"2026-01-01T00:00:02.000Z","status":"success","stats":{"total_tokens":1700,"input_tokens":1500,"output_tokens":200,"cached":1000,"input":500,"duration_ms":2000,"tool_calls":1}}',
];

describe("gemini adapter (added as one file + one registry line)", () => {
  it("command: -p <prompt> --output-format stream-json -m <model>", () => {
    const cmd = geminiAdapter.command({ prompt: "hi", model: "gemini-2.5-flash", phase: "work", cwd: "." });
    expect(cmd.args.slice(0, 6)).toEqual([
      "-p",
      "hi",
      "--output-format",
      "stream-json",
      "-m",
      "gemini-2.5-flash",
    ]);
  });

  it("parses the documented events; input excludes cached tokens", () => {
    const events: AgentEvent[] = geminiLines.flatMap((l) => geminiAdapter.parseLine(l));
    expect(events.map((e) => e.type)).toEqual(["init", "text", "tool_use", "tool_result", "error", "result"]);
    expect(events.at(-1)).toEqual({
      type: "result",
      ok: true,
      sessionId: undefined,
      totals: {
        usage: { input: 500, output: 200, cacheRead: 1000, cacheWrite: 0, reasoning: 0 },
        costUsd: null,
        turns: 0,
        durationMs: 2000,
        model: "",
      },
    });
    const quota = geminiAdapter.parseLine(
      '{"type":"result","status":"error","error":{"type":"FatalError","message":"429 RESOURCE_EXHAUSTED quota"}}',
    );
    expect(quota.map((e) => e.type)).toEqual(["rate_limit", "result"]);
  });
});
