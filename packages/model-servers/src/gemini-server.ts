import { randomUUID } from "node:crypto";
import type { ScriptServer, ScriptTurn } from "./script.ts";
import { estimateTokens, sendJson } from "./script.ts";
import { type ScriptApi, type ScriptOptions, startScriptServer, type TurnReply } from "./script-server.ts";

export type { RecordedRequest, ScriptServer, ScriptTurn, ScriptUsage } from "./script.ts";

export interface GeminiScriptOptions extends ScriptOptions {
  /**
   * Script turns. Usage figures are read the OpenAI way and given in Gemini's terms: `input_tokens`
   * INCLUDES the cached part (`promptTokenCount`), `cache_read_input_tokens` is `cachedContentTokenCount`,
   * `reasoning_tokens` (inside `output_tokens`) is `thoughtsTokenCount` and the rest `candidatesTokenCount`.
   */
  turns: ScriptTurn[];
}

/** `/v1beta/models/<model>:<method>` (the Gemini API's model methods; v1 too). */
const MODEL_METHOD =
  /^\/v1(?:beta|alpha)?\/models\/([^/:]+):(generateContent|streamGenerateContent|countTokens)$/;

/**
 * A scripted Gemini API (generativelanguage.googleapis.com) on loopback for the real Gemini CLI (point
 * it there with GOOGLE_GEMINI_BASE_URL).
 *
 * Each `generateContent` / `streamGenerateContent` request that declares tools plays the next script
 * turn; tool uses become `functionCall` parts. Shapes from the API reference (https://ai.google.dev/api,
 * "streamGenerateContent uses Server-Sent Events"; https://ai.google.dev/api/generate-content for
 * GenerateContentResponse and UsageMetadata: promptTokenCount includes cachedContentTokenCount,
 * thoughtsTokenCount is apart from candidatesTokenCount). A stream is server-sent `data:` lines only
 * (unnamed events: what the CLI's SDK reads), the last chunk carrying `finishReason` and
 * `usageMetadata`. Requests without tools are side requests (the CLI's JSON checks such as "who speaks
 * next"): they get an answer in the shape of their `responseJsonSchema`, or a short text, with zero
 * usage.
 */
export function startGeminiScriptServer(opts: GeminiScriptOptions): Promise<ScriptServer> {
  return startScriptServer(opts, geminiApi());
}

function geminiApi(): ScriptApi {
  let seq = 0;
  const runId = randomUUID().slice(0, 8);
  return {
    turnRequest(method, path) {
      const m = method === "POST" ? MODEL_METHOD.exec(path) : null;
      if (!m || m[2] === "countTokens") return undefined;
      return { model: m[1]!, stream: m[2] === "streamGenerateContent" };
    },
    sideText,
    answer(req, res, path, body) {
      const m = MODEL_METHOD.exec(path);
      if (req.method === "POST" && m?.[2] === "countTokens") {
        sendJson(res, 200, { totalTokens: estimateTokens(body?.contents ?? body) });
        return true;
      }
      if (req.method === "GET" && /^\/v1(beta)?\/models$/.test(path)) {
        sendJson(res, 200, { models: [] });
        return true;
      }
      return false;
    },
    errorBody: (status, message) => apiError(status, message),
    notFoundType: "NOT_FOUND",
    serverErrorType: "INTERNAL",
    turnError: (error) =>
      apiError(
        error.type ?? (error.status === 429 ? "RESOURCE_EXHAUSTED" : "INTERNAL"),
        `scripted ${error.status}`,
        error.status,
      ),
    reply: (turn, model) => generateReply(turn, model, `${runId}_${++seq}`),
  };
}

/** A GenerateContentResponse for a turn, and its stream: the text, each function call, then the finish. */
function generateReply(turn: ScriptTurn, model: string, n: string): TurnReply {
  const u = turn.usage ?? { input_tokens: 0, output_tokens: 0 };
  const thoughts = u.reasoning_tokens ?? 0;
  const candidates = Math.max(0, u.output_tokens - thoughts);
  const usageMetadata: Record<string, number> = {
    promptTokenCount: u.input_tokens,
    candidatesTokenCount: candidates,
    totalTokenCount: u.input_tokens + candidates + thoughts,
  };
  if (u.cache_read_input_tokens) usageMetadata.cachedContentTokenCount = u.cache_read_input_tokens;
  if (thoughts) usageMetadata.thoughtsTokenCount = thoughts;
  const parts: Array<Record<string, unknown>> = [];
  if (turn.text) parts.push({ text: turn.text });
  for (const t of turn.toolUses ?? []) parts.push({ functionCall: { name: t.name, args: t.input ?? {} } });
  const head = { modelVersion: model, responseId: `resp_scripted_${n}` };
  const candidate = (p: unknown[], finish?: string) => ({
    content: { role: "model", parts: p },
    index: 0,
    ...(finish ? { finishReason: finish } : {}),
  });
  const message = { candidates: [candidate(parts, "STOP")], usageMetadata, ...head };
  const chunks = parts.length > 0 ? parts : [{ text: "" }];
  const events: TurnReply["events"] = chunks.map((part, i) => [
    "",
    i === chunks.length - 1
      ? { candidates: [candidate([part], "STOP")], usageMetadata, ...head }
      : { candidates: [candidate([part])], ...head },
  ]);
  return { message, events };
}

// biome-ignore lint/suspicious/noExplicitAny: arbitrary JSON request body
function sideText(body: any): string {
  const config = body?.generationConfig ?? body?.config ?? {};
  const schema = config.responseJsonSchema ?? config.responseSchema;
  return schema ? JSON.stringify(fromSchema(schema)) : "OK";
}

/**
 * A value of a JSON schema's shape. An enum answers "user" when it offers it (the CLI's "who speaks
 * next" check: the user, so the turn ends), else its first value.
 */
// biome-ignore lint/suspicious/noExplicitAny: a JSON schema
function fromSchema(schema: any): unknown {
  const type = String(schema?.type ?? "").toLowerCase();
  if (Array.isArray(schema?.enum) && schema.enum.length > 0)
    return schema.enum.includes("user") ? "user" : schema.enum[0];
  if (type === "object" || schema?.properties) {
    const out: Record<string, unknown> = {};
    for (const [key, prop] of Object.entries(schema.properties ?? {})) out[key] = fromSchema(prop);
    return out;
  }
  if (type === "array") return [];
  if (type === "boolean") return false;
  if (type === "number" || type === "integer") return 0;
  return "Scripted answer.";
}

/** Google's error body: `{error: {code, message, status}}`. */
function apiError(status: string, message: string, code = status === "NOT_FOUND" ? 404 : 500) {
  return { error: { code, message, status } };
}
