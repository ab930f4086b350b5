import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import {
  estimateTokens,
  hold,
  type RecordedRequest,
  readBody,
  type ScriptServer,
  type ScriptTurn,
  type ScriptUsage,
  sendJson,
  sse,
} from "./script.ts";

export type { RecordedRequest, ScriptServer, ScriptTurn, ScriptUsage } from "./script.ts";

export interface AnthropicScriptOptions {
  turns: ScriptTurn[];
  port?: number;
  /** Text of the turn played once the script is exhausted. */
  finalText?: string;
}

const FINAL_USAGE: ScriptUsage = { input_tokens: 10, output_tokens: 5 };

/**
 * A scripted Anthropic Messages API on loopback for the real Claude Code CLI
 * (point it there with ANTHROPIC_BASE_URL).
 *
 * Every `POST /v1/messages` that carries the agent's tools is a "main" request and plays the next
 * script turn. Claude Code also sends side requests that must not eat the script: the token counter
 * (`/v1/messages/count_tokens`) and tool-less calls (session titles, quota probes, summaries) on the
 * small model; those get a short generic answer.
 */
export async function startAnthropicScriptServer(opts: AnthropicScriptOptions): Promise<ScriptServer> {
  const requests: RecordedRequest[] = [];
  const sockets = new Set<Socket>();
  const stopping = new AbortController();
  let next = 0;
  let msgSeq = 0;
  let toolSeq = 0;
  // Ids unique across servers: consumers may key usage by message id.
  const runId = randomUUID().slice(0, 8);

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) sendJson(res, 500, apiError("api_error", String(err)));
      else res.destroy();
    });
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url ?? "/", "http://localhost");
    // biome-ignore lint/suspicious/noExplicitAny: arbitrary JSON request body
    const body = (await readBody(req)) as any;
    const record: RecordedRequest = {
      method: req.method ?? "GET",
      path: url.pathname,
      headers: req.headers,
      body,
      kind: "side",
    };
    requests.push(record);

    if (req.method === "POST" && url.pathname === "/v1/messages/count_tokens") {
      return sendJson(res, 200, { input_tokens: estimateTokens(body?.messages) });
    }
    if (req.method === "POST" && url.pathname === "/v1/messages") {
      const stream = body?.stream === true;
      const model = typeof body?.model === "string" ? body.model : "claude-scripted";
      if (!isMainRequest(body)) {
        // Zero usage: the CLI adds side requests into modelUsage, and tests compare totals with the script.
        return playTurn(
          res,
          { text: sideText(body), usage: { input_tokens: 0, output_tokens: 0 } },
          model,
          stream,
        );
      }
      const turn = opts.turns[next];
      if (turn) {
        record.kind = "main";
        record.turn = next;
        next++;
        return playTurn(res, turn, model, stream);
      }
      record.kind = "final";
      return playTurn(res, { text: opts.finalText ?? "Done.", usage: FINAL_USAGE }, model, stream);
    }
    // Claude Code probes the base URL with `HEAD /` before its first request.
    if ((req.method === "HEAD" || req.method === "GET") && url.pathname === "/") {
      res.writeHead(200, { "content-type": "text/plain" });
      return res.end(req.method === "GET" ? "scripted anthropic server" : undefined);
    }
    if (req.method === "GET" && url.pathname === "/v1/models") {
      return sendJson(res, 200, { data: [], has_more: false, first_id: null, last_id: null });
    }
    sendJson(
      res,
      404,
      apiError("not_found_error", `scripted server: no route ${req.method} ${url.pathname}`),
    );
  }

  async function playTurn(res: ServerResponse, turn: ScriptTurn, model: string, stream: boolean) {
    if (turn.error) {
      const headers: Record<string, string> = {};
      if (turn.error.retryAfter !== undefined) headers["retry-after"] = String(turn.error.retryAfter);
      const type =
        turn.error.type ??
        (turn.error.status === 429
          ? "rate_limit_error"
          : turn.error.status === 529
            ? "overloaded_error"
            : "api_error");
      if (turn.stallMs && !(await hold(res, turn.stallMs, stopping.signal))) return;
      return sendJson(res, turn.error.status, apiError(type, `scripted ${turn.error.status}`), headers);
    }
    const id = `msg_scripted_${runId}_${++msgSeq}`;
    const usage = {
      input_tokens: turn.usage?.input_tokens ?? 0,
      output_tokens: turn.usage?.output_tokens ?? 0,
      cache_read_input_tokens: turn.usage?.cache_read_input_tokens ?? 0,
      cache_creation_input_tokens: turn.usage?.cache_creation_input_tokens ?? 0,
    };
    const content: Array<Record<string, unknown>> = [];
    if (turn.text) content.push({ type: "text", text: turn.text });
    for (const t of turn.toolUses ?? []) {
      content.push({
        type: "tool_use",
        id: `toolu_scripted_${runId}_${++toolSeq}`,
        name: t.name,
        input: t.input ?? {},
      });
    }
    const stopReason = turn.toolUses?.length ? "tool_use" : "end_turn";

    if (!stream) {
      if (turn.stallMs && !(await hold(res, turn.stallMs, stopping.signal))) return;
      return sendJson(res, 200, {
        id,
        type: "message",
        role: "assistant",
        model,
        content,
        stop_reason: stopReason,
        stop_sequence: null,
        usage,
      });
    }

    res.writeHead(200, {
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      connection: "keep-alive",
      "request-id": `req_scripted_${msgSeq}`,
    });
    res.flushHeaders();
    if (turn.stallMs && !(await hold(res, turn.stallMs, stopping.signal))) return;

    sse(res, "message_start", {
      type: "message_start",
      message: {
        id,
        type: "message",
        role: "assistant",
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        // The real API reports output_tokens 1 here and the final count in message_delta.
        usage: { ...usage, output_tokens: Math.min(1, usage.output_tokens) },
      },
    });
    content.forEach((block, index) => {
      if (block.type === "text") {
        sse(res, "content_block_start", {
          type: "content_block_start",
          index,
          content_block: { type: "text", text: "" },
        });
        for (const piece of chunk(String(block.text), 40)) {
          sse(res, "content_block_delta", {
            type: "content_block_delta",
            index,
            delta: { type: "text_delta", text: piece },
          });
        }
      } else {
        sse(res, "content_block_start", {
          type: "content_block_start",
          index,
          content_block: { type: "tool_use", id: block.id, name: block.name, input: {} },
        });
        for (const piece of chunk(JSON.stringify(block.input), 40)) {
          sse(res, "content_block_delta", {
            type: "content_block_delta",
            index,
            delta: { type: "input_json_delta", partial_json: piece },
          });
        }
      }
      sse(res, "content_block_stop", { type: "content_block_stop", index });
    });
    sse(res, "message_delta", {
      type: "message_delta",
      delta: { stop_reason: stopReason, stop_sequence: null },
      usage,
    });
    sse(res, "message_stop", { type: "message_stop" });
    res.end();
  }

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port ?? 0, "127.0.0.1", () => resolve());
  });
  const port = (server.address() as AddressInfo).port;

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    get played() {
      return next;
    },
    stop: async () => {
      stopping.abort();
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Claude Code sends its tool list only on the agent's own turns; titles, probes and summaries go without. */
// biome-ignore lint/suspicious/noExplicitAny: arbitrary JSON request body
function isMainRequest(body: any): boolean {
  return Array.isArray(body?.tools) && body.tools.length > 0;
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
