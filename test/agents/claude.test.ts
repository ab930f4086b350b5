import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { claudeAdapter } from "../../src/agents/claude.ts";
import type { AgentEvent } from "../../src/agents/types.ts";

const fixtures = new URL("../fixtures/agents/", import.meta.url);
const lines = (name: string) => readFileSync(new URL(name, fixtures), "utf8").split("\n");
const parseAll = (ls: string[]) => ls.flatMap((l) => claudeAdapter.parseLine(l));
const ofType = <T extends AgentEvent["type"]>(events: AgentEvent[], type: T) =>
  events.filter((e): e is Extract<AgentEvent, { type: T }> => e.type === type);

describe("claude adapter: command", () => {
  it("work phase: stream-json, acceptEdits with allowed tools, prompt on stdin, scrubbed env", () => {
    const cmd = claudeAdapter.command({
      prompt: "--do the thing",
      model: "claude-sonnet-4-5",
      phase: "work",
      cwd: "/tmp/x",
      credential: { name: "ANTHROPIC_API_KEY", value: "sk-test" },
      modelBaseUrl: "http://127.0.0.1:9",
      home: "/tmp/home",
    });
    expect(cmd.file).toBe("claude");
    expect(cmd.args).toEqual([
      "-p",
      "--output-format",
      "stream-json",
      "--verbose",
      "--model",
      "claude-sonnet-4-5",
      "--tools",
      "Bash,Edit,Write,Read,Glob,Grep,TaskCreate,TaskUpdate,TaskList,WebFetch,WebSearch",
      "--permission-mode",
      "acceptEdits",
      "--allowedTools",
      "Bash,Edit,Write,Read,Glob,Grep",
    ]);
    expect(cmd.stdin).toEqual({ text: "--do the thing" });
    expect(cmd.env).toMatchObject({
      ANTHROPIC_API_KEY: "sk-test",
      ANTHROPIC_BASE_URL: "http://127.0.0.1:9",
      HOME: "/tmp/home",
      DISABLE_TELEMETRY: "1",
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    });
  });

  it("plan phase is read-only (--permission-mode plan) and resume passes the session id", () => {
    const cmd = claudeAdapter.command({
      prompt: "p",
      model: "m",
      phase: "plan",
      cwd: ".",
      resumeSessionId: "abc",
    });
    expect(cmd.args).toContain("plan");
    expect(cmd.args).not.toContain("--allowedTools");
    expect(cmd.args.slice(-2)).toEqual(["--resume", "abc"]);
    // Offered: reading tools and ExitPlanMode, nothing that writes.
    expect(cmd.args[cmd.args.indexOf("--tools") + 1]).toBe(
      "Bash,Read,Glob,Grep,ExitPlanMode,TaskCreate,TaskUpdate,TaskList,WebFetch,WebSearch",
    );
  });

  it("offers only the tools a sandboxed task can use; the web tools follow the network", () => {
    const tools = (network: "proxy" | "none") =>
      claudeAdapter
        .command({ prompt: "p", model: "m", phase: "work", cwd: ".", network })
        .args.join(" ")
        .match(/--tools (\S+)/)?.[1];
    expect(tools("proxy")).toBe("Bash,Edit,Write,Read,Glob,Grep,TaskCreate,TaskUpdate,TaskList,WebFetch");
    expect(tools("none")).toBe("Bash,Edit,Write,Read,Glob,Grep,TaskCreate,TaskUpdate,TaskList");
  });
});

