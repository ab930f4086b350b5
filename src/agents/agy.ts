import { coderCommand, defineAdapter } from "./adapter.ts";
import { arr, contentText, type Json, num, obj, optNum, str, totals } from "./json-line.ts";
import type { AgentAdapter, AgentEvent, AgentInvocation } from "./types.ts";

/**
 * Google Antigravity CLI (`agy`), headless: `agy -p <prompt> --output-format stream-json`.
 *
 * NOT verified against the real binary: agy is not on npm (it installs from Google's own download
 * site, which this project cannot reach). Parsing follows the documented stream format: NDJSON events
 * keyed by `event` — `init` (session id, model), `step_update` (a `step_type` discriminator with the
 * step's text or tool call/result) and a terminal `result` with `usage`. Field names are read
 * tolerantly (snake_case or camelCase); anything else is `unknown`. Tests use recorded lines in that
 * documented shape.
 */
export const agyAdapter: AgentAdapter = defineAdapter("agy", {
  command(inv: AgentInvocation) {
    const args = ["-p", inv.prompt, "--output-format", "stream-json", "--model", inv.model];
    // Plan phase: no auto-approval, so tools that write are refused in a headless run.
    if (inv.phase === "work") args.push("--yolo");
    if (inv.resumeSessionId) args.push("--resume", inv.resumeSessionId);
    return coderCommand("agy", inv, args);
  },
  parse: parseAgy,
});

const pick = (o: Json, ...keys: string[]): unknown => {
  for (const k of keys) if (o[k] !== undefined) return o[k];
  return undefined;
};

function parseAgy(o: Json): AgentEvent[] | null {
  switch (o.event) {
    case "init":
      return [
        {
          type: "init",
          sessionId: str(pick(o, "session_id", "sessionId", "conversation_id")),
          model: str(o.model),
          tools: arr(o.tools).filter((t): t is string => typeof t === "string"),
        },
      ];
    case "step_update":
      return parseStep(o);
    case "result":
      return parseResult(o);
    case "error":
      return [{ type: "error", message: str(o.message) ?? contentText(o.error) }];
    default:
      return null;
  }
}

function parseStep(o: Json): AgentEvent[] | null {
  const step = { ...o, ...obj(o.step) };
  const kind = str(pick(step, "step_type", "stepType", "type"));
  const id = str(pick(step, "tool_id", "toolId", "step_id", "stepId", "id"));
  const tool = obj(pick(step, "tool_info", "toolInfo", "tool"));
  switch (kind) {
    case "text":
    case "message":
    case "model_response":
    case "planner_response":
      return [{ type: "text", text: contentText(pick(step, "text", "content", "message")) }];
    case "thinking":
    case "reasoning":
      return [];
    case "tool_call":
    case "tool_use":
      return [
        {
          type: "tool_use",
          name: str(pick(tool, "name", "canonical_name")) ?? str(pick(step, "tool_name", "name")) ?? "",
          input: pick(tool, "input", "args", "parameters") ?? pick(step, "input", "args", "parameters"),
          id,
        },
      ];
    case "tool_result":
      return [
        {
          type: "tool_result",
          id,
          isError: step.status === "error" || step.is_error === true,
          output: contentText(pick(step, "output", "result", "content")),
        },
      ];
    default:
      return null;
  }
}

function parseResult(o: Json): AgentEvent[] {
  const u = obj(pick(o, "usage", "stats"));
  const cached = num(pick(u, "cache_read_input_tokens", "cached_input_tokens", "cached", "cacheReadTokens"));
  const usage = {
    input: num(pick(u, "input_tokens", "inputTokens", "input")),
    output: num(pick(u, "output_tokens", "outputTokens")),
    cacheRead: cached,
    cacheWrite: num(pick(u, "cache_creation_input_tokens", "cacheWriteTokens")),
    reasoning: num(pick(u, "reasoning_tokens", "thoughts_tokens", "thoughtsTokens")),
  };
  const ok = o.is_error !== true && o.status !== "error" && o.subtype !== "error";
  const summary = str(pick(o, "result", "response", "text"));
  const events: AgentEvent[] = [];
  if (!ok) events.push({ type: "error", message: contentText(o.error) || summary || "agy: run failed" });
  events.push({
    type: "result",
    ok,
    sessionId: str(pick(o, "session_id", "sessionId")),
    summary,
    totals: totals(usage, {
      costUsd: optNum(pick(o, "total_cost_usd", "cost_usd")) ?? null,
      turns: num(pick(o, "num_turns", "turns")),
      durationMs: num(pick(o, "duration_ms", "durationMs")),
      model: str(o.model) ?? "",
    }),
  });
  return events;
}
