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

/** What both scripted servers take: the script, a port (0: any free one) and the text played after it. */
export interface ScriptOptions {
  turns: ScriptTurn[];
  port?: number;
  /** Text of the turn played once the script is exhausted. */
  finalText?: string;
}

// biome-ignore lint/suspicious/noExplicitAny: request bodies are arbitrary JSON from the CLI under test
type Json = any;

/** A turn's answer in one model API's terms: the whole message, and the server-sent events of a stream. */
export interface TurnReply {
  message: unknown;
  events: Array<[event: string, data: unknown]>;
  /** Extra headers of a streamed answer. */
  streamHeaders?: Record<string, string>;
}

/**
 * What one model API adds to the scripted server: which request plays turns, how a turn and an error
 * look, and the routes that play none. Recording, the script's order, stalls and listening are shared.
 */
export interface ScriptApi {
  /** The request that plays a turn: the model it names and whether it streams; undefined for any other. */
  turnRequest(method: string, path: string, body: Json): { model: string; stream: boolean } | undefined;
  /** The answer to a side request (one without tools: titles, probes, summaries). */
  sideText(body: Json): string;
  /** Answers a request that plays no turn (token counts, probes, model lists); false when it has no such route. */
  answer(req: IncomingMessage, res: ServerResponse, path: string, body: Json): boolean;
  /** An error body of the API, for a type and message. */
  errorBody(type: string, message: string): unknown;
  notFoundType: string;
  serverErrorType: string;
  /** The body a scripted error turn answers. */
  turnError(error: NonNullable<ScriptTurn["error"]>): unknown;
  reply(turn: ScriptTurn, model: string): TurnReply;
}

const FINAL_USAGE = { input_tokens: 10, output_tokens: 5 };
const NO_USAGE = { input_tokens: 0, output_tokens: 0 };

/** An agent's own turns carry its tool list; titles, probes and summaries go without. */
const isMainRequest = (body: Json): boolean => Array.isArray(body?.tools) && body.tools.length > 0;

/**
 * A scripted model server on loopback: every request that offers tools plays the next script turn,
 * then the final turn once the script is exhausted; requests without tools get a short side answer
 * with zero usage (agent CLIs add side requests into their usage, and tests compare totals with the
 * script). Every request is recorded with how it was classified.
 */
export async function startScriptServer(opts: ScriptOptions, api: ScriptApi): Promise<ScriptServer> {
  const requests: RecordedRequest[] = [];
  const sockets = new Set<Socket>();
  const stopping = new AbortController();
  let next = 0;

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    const body = (await readBody(req)) as Json;
    const record: RecordedRequest = {
      method: req.method ?? "GET",
      path: url.pathname,
      headers: req.headers,
      body,
      kind: "side",
    };
    requests.push(record);
    const play = api.turnRequest(req.method ?? "GET", url.pathname, body);
    if (play) {
      let turn: ScriptTurn = { text: api.sideText(body), usage: NO_USAGE };
      if (isMainRequest(body)) {
        const scripted = opts.turns[next];
        if (scripted) {
          record.kind = "main";
          record.turn = next;
          next++;
          turn = scripted;
        } else {
          record.kind = "final";
          turn = { text: opts.finalText ?? "Done.", usage: FINAL_USAGE };
        }
      }
      return playTurn(res, turn, play.model, play.stream);
    }
    if (api.answer(req, res, url.pathname, body)) return;
    sendJson(
      res,
      404,
      api.errorBody(api.notFoundType, `scripted server: no route ${req.method} ${url.pathname}`),
    );
  };

  const playTurn = async (res: ServerResponse, turn: ScriptTurn, model: string, stream: boolean) => {
    const stalled = async () => !turn.stallMs || (await hold(res, turn.stallMs, stopping.signal));
    if (turn.error) {
      const headers: Record<string, string> = {};
      if (turn.error.retryAfter !== undefined) headers["retry-after"] = String(turn.error.retryAfter);
      if (await stalled()) sendJson(res, turn.error.status, api.turnError(turn.error), headers);
      return;
    }
    const reply = api.reply(turn, model);
    if (!stream) {
      if (await stalled()) sendJson(res, 200, reply.message);
      return;
    }
    res.writeHead(200, {
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      connection: "keep-alive",
      ...reply.streamHeaders,
    });
    res.flushHeaders();
    if (!(await stalled())) return;
    for (const [event, data] of reply.events) sse(res, event, data);
    res.end();
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) sendJson(res, 500, api.errorBody(api.serverErrorType, String(err)));
      else res.destroy();
    });
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
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
