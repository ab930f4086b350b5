import { coderCommand, defineAdapter } from "./adapter.ts";
import { type Json, looksRateLimited, num, obj, str, totals } from "./json-line.ts";
import type { AgentAdapter, AgentEvent, AgentInvocation } from "./types.ts";

/**
 * Gemini CLI (`@google/gemini-cli`), headless: `gemini -p <prompt> --output-format stream-json -m <model>`.
 *
 * Not installed here; parsing follows the event types the CLI itself declares
 * (packages/core/src/output/types.ts, JsonStreamEventType: init, message, tool_use, tool_result,
 * error, result with `stats`) and its docs (docs/cli/headless.md). Tests use recorded lines in
 * that format. `stats.input_tokens` includes `stats.cached`; `stats.input` is the uncached part.
 */
export const geminiAdapter: AgentAdapter = defineAdapter("gemini", {
  command(inv: AgentInvocation) {
    const args = ["-p", inv.prompt, "--output-format", "stream-json", "-m", inv.model];
    args.push("--approval-mode", inv.phase === "plan" ? "plan" : "yolo");
    if (inv.resumeSessionId) args.push("--resume", inv.resumeSessionId);
    return coderCommand("gemini", inv, args, { GEMINI_CLI_NO_RELAUNCH: "true" });
  },
  parse: parseGemini,
});

function parseGemini(o: Json): AgentEvent[] | null {
  switch (o.type) {
    case "init":
      return [{ type: "init", sessionId: str(o.session_id), model: str(o.model) }];
    case "message":
      // The user's own prompt is echoed back as a message; only the assistant's text is news.
      return o.role === "assistant" ? [{ type: "text", text: str(o.content) ?? "" }] : [];
    case "tool_use":
      return [{ type: "tool_use", name: str(o.tool_name) ?? "", input: o.parameters, id: str(o.tool_id) }];
    case "tool_result":
      return [
        {
          type: "tool_result",
          id: str(o.tool_id),
          isError: o.status === "error",
          output: str(o.output) ?? str(obj(o.error).message) ?? "",
        },
      ];
    case "error": {
      const message = str(o.message) ?? "gemini: error";
      return [looksRateLimited(message) ? { type: "rate_limit", message } : { type: "error", message }];
    }
    case "result": {
      const s = obj(o.stats);
      const cached = num(s.cached);
      const usage = {
        input: s.input !== undefined ? num(s.input) : Math.max(0, num(s.input_tokens) - cached),
        output: num(s.output_tokens),
        cacheRead: cached,
      };
      const ok = o.status !== "error";
      const events: AgentEvent[] = [];
      if (!ok) {
        const message = str(obj(o.error).message) ?? "gemini: run failed";
        events.push(looksRateLimited(message) ? { type: "rate_limit", message } : { type: "error", message });
      }
      events.push({
        type: "result",
        ok,
        totals: totals(usage, { durationMs: num(s.duration_ms) }),
        sessionId: str(o.session_id),
      });
      return events;
    }
    default:
      return null;
  }
}
