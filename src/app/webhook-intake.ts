import type { IncomingMessage, ServerResponse } from "node:http";
import type { Probot } from "probot";

/**
 * GitHub caps webhook payloads at 25 MB and sends nothing bigger
 * (https://docs.github.com/en/webhooks/webhook-events-and-payloads#payload-cap), so a bigger body is
 * not GitHub's: it is refused before it is buffered.
 */
export const MAX_WEBHOOK_BYTES = 25 * 1024 * 1024;

const SIGNATURE = /^sha256=[0-9a-f]{64}$/;

type NodeMiddleware = (req: IncomingMessage, res: ServerResponse, next?: () => void) => Promise<boolean>;

interface Refusal {
  status: number;
  error: string;
}

const pathnameOf = (url: string | undefined): string => {
  try {
    return new URL(url ?? "/", "http://localhost").pathname.replace(/\/+$/, "") || "/";
  } catch {
    return "";
  }
};

/** How long a refused connection is kept (not read) after the answer, for the sender to read it. */
const LINGER_MS = 2_000;

/**
 * Answers without reading the rest of the body. The request is paused, so TCP flow control stops the
 * sender after a socket buffer's worth; the connection is destroyed a moment after the answer is out
 * (destroying it at once would reset it before a sender still writing has read the answer).
 */
function refuse(req: IncomingMessage, res: ServerResponse, refusal: Refusal): void {
  if (!req.complete) {
    req.pause();
    // Counted as consumed, so node:http does not drain ("dump") the body once the answer is sent.
    req.read(0);
    const timer = setTimeout(() => req.socket.destroy(), LINGER_MS);
    timer.unref();
    req.socket.once("close", () => clearTimeout(timer));
  }
  res.writeHead(refusal.status, { "content-type": "application/json" });
  res.end(JSON.stringify({ error: refusal.error }));
}

/** Reads the body into memory, at most `max` bytes; a refusal as soon as it is known to be longer. */
function readCapped(req: IncomingMessage, max: number): Promise<Buffer | Refusal> {
  const tooLarge: Refusal = {
    status: 413,
    error: `Payload too large: webhook bodies are at most ${max} bytes (GitHub caps payloads at 25 MB).`,
  };
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > max) return Promise.resolve(tooLarge);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (value: Buffer | Refusal) => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
      resolve(value);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) {
        req.pause();
        done(tooLarge);
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => done(Buffer.concat(chunks, size));
    const onError = () => done({ status: 400, error: "The request body could not be read." });
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onError);
  });
}

/**
 * Puts a gate in front of Probot's webhook middleware (in `fleet serve`'s Probot server and in
 * startFleetServer alike, since both ask the app's Probot for it after loading the app): a POST to the
 * webhook path without a well-formed `X-Hub-Signature-256`, or declaring more than MAX_WEBHOOK_BYTES,
 * is refused before its body is read; a body that grows past the cap is refused when it does, with
 * the connection closed; a body whose signature does not match is refused. Only then does Probot's
 * middleware see it (already read, so it does not read it again).
 */
export function guardWebhookIntake(app: Probot, opts: { maxBytes?: number } = {}): void {
  const max = opts.maxBytes ?? MAX_WEBHOOK_BYTES;
  const original = app.getNodeMiddleware.bind(app);
  app.getNodeMiddleware = (async (options: Parameters<Probot["getNodeMiddleware"]>[0] = {}) => {
    const inner = (await original(options)) as NodeMiddleware;
    const path = pathnameOf(options.path ?? app.webhookPath);
    const gate: NodeMiddleware = async (req, res, next) => {
      if (req.method !== "POST" || pathnameOf(req.url) !== path) return inner(req, res, next);
      const signature = req.headers["x-hub-signature-256"];
      if (typeof signature !== "string" || !SIGNATURE.test(signature)) {
        refuse(req, res, {
          status: 401,
          error:
            signature === undefined
              ? "Unsigned webhook: the X-Hub-Signature-256 header is missing."
              : "The X-Hub-Signature-256 header is not sha256=<64 hex digits>.",
        });
        return true;
      }
      const body = await readCapped(req, max);
      if (!Buffer.isBuffer(body)) {
        refuse(req, res, body);
        return true;
      }
      const text = body.toString("utf8");
      if (!(await app.webhooks.verify(text, signature).catch(() => false))) {
        refuse(req, res, { status: 401, error: "The webhook signature does not match its body." });
        return true;
      }
      // @octokit/webhooks' middleware takes a string `body` as the payload instead of reading the stream.
      (req as IncomingMessage & { body?: string }).body = text;
      return inner(req, res, next);
    };
    return gate;
  }) as Probot["getNodeMiddleware"];
}
