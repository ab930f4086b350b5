import type { TokenUsage } from "../core/usage.ts";

// What a model response says about itself, read from the bytes as they pass the model gateway: its
// usage, its model and the tool calls it asks for. One reader per response; the agent's own account
// of its usage is not involved.

/** The model APIs the gateway reads: Anthropic Messages, OpenAI Responses, Gemini generateContent. */
export type WireProvider = "anthropic" | "openai" | "gemini";

/** A tool call a response asks for, as its name and its input (JSON text, keys as the model wrote them). */
export interface WireToolCall {
  name: string;
  input: string;
}

/** One model response as the wire showed it. */
export interface WireTurn {
  provider: WireProvider;
  model?: string;
  usage: TokenUsage;
  /** The response carried usage figures (a cut-off stream may not). */
  metered: boolean;
  toolCalls: WireToolCall[];
}

/** Which API a request is, by its method and path; undefined for requests that generate nothing (token counts, model lists). */
export function wireProviderOf(method: string, path: string): WireProvider | undefined {
  if (method !== "POST") return undefined;
  if (/\/v1\/messages$/.test(path)) return "anthropic";
  if (/\/v1\/responses$/.test(path)) return "openai";
  if (/:(stream)?[gG]enerateContent$/.test(path)) return "gemini";
  return undefined;
}

// biome-ignore lint/suspicious/noExplicitAny: provider JSON, read field by field with num/str
type Json = any;
const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) && v > 0 ? v : 0);

/**
 * A reader of one response: `push` its bytes as they pass (server-sent events or one JSON body),
 * `finish` at its end for what it said. Bodies that are neither are ignored; a JSON body is kept
 * up to `maxJsonBytes` only (a model answer is far smaller).
 */
export function createWireReader(provider: WireProvider, contentType: string, maxJsonBytes = 16 << 20) {
  const stream = /text\/event-stream/i.test(contentType);
  const acc = accumulator(provider);
  let pending = "";
  const chunks: Buffer[] = [];
  let size = 0;
  const decoder = new TextDecoder();
  const takeEvents = (text: string, final: boolean) => {
    pending += text;
    const events = pending.split(/\r?\n\r?\n/);
    pending = final ? "" : (events.pop() ?? "");
    for (const event of events) {
      const data = event
        .split(/\r?\n/)
        .filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).replace(/^ /, ""))
        .join("\n");
      if (!data || data === "[DONE]") continue;
      try {
        acc.event(JSON.parse(data));
      } catch {
        // Not JSON: a keep-alive or a comment.
      }
    }
  };
  return {
    /** Whether what was read so far carries the response's final output count (its stream ended). */
    outputKnown: () => acc.outputKnown(),
    push(chunk: Buffer): void {
      if (stream) {
        takeEvents(decoder.decode(chunk, { stream: true }), false);
        return;
      }
      size += chunk.length;
      if (size <= maxJsonBytes) chunks.push(chunk);
    },
    finish(): WireTurn {
      if (stream) takeEvents(decoder.decode(), true);
      else if (size <= maxJsonBytes && size > 0) {
        try {
          acc.whole(JSON.parse(Buffer.concat(chunks).toString("utf8")));
        } catch {
          // Not JSON: nothing to read.
        }
      }
      return acc.result();
    },
  };
}

function accumulator(provider: WireProvider) {
  if (provider === "anthropic") return anthropicAccumulator();
  if (provider === "openai") return openaiAccumulator();
  return geminiAccumulator();
}

const usageOf = (u: Partial<TokenUsage>): TokenUsage => ({
  input: u.input ?? 0,
  output: u.output ?? 0,
  cacheRead: u.cacheRead ?? 0,
  cacheWrite: u.cacheWrite ?? 0,
  reasoning: u.reasoning ?? 0,
});

/** Anthropic: `message_start` carries the prompt's figures, `message_delta` the final output count. */
function anthropicAccumulator() {
  const usage: Partial<TokenUsage> = {};
  let metered = false;
  let final = false;
  let model: string | undefined;
  const calls = new Map<number, { name: string; input: string; started: string }>();
  const takeUsage = (u: Json) => {
    if (!u || typeof u !== "object") return;
    metered = true;
    if ("input_tokens" in u) usage.input = num(u.input_tokens);
    if ("cache_read_input_tokens" in u) usage.cacheRead = num(u.cache_read_input_tokens);
    if ("cache_creation_input_tokens" in u) usage.cacheWrite = num(u.cache_creation_input_tokens);
    if ("output_tokens" in u) usage.output = num(u.output_tokens);
  };
  const wholeCalls: WireToolCall[] = [];
  return {
    event(e: Json) {
      if (e?.type === "message_start") {
        model = typeof e.message?.model === "string" ? e.message.model : model;
        takeUsage(e.message?.usage);
      } else if (e?.type === "message_delta") {
        takeUsage(e.usage);
        final ||= Boolean(e.usage && typeof e.usage === "object");
      } else if (e?.type === "content_block_start" && e.content_block?.type === "tool_use") {
        const started = JSON.stringify(e.content_block.input ?? {});
        calls.set(num(e.index), { name: String(e.content_block.name ?? ""), input: "", started });
      } else if (e?.type === "content_block_delta" && e.delta?.type === "input_json_delta") {
        const call = calls.get(num(e.index));
        if (call) call.input += String(e.delta.partial_json ?? "");
      }
    },
    whole(m: Json) {
      model = typeof m?.model === "string" ? m.model : undefined;
      takeUsage(m?.usage);
      final = metered;
      for (const block of Array.isArray(m?.content) ? m.content : []) {
        if (block?.type === "tool_use")
          wholeCalls.push({ name: String(block.name ?? ""), input: JSON.stringify(block.input ?? {}) });
      }
    },
    outputKnown: () => final,
    result(): WireTurn {
      const toolCalls = [
        ...wholeCalls,
        ...[...calls.values()].map((c) => ({ name: c.name, input: normalJson(c.input || c.started) })),
      ];
      return { provider: "anthropic", model, usage: usageOf(usage), metered, toolCalls };
    },
  };
}

