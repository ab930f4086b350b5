// The runaway guard judges progress by what the worktree holds, not by when it was written: the REAL
// Claude Code CLI, contained as Fleet runs it, rewriting a file with the same content again and again
// is stopped by runaway.repeated_tool_calls.

import type { ScriptTurn } from "@fleet/model-servers";
import { describe, expect, it } from "vitest";
import { run, useGitHub } from "./gateway-harness.ts";

useGitHub();

describe("the runaway guard with the real Claude Code CLI", () => {
  it("an agent that rewrites a file with the same content is stopped by repeated_tool_calls", async () => {
    const rewrite: ScriptTurn = {
      toolUses: [{ name: "Bash", input: { command: "echo hello > HELLO.md", description: "write" } }],
      usage: { input_tokens: 500, output_tokens: 20 },
    };
    const r = await run("claude", () => [
      ...Array.from({ length: 30 }, () => rewrite),
      { text: "Done.", usage: { input_tokens: 10, output_tokens: 5 } },
    ]);
    expect(r.outcome.outcome, r.outcome.reason).toBe("over-budget");
    expect(r.outcome.reason).toBe(
      'stopped: the agent asked for the same tool call 5 times with nothing changed in the worktree (Bash {"command":"echo hello > HELLO.md","description":"write"}); runaway.repeated_tool_calls is 5',
    );
    // The first write made HELLO.md (a change); five more wrote the same bytes; the next request was refused.
    expect(r.server.played).toBe(6);
    expect(r.comments).toContain("runaway.repeated_tool_calls is 5");
  });
});
