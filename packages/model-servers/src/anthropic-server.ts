import { randomUUID } from "node:crypto";
import type { ScriptServer, ScriptTurn } from "./script.ts";
import { estimateTokens, sendJson } from "./script.ts";
import { type ScriptApi, type ScriptOptions, startScriptServer, type TurnReply } from "./script-server.ts";

export type { RecordedRequest, ScriptServer, ScriptTurn, ScriptUsage } from "./script.ts";

export type AnthropicScriptOptions = ScriptOptions;

/**
 * A scripted Anthropic Messages API on loopback for the real Claude Code CLI
 * (point it there with ANTHROPIC_BASE_URL).
 *
 * Every `POST /v1/messages` that carries the agent's tools is a "main" request and plays the next
 * script turn. Claude Code also sends side requests that must not eat the script: the token counter
 * (`/v1/messages/count_tokens`) and tool-less calls (session titles, quota probes, summaries) on the
 * small model; those get a short generic answer.
 */
export function startAnthropicScriptServer(opts: AnthropicScriptOptions): Promise<ScriptServer> {
  return startScriptServer(opts, anthropicApi());
}

function anthropicApi(): ScriptApi {
  let msgSeq = 0;
  let toolSeq = 0;
  // Ids unique across servers: consumers may key usage by message id.
  const runId = randomUUID().slice(0, 8);
  return {
    turnRequest: (method, path, body) =>
      method === "POST" && path === "/v1/messages"
        ? {
            model: typeof body?.model === "string" ? body.model : "claude-scripted",
            stream: body?.stream === true,
          }
        : undefined,
    sideText,
    answer(req, res, path, body) {
      if (req.method === "POST" && path === "/v1/messages/count_tokens") {
        sendJson(res, 200, { input_tokens: estimateTokens(body?.messages) });
        return true;
      }
      // Claude Code probes the base URL with `HEAD /` before its first request.
      if ((req.method === "HEAD" || req.method === "GET") && path === "/") {
        res.writeHead(200, { "content-type": "text/plain" });
        res.end(req.method === "GET" ? "scripted anthropic server" : undefined);
        return true;
      }
      if (req.method === "GET" && path === "/v1/models") {
        sendJson(res, 200, { data: [], has_more: false, first_id: null, last_id: null });
        return true;
      }
      return false;
    },
    errorBody: apiError,
    notFoundType: "not_found_error",
    serverErrorType: "api_error",
    turnError: (error) =>
      apiError(
        error.type ??
          (error.status === 429
            ? "rate_limit_error"
            : error.status === 529
              ? "overloaded_error"
              : "api_error"),
        `scripted ${error.status}`,
      ),
    reply(turn, model) {
      const id = `msg_scripted_${runId}_${++msgSeq}`;
      const content: Array<Record<string, unknown>> = [];
      if (turn.text) content.push({ type: "text", text: turn.text });
      for (const t of turn.toolUses ?? [])
        content.push({
          type: "tool_use",
          id: `toolu_scripted_${runId}_${++toolSeq}`,
          name: t.name,
          input: t.input ?? {},
        });
      return messageReply(turn, { id, model, content, requestId: `req_scripted_${msgSeq}` });
    },
  };
}

/** A Messages API answer: the message, and its stream of events (text and tool input in 40-character deltas). */
function messageReply(
  turn: ScriptTurn,
  m: { id: string; model: string; content: Array<Record<string, unknown>>; requestId: string },
): TurnReply {
  const usage = {
    input_tokens: turn.usage?.input_tokens ?? 0,
    output_tokens: turn.usage?.output_tokens ?? 0,
    cache_read_input_tokens: turn.usage?.cache_read_input_tokens ?? 0,
    cache_creation_input_tokens: turn.usage?.cache_creation_input_tokens ?? 0,
  };
  const stopReason = turn.toolUses?.length ? "tool_use" : "end_turn";
  const head = { id: m.id, type: "message", role: "assistant", model: m.model };
  const events: TurnReply["events"] = [];
  const event = (type: string, data: Record<string, unknown>) => events.push([type, { type, ...data }]);
  // The real API reports output_tokens 1 here and the final count in message_delta.
  const startUsage = { ...usage, output_tokens: Math.min(1, usage.output_tokens) };
  event("message_start", {
    message: { ...head, content: [], stop_reason: null, stop_sequence: null, usage: startUsage },
  });
  m.content.forEach((block, index) => {
    const text = block.type === "text";
    const contentBlock = text
      ? { type: "text", text: "" }
      : { type: "tool_use", id: block.id, name: block.name, input: {} };
    event("content_block_start", { index, content_block: contentBlock });
    for (const piece of chunk(text ? String(block.text) : JSON.stringify(block.input), 40)) {
      const delta = text
        ? { type: "text_delta", text: piece }
        : { type: "input_json_delta", partial_json: piece };
      event("content_block_delta", { index, delta });
    }
    event("content_block_stop", { index });
  });
  event("message_delta", { delta: { stop_reason: stopReason, stop_sequence: null }, usage });
  event("message_stop", {});
  return {
    message: { ...head, content: m.content, stop_reason: stopReason, stop_sequence: null, usage },
    events,
    streamHeaders: { "request-id": m.requestId },
  };
}

// biome-ignore lint/suspicious/noExplicitAny: arbitrary JSON request body
function sideText(body: any): string {
  // The session-title request asks for structured output {"title": string}; answer in that shape.
  const schema = body?.output_config?.format?.schema;
  if (schema?.properties && typeof schema.properties === "object") {
    const out: Record<string, unknown> = {};
    for (const [key, prop] of Object.entries(schema.properties as Record<string, { type?: string }>)) {
      out[key] = prop?.type === "string" ? "Scripted session" : prop?.type === "boolean" ? false : null;
    }
    return JSON.stringify(out);
  }
  return "OK";
}

function apiError(type: string, message: string) {
  return { type: "error", error: { type, message } };
}

function chunk(s: string, size: number): string[] {
  if (s.length === 0) return [""];
  const out: string[] = [];
  for (let i = 0; i < s.length; i += size) out.push(s.slice(i, i + size));
  return out;
}
