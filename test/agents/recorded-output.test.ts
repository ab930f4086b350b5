// The gemini and opencode adapters against output recorded from their real CLIs
// (test/agents/fixtures/SOURCES.txt says how): parsing checked without starting a CLI.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { geminiAdapter } from "../../src/agents/gemini.ts";
import { opencodeAdapter } from "../../src/agents/opencode.ts";
import type { AgentAdapter, AgentEvent } from "../../src/agents/types.ts";

const recorded = (adapter: AgentAdapter, name: string): AgentEvent[] =>
  readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8")
    .split("\n")
    .flatMap((line) => adapter.parseLine(line));

const texts = (events: AgentEvent[]) =>
  events.filter((e) => e.type === "text").map((e) => (e as { text: string }).text);

describe("recorded output of the real CLIs", () => {
  it("gemini 0.61.0: init, text, the tool's call and result, a result with the run's figures", () => {
    const events = recorded(geminiAdapter, "gemini-0.61.0-scripted-write.ndjson");
    expect(events.some((e) => e.type === "unknown")).toBe(false);
    expect(events.map((e) => e.type)).toEqual(["init", "text", "tool_use", "tool_result", "text", "result"]);
    expect(texts(events)).toEqual(["I will create the file.", "Done: created HELLO.md"]);
    expect(events[2]).toMatchObject({
      name: "write_file",
      input: { file_path: "HELLO.md", content: "hello\n" },
    });
    expect(events[3]).toMatchObject({ isError: false, id: (events[2] as { id: string }).id });
    expect(events.at(-1)).toMatchObject({
      ok: true,
      totals: {
        usage: { input: 1400, output: 100, cacheRead: 1300, cacheWrite: 0, reasoning: 0 },
        model: "gemini-2.5-pro",
      },
    });
  });

  it("opencode 1.18.33: a usage event per model message, no final line; each tool call with its result", () => {
    const events = recorded(opencodeAdapter, "opencode-1.18.33-scripted-write.ndjson");
    expect(events.some((e) => e.type === "unknown")).toBe(false);
    expect(texts(events)).toEqual(["I will create the file.", "Done: created HELLO.md"]);
    expect(events.filter((e) => e.type === "tool_use")).toEqual([
      expect.objectContaining({ name: "write", input: { filePath: "HELLO.md", content: "hello\n" } }),
    ]);
    expect(events.filter((e) => e.type === "tool_result")).toEqual([
      expect.objectContaining({ isError: false, output: "Wrote file successfully." }),
    ]);
    const usage = events.filter((e) => e.type === "usage") as Array<Extract<AgentEvent, { type: "usage" }>>;
    expect(usage.map((u) => u.usage)).toEqual([
      { input: 1200, output: 40, cacheRead: 300, cacheWrite: 0, reasoning: 0 },
      { input: 1500, output: 60, cacheRead: 1000, cacheWrite: 0, reasoning: 0 },
    ]);
    expect(new Set(usage.map((u) => u.id)).size).toBe(2);
    expect(events.some((e) => e.type === "result")).toBe(false);
  });

  it("opencode's error line is a failure with the API's message; a 429 a rate limit", () => {
    const line = (status: number, message: string) =>
      JSON.stringify({
        type: "error",
        sessionID: "ses_1",
        error: { name: "APIError", data: { message, statusCode: status, isRetryable: false } },
      });
    expect(opencodeAdapter.parseLine(line(404, "no route"))).toEqual([
      { type: "error", message: "no route" },
    ]);
    expect(opencodeAdapter.parseLine(line(429, "slow down"))[0]?.type).toBe("rate_limit");
  });
});
