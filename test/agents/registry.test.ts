import { describe, expect, it } from "vitest";
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
