import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { codexAdapter } from "../../src/agents/codex.ts";
import type { AgentEvent } from "../../src/agents/types.ts";

const fixture = new URL("../fixtures/agents/codex_exec_json_command_execution.jsonl", import.meta.url);
const ofType = <T extends AgentEvent["type"]>(events: AgentEvent[], type: T) =>
  events.filter((e): e is Extract<AgentEvent, { type: T }> => e.type === type);

describe("codex adapter: command", () => {
  it("exec --json with a model provider for the base URL, prompt on stdin, CODEX_HOME", () => {
    const cmd = codexAdapter.command({
      prompt: "fix it",
      model: "o4-mini",
      phase: "work",
      cwd: "/w",
      credential: { name: "OPENAI_API_KEY", value: "sk-x" },
      modelBaseUrl: "http://127.0.0.1:5555",
      home: "/tmp/ch",
    });
    expect(cmd.file).toBe("codex");
    expect(cmd.args.slice(0, 5)).toEqual(["exec", "--json", "--model", "o4-mini", "--skip-git-repo-check"]);
    expect(cmd.args).toContain("workspace-write");
    expect(cmd.args).toContain('model_providers.fleet.base_url="http://127.0.0.1:5555/v1"');
    expect(cmd.args).toContain('model_providers.fleet.wire_api="responses"');
    expect(cmd.args).toContain('model_providers.fleet.env_key="OPENAI_API_KEY"');
    expect(cmd.args.at(-1)).toBe("-");
    expect(cmd.stdin).toEqual({ text: "fix it" });
    expect(cmd.env).toEqual({ OPENAI_API_KEY: "sk-x", HOME: "/tmp/ch", CODEX_HOME: "/tmp/ch" });
  });

  it("plan phase is read-only; resume uses `exec resume <id> -`", () => {
    const cmd = codexAdapter.command({
      prompt: "p",
      model: "m",
      phase: "plan",
      cwd: ".",
      resumeSessionId: "t1",
    });
    expect(cmd.args).toContain("read-only");
    expect(cmd.args.slice(-3)).toEqual(["resume", "t1", "-"]);
  });
});

describe("codex adapter: real `codex exec --json` output", () => {
  it("parses thread, command execution, message and turn usage (input excludes cached)", () => {
    const events = readFileSync(fixture, "utf8")
      .split("\n")
      .flatMap((l) => codexAdapter.parseLine(l));
    expect(ofType(events, "unknown")).toEqual([]);
    expect(ofType(events, "init")).toEqual([
      { type: "init", sessionId: "019a2d7a-6455-7170-a661-c6d8b94c630a" },
    ]);
    expect(ofType(events, "tool_use")).toEqual([
      { type: "tool_use", name: "command", id: "item_1", input: { command: "bash -lc ls" } },
    ]);
    expect(ofType(events, "tool_result")).toEqual([
      {
        type: "tool_result",
        id: "item_1",
        isError: false,
        output: "stream-output-1.jsonl\nstream-output-2.jsonl\ntest.js\n",
      },
    ]);
    expect(ofType(events, "text")[0]?.text).toMatch(/^Files here/);
    const [result] = ofType(events, "result");
    expect(result).toEqual({
      type: "result",
      ok: true,
      totals: {
        usage: { input: 6040 - 4992, cacheRead: 4992, cacheWrite: 0, output: 129, reasoning: 0 },
        costUsd: null,
        turns: 1,
        durationMs: 0,
        model: "",
      },
    });
  });

  // Lines below were printed by codex-cli 0.171.0 against the scripted server.
  it("turn.completed with reasoning and cache-write fields", () => {
    const line =
      '{"type":"turn.completed","usage":{"input_tokens":2200,"cached_input_tokens":1300,"cache_write_input_tokens":0,"output_tokens":80,"reasoning_output_tokens":30}}';
    expect(codexAdapter.parseLine(line)[0]).toEqual({
      type: "usage",
      usage: { input: 900, cacheRead: 1300, cacheWrite: 0, output: 80, reasoning: 30 },
    });
  });

  it("usage limits and 429s are rate limits; turn.failed is a failed result", () => {
    expect(
      codexAdapter.parseLine(
        '{"type":"error","message":"You’ve hit your usage limit. Try again at 2:36 PM."}',
      ),
    ).toEqual([{ type: "rate_limit", message: "You’ve hit your usage limit. Try again at 2:36 PM." }]);
    expect(
      codexAdapter.parseLine(
        '{"type":"error","message":"Reconnecting... 1/5 (exceeded retry limit, last status: 429 Too Many Requests)"}',
      )[0]?.type,
    ).toBe("rate_limit");
    const failed = codexAdapter.parseLine(
      '{"type":"turn.failed","error":{"message":"exceeded retry limit, last status: 429 Too Many Requests"}}',
    );
    expect(failed.map((e) => e.type)).toEqual(["rate_limit", "result"]);
    expect(failed[1]).toMatchObject({ ok: false });
    expect(
      codexAdapter.parseLine('{"type":"turn.failed","error":{"message":"stream disconnected"}}')[0],
    ).toEqual({
      type: "error",
      message: "stream disconnected",
    });
  });

  it("error items are non-fatal notices; unknown lines are kept as unknown", () => {
    const notice =
      '{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model metadata for `o4-mini` not found."}}';
    expect(codexAdapter.parseLine(notice)).toEqual([
      { type: "error", message: "Model metadata for `o4-mini` not found." },
    ]);
    expect(codexAdapter.parseLine('{"type":"something.new"}')).toEqual([
      { type: "unknown", raw: '{"type":"something.new"}' },
    ]);
    expect(codexAdapter.parseLine("Reading additional input from stdin...")[0]?.type).toBe("unknown");
  });
});
