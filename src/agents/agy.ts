import { coderCommand, defineAdapter } from "./adapter.ts";
import { arr, type Json, num, obj, str, totals } from "./json-line.ts";
import type { AgentAdapter, AgentEvent, AgentInvocation } from "./types.ts";

/**
 * Google Antigravity CLI (`agy`), headless: `agy -p <prompt> --output-format stream-json`.
 *
 * EXPERIMENTAL: agy is not on npm (it installs from Google's own site), so no run of it has been
 * recorded here. The format is agy 1.2.17's as captured by others, verbatim, in
 * test/agents/fixtures/agy-1.2.17/ (SOURCES.txt there says where from):
 * - `{"event":"init","conversation_id","init":{model, cwd, tools, permission_mode}}`;
 * - `{"event":"step_update","step_update":{conversation_id, step_index, state ACTIVE|DONE|ERROR,
 *   step_type user_input|agent_response|tool|error_message|..., text_delta?, tool_name?,
 *   tool_info {name, parameters, output?, error?}, usage?}}`: an agent_response step carries the
 *   text and that model call's usage; a tool step is seen ACTIVE (the call) then DONE or ERROR;
 * - one terminal `{"event":"result","result":{conversation_id, status SUCCESS|ERROR, response,
 *   error?, duration_seconds, num_turns, usage, denied_actions?}}`, whose usage is the run's total.
 * usage: input_tokens excludes cache_read_tokens; thinking_tokens is inside output_tokens.
 * Failures: an ERROR result (exit 1 before the turn, exit 3 when the quota runs out mid-turn, with
 * "Resets in 34m13s"), and a SUCCESS result with an empty response and `denied_actions` (a tool the
 * headless run could not approve): both end the run failed.
 *
 * Flags: `--dangerously-skip-permissions` in the work phase (Fleet's sandbox is the boundary),
 * `--mode plan` in the plan phase, and `--print-timeout` raised past its 5-minute default (Fleet's
 * own run timeout governs). agy takes no base URL, so it holds its credential itself. It has no
 * documented way to resume a conversation headless: a run that would resume starts afresh.
 */
export const agyAdapter: AgentAdapter = defineAdapter("agy", {
  command(inv: AgentInvocation) {
    const args = ["-p", inv.prompt, "--output-format", "stream-json", "--model", inv.model];
    args.push("--print-timeout", "24h");
    if (inv.phase === "work") args.push("--dangerously-skip-permissions");
    else args.push("--mode", "plan");
    return coderCommand("agy", inv, args);
  },
  parse: parseAgy,
});

function parseAgy(o: Json): AgentEvent[] | null {
  switch (o.event) {
    case "init": {
      const init = obj(o.init);
      return [
        {
          type: "init",
          sessionId: str(o.conversation_id),
          model: str(init.model),
          tools: arr(init.tools).filter((t): t is string => typeof t === "string"),
        },
      ];
    }
    case "step_update":
      return parseStep(obj(o.step_update));
    case "result":
      return parseResult(obj(o.result));
    default:
      return null;
  }
}

/** agy's usage object in Fleet's terms: thinking is inside output already. */
function agyUsage(u: Json) {
  return {
    input: num(u.input_tokens),
    output: num(u.output_tokens),
    cacheRead: num(u.cache_read_tokens),
    reasoning: num(u.thinking_tokens),
  };
}

function parseStep(step: Json): AgentEvent[] | null {
  const index = typeof step.step_index === "number" ? String(step.step_index) : undefined;
  const id = index && str(step.conversation_id) ? `${step.conversation_id}:${index}` : index;
  switch (step.step_type) {
    case "user_input":
      return [];
    case "agent_response": {
      const events: AgentEvent[] = [];
      const text = str(step.text_delta);
      if (text) events.push({ type: "text", text });
      if (step.usage !== undefined) events.push({ type: "usage", id, usage: agyUsage(obj(step.usage)) });
      if (step.state === "ERROR") events.push({ type: "error", message: stepError(step) });
      return events;
    }
    case "tool":
      return toolStep(step, id);
    case "error_message":
      // The message itself comes with the result that follows.
      return [{ type: "error", message: stepError(step) }];
    default:
      return null;
  }
}

function stepError(step: Json): string {
  const e = step.error;
  return str(obj(e).message) ?? str(e) ?? `agy: step ${String(step.step_index ?? "?")} ended in error`;
}

function toolStep(step: Json, id: string | undefined): AgentEvent[] {
  const info = obj(step.tool_info);
  const name = str(info.name) ?? str(step.tool_name) ?? "";
  if (step.state === "ACTIVE") return [{ type: "tool_use", name, input: info.parameters, id }];
  const isError = step.state === "ERROR" || info.error !== undefined;
  const output = isError ? (str(obj(info.error).message) ?? str(info.error) ?? "") : (str(info.output) ?? "");
  return [{ type: "tool_result", id, isError, output }];
}

/** "... Resets in 34m13s." -> seconds. */
function resetSeconds(message: string): number | undefined {
  const m = /resets in\s+(?:(\d+)h)?\s*(?:(\d+)m)?\s*(?:(\d+)s)?/i.exec(message);
  if (!m || (!m[1] && !m[2] && !m[3])) return undefined;
  return Number(m[1] ?? 0) * 3600 + Number(m[2] ?? 0) * 60 + Number(m[3] ?? 0);
}

const QUOTA = /quota reached|exhausted your quota|credits balance is too low|resource.?exhausted|\b429\b/i;

function parseResult(r: Json): AgentEvent[] {
  const response = str(r.response) ?? "";
  const denied = arr(r.denied_actions).map((d) => str(obj(d).display_name) ?? str(obj(d).action) ?? "?");
  let message: string | undefined;
  if (r.status !== "SUCCESS") message = str(r.error) || `agy: run ended with status ${String(r.status)}`;
  else if (!response.trim() && denied.length > 0)
    message = `agy refused ${denied.join(", ")} (a headless run cannot ask for approval) and gave no answer`;
  const events: AgentEvent[] = [];
  if (message) {
    const retryAfterSeconds = resetSeconds(message);
    events.push(
      QUOTA.test(message)
        ? { type: "rate_limit", message, ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}) }
        : { type: "error", message },
    );
  }
  events.push({
    type: "result",
    ok: message === undefined,
    sessionId: str(r.conversation_id) || undefined,
    summary: message ?? response,
    totals: totals(agyUsage(obj(r.usage)), {
      turns: num(r.num_turns),
      durationMs: Math.round(num(r.duration_seconds) * 1000),
    }),
  });
  return events;
}
