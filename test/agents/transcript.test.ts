// The transcript a person reads in `fleet task <id> log` and in the tracking comment's log excerpt,
// from real coder output (test/fixtures/agents, see SOURCES.txt) and from events of every kind.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { adapters } from "../../src/agents/index.ts";
import { renderTranscript, toolCallSummary, transcriptOfLog } from "../../src/agents/transcript.ts";

const fixture = (name: string) =>
  readFileSync(new URL(`../fixtures/agents/${name}`, import.meta.url), "utf8");

describe("an agent's transcript", () => {
  it("Claude's stream-json: what it said, the tool and its file, the tool's answer, how it ended", () => {
    expect(transcriptOfLog(adapters.claude!, fixture("claude-2.1.197-scripted-write.ndjson"))).toBe(
      [
        "== claude-opus-4-8[1m] · session 6f719890-2f42-4c30-a1c3-5b698a3450cc",
        "> I will create the file.",
        "-> Write /home/dev/project/HELLO.md",
        "   = File created successfully at: /home/dev/project/HELLO.md (file state is current in your context — no need to Read it back)",
        "> Done: created HELLO.md",
        "== finished · 2 turns · 4,000 tokens in, 100 out · $0.02",
      ].join("\n"),
    );
  });

  it("Codex's JSON lines: the command, its output cut to two lines, no dollar figure (Codex reports none)", () => {
    expect(transcriptOfLog(adapters.codex!, fixture("codex_exec_json_command_execution.jsonl"))).toBe(
      [
        "== session 019a2d7a-6455-7170-a661-c6d8b94c630a",
        "-> command bash -lc ls",
        "   = stream-output-1.jsonl",
        "     stream-output-2.jsonl",
        "     … 1 more line",
        "> Files here: `stream-output-1.jsonl`, `stream-output-2.jsonl`, `test.js`.",
        "== finished · 1 turn · 6,040 tokens in, 129 out",
      ].join("\n"),
    );
  });

  it("errors, rate limits and failed tools are marked; long text is cut; the coder's own stderr lines stay", () => {
    const text = renderTranscript(
      [
        { type: "text", text: `${"x".repeat(300)}\nline 2\nline 3` },
        { type: "tool_use", name: "Bash", input: { command: "npm test\n# and more" } },
        { type: "tool_result", isError: true, output: "FAIL a.test.ts\n1 failed\nstack\nmore" },
        { type: "rate_limit", message: "429 from the model", resetsAt: "2026-12-04T15:00:00Z" },
        { type: "error", message: "API Error: overloaded" },
        { type: "unknown", raw: '{"type":"stream_event"}' },
        { type: "unknown", raw: "Warning: something the CLI printed" },
        { type: "usage", usage: { input: 5 } },
      ],
      { textLines: 2, width: 80 },
    ).split("\n");
    expect(text[0]).toHaveLength(80);
    expect(text[0]!.endsWith("…")).toBe(true);
    expect(text.slice(1)).toEqual([
      "  line 2",
      "  … 1 more line",
      "-> Bash npm test",
      "   ! FAIL a.test.ts",
      "     1 failed",
      "     … 2 more lines",
      "!! rate limited: 429 from the model (until 2026-12-04T15:00:00Z)",
      "!! API Error: overloaded",
      "Warning: something the CLI printed",
      "(1 line of the coder's own bookkeeping not shown; --raw shows every line)",
    ]);
  });

  it("a tool call is summed up by the argument that says what it does", () => {
    expect(toolCallSummary({ file_path: "src/a.ts", content: "..." })).toBe("src/a.ts");
    expect(toolCallSummary({ pattern: "TODO", path: "src" })).toBe("TODO");
    expect(toolCallSummary({ subject: "Write the tests", description: "…" })).toBe("Write the tests");
    expect(toolCallSummary({ taskId: "2", status: "completed" })).toBe("#2 completed");
    expect(toolCallSummary({ command: ["bash", "-lc", "ls"] })).toBe("bash -lc ls");
    expect(toolCallSummary({ todos: [{ content: "a" }, { content: "b" }] })).toBe("2 items");
    expect(toolCallSummary({ other: 1 })).toBe('{"other":1}');
  });

  it("a log with no line its coder reads is shown as it is", () => {
    expect(transcriptOfLog(adapters.claude!, "")).toBe("");
    expect(transcriptOfLog(adapters.gemini!, "   ")).toBe("   ");
  });
});

describe("Codex's plan updates", () => {
  it("a todo_list item (started, updated, completed) is read as a call of todo_list with its items", () => {
    const item = { id: "item_0", type: "todo_list", items: [{ text: "Read", completed: true }] };
    for (const type of ["item.started", "item.updated", "item.completed"])
      expect(adapters.codex!.parseLine(JSON.stringify({ type, item }))).toEqual([
        { type: "tool_use", name: "todo_list", id: "item_0", input: { items: item.items } },
      ]);
  });
});
