import { randomUUID } from "node:crypto";
import type { ScriptServer, ScriptTurn } from "./script.ts";
import { sendJson } from "./script.ts";
import { type ScriptApi, type ScriptOptions, startScriptServer, type TurnReply } from "./script-server.ts";

export type { RecordedRequest, ScriptServer, ScriptTurn, ScriptUsage } from "./script.ts";

export interface OpenAIScriptOptions extends ScriptOptions {
  /**
   * Script turns. Usage figures are read the OpenAI way: `input_tokens` INCLUDES the cached part,
   * `cache_read_input_tokens` becomes `input_tokens_details.cached_tokens`, `reasoning_tokens` becomes
   * `output_tokens_details.reasoning_tokens` (already inside `output_tokens`).
   */
  turns: ScriptTurn[];
}

/**
 * A scripted OpenAI Responses API on loopback for the real Codex CLI (which ignores OPENAI_BASE_URL:
 * configure a model provider whose base_url points here, wire_api "responses").
 *
 * Each `POST /v1/responses` that offers tools plays the next script turn; tool uses become
 * `function_call` output items (e.g. `exec_command` with `{cmd, workdir}`, the tool Codex offers
 * with `-m o4-mini`). Requests without tools are side requests and get a short text answer.
 */
export function startOpenAIScriptServer(opts: OpenAIScriptOptions): Promise<ScriptServer> {
  return startScriptServer(opts, openAIApi());
}

function openAIApi(): ScriptApi {
  let seq = 0;
  const runId = randomUUID().slice(0, 8);
  return {
    turnRequest: (method, path, body) =>
      method === "POST" && path === "/v1/responses"
        ? { model: typeof body?.model === "string" ? body.model : "scripted", stream: body?.stream !== false }
        : undefined,
    sideText: () => "OK",
    answer(req, res, path) {
      if (req.method !== "GET" || path !== "/v1/models") return false;
      sendJson(res, 200, { object: "list", data: [], models: [] });
      return true;
    },
    errorBody: apiError,
    notFoundType: "not_found",
    serverErrorType: "server_error",
    turnError(error) {
      const type = error.type ?? (error.status === 429 ? "rate_limit_exceeded" : "server_error");
      const body = apiError(type, `scripted ${error.status} (${type})`);
      if (error.resetsAt !== undefined) Object.assign(body.error, { resets_at: error.resetsAt });
      return body;
    },
    reply: (turn, model) => responseReply(turn, model, `${runId}_${++seq}`),
  };
}

/** The output items of a turn: its text as a message, and one `function_call` a tool use. */
function outputItems(turn: ScriptTurn, n: string): Array<Record<string, unknown>> {
  const output: Array<Record<string, unknown>> = [];
  if (turn.text) {
    output.push({
      id: `msg_scripted_${n}`,
      type: "message",
      status: "completed",
      role: "assistant",
      content: [{ type: "output_text", text: turn.text, annotations: [] }],
    });
  }
  (turn.toolUses ?? []).forEach((t, i) => {
    output.push({
      id: `fc_scripted_${n}_${i}`,
      type: "function_call",
      status: "completed",
      call_id: `call_scripted_${n}_${i}`,
      name: t.name,
      ...(t.namespace ? { namespace: t.namespace } : {}),
      arguments: JSON.stringify(t.input ?? {}),
    });
  });
  return output;
}

/** A Responses API answer: the completed response, and its stream of events (numbered). */
function responseReply(turn: ScriptTurn, model: string, n: string): TurnReply {
  const output = outputItems(turn, n);
  const u = turn.usage ?? { input_tokens: 0, output_tokens: 0 };
  const usage = {
    input_tokens: u.input_tokens,
    input_tokens_details: { cached_tokens: u.cache_read_input_tokens ?? 0 },
    output_tokens: u.output_tokens,
    output_tokens_details: { reasoning_tokens: u.reasoning_tokens ?? 0 },
    total_tokens: u.input_tokens + u.output_tokens,
  };
  const base = {
    id: `resp_scripted_${n}`,
    object: "response",
    created_at: Math.floor(Date.now() / 1000),
    model,
  };
  const completed = { ...base, status: "completed", output, usage, error: null, incomplete_details: null };
  const events: TurnReply["events"] = [];
  const emit = (type: string, data: Record<string, unknown>) =>
    events.push([type, { type, sequence_number: events.length, ...data }]);
  emit("response.created", { response: { ...base, status: "in_progress", output: [], usage: null } });
  emit("response.in_progress", { response: { ...base, status: "in_progress", output: [], usage: null } });
  output.forEach((item, output_index) => {
    const at = { item_id: item.id, output_index };
    if (item.type === "message") {
      const text = (item.content as Array<{ text: string }>)[0]?.text ?? "";
      emit("response.output_item.added", {
        output_index,
        item: { ...item, status: "in_progress", content: [] },
      });
      const part = { type: "output_text", text: "", annotations: [] };
      emit("response.content_part.added", { ...at, content_index: 0, part });
      emit("response.output_text.delta", { ...at, content_index: 0, delta: text });
      emit("response.output_text.done", { ...at, content_index: 0, text });
      emit("response.content_part.done", { ...at, content_index: 0, part: { ...part, text } });
    } else {
      emit("response.output_item.added", {
        output_index,
        item: { ...item, status: "in_progress", arguments: "" },
      });
      emit("response.function_call_arguments.delta", { ...at, delta: item.arguments });
      emit("response.function_call_arguments.done", { ...at, arguments: item.arguments });
    }
    emit("response.output_item.done", { output_index, item });
  });
  emit("response.completed", { response: completed });
  return { message: completed, events };
}

function apiError(type: string, message: string) {
  return { error: { type, code: type, message, param: null } };
}