describe("claude adapter: real stream-json output", () => {
  it("2.1.197 scripted write run: init, text, tool use, tool result, totals from modelUsage", () => {
    const events = parseAll(lines("claude-2.1.197-scripted-write.ndjson"));
    expect(ofType(events, "unknown")).toEqual([]);
    const init = ofType(events, "init")[0];
    expect(init).toMatchObject({
      sessionId: "6f719890-2f42-4c30-a1c3-5b698a3450cc",
      model: "claude-opus-4-8[1m]",
    });
    expect(init?.tools).toContain("Write");
    expect(ofType(events, "text").map((e) => e.text)).toEqual([
      "I will create the file.",
      "Done: created HELLO.md",
    ]);
    expect(ofType(events, "tool_use")).toEqual([
      {
        type: "tool_use",
        name: "Write",
        id: "toolu_1",
        input: { file_path: "/home/dev/project/HELLO.md", content: "hello from agent\n" },
      },
    ]);
    const [toolResult] = ofType(events, "tool_result");
    expect(toolResult).toMatchObject({ id: "toolu_1", isError: false });
    expect(toolResult?.output).toMatch(/^File created successfully/);
    const usage = ofType(events, "usage");
    expect(usage.map((u) => u.id)).toEqual(["msg_3", "msg_3", "msg_4"]);
    const [result] = ofType(events, "result");
    expect(result).toEqual({
      type: "result",
      ok: true,
      sessionId: "6f719890-2f42-4c30-a1c3-5b698a3450cc",
      summary: "Done: created HELLO.md",
      totals: {
        usage: { input: 2700, output: 100, cacheRead: 1300, cacheWrite: 0, reasoning: 0 },
        costUsd: 0.01665,
        turns: 2,
        durationMs: 326,
        model: "claude-opus-4-8[1m]",
      },
    });
  });

  it("prefers modelUsage over the smaller top-level usage", () => {
    const [result] = ofType(
      parseAll([lines("claude_result_success_with_modelUsage.json").join("")]),
      "result",
    );
    expect(result?.totals).toEqual({
      usage: { input: 38, output: 765, cacheRead: 28775, cacheWrite: 31159, reasoning: 0 },
      costUsd: 0.24722425,
      turns: 2,
      durationMs: 8722,
      model: "claude-opus-4-5-20251101",
    });
  });

  it("falls back to top-level usage when there is no modelUsage (2.1.7)", () => {
    const events = parseAll(lines("claude_stream_json_basic_query.ndjson"));
    const [result] = ofType(events, "result");
    expect(result?.totals.usage).toEqual({
      input: 10,
      output: 25,
      cacheRead: 0,
      cacheWrite: 21570,
      reasoning: 0,
    });
    expect(result?.totals.costUsd).toBe(0.1354875);
    expect(ofType(events, "text").map((e) => e.text)).toEqual(["4"]);
  });
});

describe("claude adapter: rate limits and errors (lines as the 2.1.197 CLI printed them)", () => {
  it("api_retry with status 429 is a rate limit with the retry delay", () => {
    const line = JSON.stringify({
      type: "system",
      subtype: "api_retry",
      attempt: 1,
      max_retries: 10,
      retry_delay_ms: 1000,
      error_status: 429,
      error: "rate_limit",
      session_id: "s",
    });
    expect(claudeAdapter.parseLine(line)).toEqual([
      { type: "rate_limit", retryAfterSeconds: 1, message: "API 429 (rate_limit); retry 1/10" },
    ]);
  });

  it("a result with api_error_status 429 is a failed result plus a rate limit", () => {
    const line = JSON.stringify({
      type: "result",
      subtype: "success",
      is_error: true,
      api_error_status: 429,
      num_turns: 1,
      result: "API Error: Request rejected (429) · scripted 429",
      session_id: "s",
      total_cost_usd: 0,
      usage: { input_tokens: 0, output_tokens: 0 },
      modelUsage: {},
    });
    const events = claudeAdapter.parseLine(line);
    expect(events[0]).toEqual({
      type: "rate_limit",
      message: "API Error: Request rejected (429) · scripted 429",
    });
    expect(events[1]).toMatchObject({ type: "result", ok: false, totals: { costUsd: 0 } });
  });

  it("rate_limit_event: rejected -> rate limit with resetsAt; allowed -> nothing", () => {
    const rejected = JSON.stringify({
      type: "rate_limit_event",
      rate_limit_info: { status: "rejected", resetsAt: 1767225600, rateLimitType: "five_hour" },
      uuid: "u",
      session_id: "s",
    });
    expect(claudeAdapter.parseLine(rejected)).toEqual([
      {
        type: "rate_limit",
        resetsAt: "2026-01-01T00:00:00.000Z",
        message: "Claude usage limit reached (five_hour)",
      },
    ]);
    const allowed = JSON.stringify({ type: "rate_limit_event", rate_limit_info: { status: "allowed" } });
    expect(claudeAdapter.parseLine(allowed)).toEqual([]);
  });

  it("unknown and malformed lines become unknown events and never throw", () => {
    for (const line of [
      '{"type":"stream_event"}',
      "not json",
      "{truncated",
      "[1,2]",
      '{"type":"assistant","message":7}',
    ]) {
      const events = claudeAdapter.parseLine(line);
      expect(Array.isArray(events)).toBe(true);
    }
    expect(claudeAdapter.parseLine("not json")).toEqual([{ type: "unknown", raw: "not json" }]);
    expect(claudeAdapter.parseLine('{"type":"stream_event"}')).toEqual([
      { type: "unknown", raw: '{"type":"stream_event"}' },
    ]);
    expect(claudeAdapter.parseLine("")).toEqual([]);
  });
});