/** OpenAI Responses: `response.completed` carries the whole response; `input_tokens` includes the cached part. */
function openaiAccumulator() {
  let turn: WireTurn = { provider: "openai", usage: usageOf({}), metered: false, toolCalls: [] };
  const take = (r: Json) => {
    if (!r || typeof r !== "object") return;
    const u = r.usage;
    const cached = num(u?.input_tokens_details?.cached_tokens);
    turn = {
      provider: "openai",
      ...(typeof r.model === "string" ? { model: r.model } : {}),
      usage: usageOf({
        input: Math.max(0, num(u?.input_tokens) - cached),
        cacheRead: cached,
        output: num(u?.output_tokens),
        reasoning: num(u?.output_tokens_details?.reasoning_tokens),
      }),
      metered: Boolean(u && typeof u === "object"),
      toolCalls: (Array.isArray(r.output) ? r.output : []).flatMap(openaiToolCall),
    };
  };
  return {
    event(e: Json) {
      if (e?.type === "response.completed" || e?.type === "response.incomplete") take(e.response);
    },
    whole: take,
    outputKnown: () => turn.metered,
    result: () => turn,
  };
}

function openaiToolCall(item: Json): WireToolCall[] {
  if (item?.type === "function_call")
    return [{ name: String(item.name ?? ""), input: normalJson(String(item.arguments ?? "")) }];
  if (item?.type === "custom_tool_call")
    return [{ name: String(item.name ?? ""), input: String(item.input) }];
  if (item?.type === "local_shell_call") return [{ name: "local_shell", input: JSON.stringify(item.action) }];
  return [];
}

/** Gemini: every chunk of a stream carries the running `usageMetadata`; the last one counts. */
function geminiAccumulator() {
  let usage = usageOf({});
  let metered = false;
  let final = false;
  let model: string | undefined;
  const toolCalls: WireToolCall[] = [];
  const take = (c: Json) => {
    if (typeof c?.modelVersion === "string") model = c.modelVersion;
    if ((Array.isArray(c?.candidates) ? c.candidates : []).some((cand: Json) => cand?.finishReason))
      final = true;
    const u = c?.usageMetadata;
    if (u && typeof u === "object") {
      metered = true;
      const cached = num(u.cachedContentTokenCount);
      const thoughts = num(u.thoughtsTokenCount);
      usage = usageOf({
        input: Math.max(0, num(u.promptTokenCount) - cached),
        cacheRead: cached,
        output: num(u.candidatesTokenCount) + thoughts,
        reasoning: thoughts,
      });
    }
    for (const cand of Array.isArray(c?.candidates) ? c.candidates : []) {
      for (const part of Array.isArray(cand?.content?.parts) ? cand.content.parts : []) {
        if (part?.functionCall)
          toolCalls.push({
            name: String(part.functionCall.name ?? ""),
            input: JSON.stringify(part.functionCall.args ?? {}),
          });
      }
    }
  };
  return {
    event: take,
    whole: (body: Json) => {
      for (const c of Array.isArray(body) ? body : [body]) take(c);
    },
    outputKnown: () => final && metered,
    result: (): WireTurn => ({ provider: "gemini", model, usage, metered, toolCalls }),
  };
}

/**
 * What a cut-off response is charged for its output when its final count never came: the request's
 * own cap on it (Anthropic `max_tokens`, OpenAI Responses `max_output_tokens`, Gemini
 * `generationConfig.maxOutputTokens`), else this many tokens (Claude Code asks for 32,000 at most).
 */
export const DEFAULT_CUT_OUTPUT_TOKENS = 32_000;

/** The output cap a model request asks for, read from its JSON body; undefined when it names none. */
export function requestedMaxOutput(body: Buffer | string): number | undefined {
  try {
    const b: Json = JSON.parse(typeof body === "string" ? body : body.toString("utf8"));
    const cap = num(b?.max_tokens) || num(b?.max_output_tokens) || num(b?.generationConfig?.maxOutputTokens);
    return cap > 0 ? Math.floor(cap) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A response the agent or the upstream cut off before its end, as it is charged: what was read of it
 * (Anthropic's `message_start` carries the prompt's figures), its output at least the request's cap
 * when the final count never came, and, when no figure came at all, its prompt estimated from the
 * request's size (4 bytes a token). Such a turn was paid for; it is never free.
 */
export function cutTurn(
  provider: WireProvider,
  read: WireTurn | undefined,
  request: { outputKnown: boolean; maxOutput?: number; bodyBytes: number },
): WireTurn {
  const turn = read ?? { provider, usage: usageOf({}), metered: false, toolCalls: [] };
  const usage = { ...turn.usage };
  if (!turn.metered) usage.input = Math.ceil(request.bodyBytes / 4);
  if (!request.outputKnown)
    usage.output = Math.max(usage.output, request.maxOutput ?? DEFAULT_CUT_OUTPUT_TOKENS);
  return { ...turn, usage, metered: true };
}

/** JSON text in one canonical spelling (so the same input streamed in other pieces compares equal). */
function normalJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text));
  } catch {
    return text;
  }
}
