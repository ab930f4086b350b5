import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import {
  hold,
  type RecordedRequest,
  readBody,
  type ScriptServer,
  type ScriptTurn,
  sendJson,
  sse,
} from "./script.ts";

export type { RecordedRequest, ScriptServer, ScriptTurn, ScriptUsage } from "./script.ts";

export interface OpenAIScriptOptions {
  /**
   * Script turns. Usage figures are read the OpenAI way: `input_tokens` INCLUDES the cached part,
   * `cache_read_input_tokens` becomes `input_tokens_details.cached_tokens`, `reasoning_tokens` becomes
   * `output_tokens_details.reasoning_tokens` (already inside `output_tokens`).
   */
  turns: ScriptTurn[];
  port?: number;
  finalText?: string;
}

/**
 * A scripted OpenAI Responses API on loopback for the real Codex CLI (which ignores OPENAI_BASE_URL:
 * configure a model provider whose base_url points here, wire_api "responses").
 *
 * Each `POST /v1/responses` that offers tools plays the next script turn; tool uses become
 * `function_call` output items (e.g. `exec_command` with `{cmd, workdir}`, the tool Codex offers
 * with `-m o4-mini`). Requests without tools are side requests and get a short text answer.
 */
export async function startOpenAIScriptServer(opts: OpenAIScriptOptions): Promise<ScriptServer> {
  const requests: RecordedRequest[] = [];
  const sockets = new Set<Socket>();
  const stopping = new AbortController();
  let next = 0;
  let seq = 0;
  const runId = randomUUID().slice(0, 8);

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) sendJson(res, 500, apiError("server_error", String(err)));
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

    if (req.method === "POST" && url.pathname === "/v1/responses") {
      const model = typeof body?.model === "string" ? body.model : "scripted";
      const stream = body?.stream !== false;
      if (!(Array.isArray(body?.tools) && body.tools.length > 0)) {
        return playTurn(res, { text: "OK", usage: { input_tokens: 0, output_tokens: 0 } }, model, stream);
      }
      const turn = opts.turns[next];
      if (turn) {
        record.kind = "main";
        record.turn = next;
        next++;
        return playTurn(res, turn, model, stream);
      }
      record.kind = "final";
      return playTurn(
        res,
        { text: opts.finalText ?? "Done.", usage: { input_tokens: 10, output_tokens: 5 } },
        model,
        stream,
      );
    }
    if (req.method === "GET" && url.pathname === "/v1/models") {
      return sendJson(res, 200, { object: "list", data: [], models: [] });
    }
    sendJson(res, 404, apiError("not_found", `scripted server: no route ${req.method} ${url.pathname}`));
  }

  async function playTurn(res: ServerResponse, turn: ScriptTurn, model: string, stream: boolean) {
    if (turn.error) {
      if (turn.stallMs && !(await hold(res, turn.stallMs, stopping.signal))) return;
      const headers: Record<string, string> = {};
      if (turn.error.retryAfter !== undefined) headers["retry-after"] = String(turn.error.retryAfter);
      const type = turn.error.type ?? (turn.error.status === 429 ? "rate_limit_exceeded" : "server_error");
      const body = apiError(type, `scripted ${turn.error.status} (${type})`);
      if (turn.error.resetsAt !== undefined) Object.assign(body.error, { resets_at: turn.error.resetsAt });
      return sendJson(res, turn.error.status, body, headers);
    }
    const n = `${runId}_${++seq}`;
    const respId = `resp_scripted_${n}`;
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
        arguments: JSON.stringify(t.input ?? {}),
      });
    });
    const u = turn.usage ?? { input_tokens: 0, output_tokens: 0 };
    const usage = {
      input_tokens: u.input_tokens,
      input_tokens_details: { cached_tokens: u.cache_read_input_tokens ?? 0 },
      output_tokens: u.output_tokens,
      output_tokens_details: { reasoning_tokens: u.reasoning_tokens ?? 0 },
      total_tokens: u.input_tokens + u.output_tokens,
    };
    const created_at = Math.floor(Date.now() / 1000);
    const base = { id: respId, object: "response", created_at, model };
    const completed = { ...base, status: "completed", output, usage, error: null, incomplete_details: null };

    if (!stream) {
      if (turn.stallMs && !(await hold(res, turn.stallMs, stopping.signal))) return;
      return sendJson(res, 200, completed);
    }
    res.writeHead(200, {
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      connection: "keep-alive",
    });
    res.flushHeaders();
    if (turn.stallMs && !(await hold(res, turn.stallMs, stopping.signal))) return;

    let sequence_number = 0;
    const emit = (type: string, data: Record<string, unknown>) =>
      sse(res, type, { type, sequence_number: sequence_number++, ...data });
    emit("response.created", { response: { ...base, status: "in_progress", output: [], usage: null } });
    emit("response.in_progress", { response: { ...base, status: "in_progress", output: [], usage: null } });
    output.forEach((item, output_index) => {
      if (item.type === "message") {
        const text = (item.content as Array<{ text: string }>)[0]?.text ?? "";
        emit("response.output_item.added", {
          output_index,
          item: { ...item, status: "in_progress", content: [] },
        });
        const part = { type: "output_text", text: "", annotations: [] };
        emit("response.content_part.added", { item_id: item.id, output_index, content_index: 0, part });
        emit("response.output_text.delta", { item_id: item.id, output_index, content_index: 0, delta: text });
        emit("response.output_text.done", { item_id: item.id, output_index, content_index: 0, text });
        emit("response.content_part.done", {
          item_id: item.id,
          output_index,
          content_index: 0,
          part: { ...part, text },
        });
      } else {
        emit("response.output_item.added", {
          output_index,
          item: { ...item, status: "in_progress", arguments: "" },
        });
        emit("response.function_call_arguments.delta", {
          item_id: item.id,
          output_index,
          delta: item.arguments,
        });
        emit("response.function_call_arguments.done", {
          item_id: item.id,
          output_index,
          arguments: item.arguments,
        });
      }
      emit("response.output_item.done", { output_index, item });
    });
    emit("response.completed", { response: completed });
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

function apiError(type: string, message: string) {
  return { error: { type, code: type, message, param: null } };
}
