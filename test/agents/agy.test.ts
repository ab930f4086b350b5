// The agy adapter against real agy 1.2.17 output (test/agents/fixtures/agy-1.2.17/, see SOURCES.txt
// there): agy is not on npm, so these captures are what it is checked against.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { agyAdapter } from "../../src/agents/agy.ts";
import type { AgentEvent } from "../../src/agents/types.ts";

const fixture = (name: string): AgentEvent[] =>
  readFileSync(new URL(`./fixtures/agy-1.2.17/${name}`, import.meta.url), "utf8")
    .split("\n")
    .flatMap((line) => agyAdapter.parseLine(line));

const last = <T extends AgentEvent["type"]>(events: AgentEvent[], type: T) =>
  events.filter((e) => e.type === type).at(-1) as Extract<AgentEvent, { type: T }> | undefined;

describe("agy adapter (real agy 1.2.17 output)", () => {
  it("command: -p <prompt> stream-json; skips permissions only in the work phase, plan mode otherwise", () => {
    const work = agyAdapter.command({ prompt: "go", model: "m", phase: "work", cwd: "." });
    expect(work.args).toEqual([
      "-p",
      "go",
      "--output-format",
      "stream-json",
      "--model",
      "m",
      "--print-timeout",
      "24h",
      "--dangerously-skip-permissions",
    ]);
    const plan = agyAdapter.command({ prompt: "go", model: "m", phase: "plan", cwd: "." }).args;
    expect(plan).not.toContain("--dangerously-skip-permissions");
    expect(plan.slice(-2)).toEqual(["--mode", "plan"]);
  });

  it("a run with tools: init, text, each tool's call and result, usage per model call, the run's totals", () => {
    const events = fixture("success-tools.stdout");
    expect(events.some((e) => e.type === "unknown")).toBe(false);
    expect(events[0]).toMatchObject({
      type: "init",
      sessionId: "1e9ea07f-4f78-4018-9988-7bc8cb67cb64",
      model: "gemini-3.8-flash-high",
    });
    expect(events.filter((e) => e.type === "tool_use")).toEqual([
      expect.objectContaining({ name: "view_file", input: { AbsolutePath: "/mnt/notes.txt" } }),
      expect.objectContaining({ name: "run_command", input: { CommandLine: "python3 -c 'print(6*7)'" } }),
    ]);
    expect(
      events.filter((e) => e.type === "tool_result").map((e) => (e as { output: string }).output),
    ).toEqual(["3 lines, 44 bytes", "42\r\n"]);
    expect(events.filter((e) => e.type === "usage")).toHaveLength(3);
    expect(last(events, "text")?.text).toBe("CODE=HERON-5518\nCMD=42\n");
    // The result's usage is the run's total (12606 + 18862 + 19280 input); thinking is inside output.
    expect(last(events, "result")).toEqual({
      type: "result",
      ok: true,
      sessionId: "1e9ea07f-4f78-4018-9988-7bc8cb67cb64",
      summary: "CODE=HERON-5518\nCMD=42\n",
      totals: {
        usage: { input: 50748, output: 6650, cacheRead: 0, cacheWrite: 0, reasoning: 6535 },
        costUsd: null,
        turns: 1,
        durationMs: 34273,
        model: "",
      },
    });
  });

  it("a tool the headless run could not approve: SUCCESS with no answer is a failure, naming the tool", () => {
    const events = fixture("denied-command.stdout");
    const result = last(events, "result");
    expect(result?.ok).toBe(false);
    expect(result?.summary).toMatch(/agy refused RunCommand/);
    expect(last(events, "error")?.message).toMatch(/refused RunCommand/);
    expect(result?.totals.usage.input).toBe(12586);
  });

  it("the quota running out mid-turn is a rate limit with its reset, and keeps the tokens spent", () => {
    const events = fixture("quota-exhausted.stdout");
    expect(last(events, "rate_limit")).toMatchObject({
      message: expect.stringMatching(/^Individual quota reached/),
      retryAfterSeconds: 34 * 60 + 13,
    });
    const result = last(events, "result");
    expect(result?.ok).toBe(false);
    expect(result?.totals.usage).toEqual({
      input: 144619,
      output: 30527,
      cacheRead: 1109412,
      cacheWrite: 0,
      reasoning: 27321,
    });
  });

  it("a failure before the turn (a rejected model) is an error with agy's own message", () => {
    const events = fixture("error-model-effort-conflict.stdout");
    expect(events.map((e) => e.type)).toEqual(["error", "result"]);
    expect(last(events, "error")?.message).toMatch(/^invalid model selection/);
    expect(last(events, "result")).toMatchObject({ ok: false, sessionId: undefined });
  });

  it("an unknown step type is kept as unknown, never thrown on", () => {
    const [e] = agyAdapter.parseLine('{"event":"step_update","step_update":{"step_type":"brand_new"}}');
    expect(e?.type).toBe("unknown");
  });
});
