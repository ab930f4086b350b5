import type { IncomingMessage, ServerResponse } from "node:http";
import type { Probot } from "probot";
import { type BackgroundDeliveries, DeliveryOrder, scopeOf } from "./deliveries.ts";

/**
 * GitHub caps webhook payloads at 25 MB and sends nothing bigger
 * (https://docs.github.com/en/webhooks/webhook-events-and-payloads#payload-cap), so a bigger body is
 * not GitHub's: it is refused before it is buffered.
 */
export const MAX_WEBHOOK_BYTES = 25 * 1024 * 1024;

const SIGNATURE = /^sha256=[0-9a-f]{64}$/;

interface Refusal {
  status: number;
  error: string;
}

export const pathnameOf = (url: string | undefined): string => {
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
 * Whether a payload's field is one of the REST API's hypermedia links: every object in a payload
 * carries them, `url` and `<relation>_url` (a repository 40-odd, a user 17), and they are about half
 * of a payload's bytes (https://docs.github.com/en/rest/using-the-rest-api/getting-started-with-the-rest-api#hypermedia).
 * Fleet's handlers build their requests from names and numbers and follow none of them, so they are
 * not kept while a delivery waits its turn (a burst of labels holds thousands: README, the app's RSS).
 * `html_url`, a page for people, is kept.
 */
export const isApiLink = (key: string, value: unknown): boolean =>
  typeof value === "string" && (key === "url" || (key.endsWith("_url") && key !== "html_url"));

/**
 * Fields whose keys people choose (a repository's custom properties, a dispatch's inputs and client
 * payload): a `*_url` there is data, kept as sent.
 */
const CHOSEN_KEYS = new Set(["custom_properties", "inputs", "client_payload"]);

/** Deeper than any GitHub payload (about 10 levels): below it a value is kept as parsed, not walked. */
const MAX_DEPTH = 64;

/**
 * A parsed payload copied without its API links. A copy, not a `JSON.parse` reviver that drops them:
 * V8 keeps an object that lost properties in a slower, larger form (an emulator `issues.labeled`
 * payload held 2,000 times: 8.6 KB each as parsed, 9.0 KB with the reviver, 5.0 KB copied).
 */
export function withoutApiLinks(value: unknown, depth = 0): unknown {
  if (value === null || typeof value !== "object" || depth >= MAX_DEPTH) return value;
  if (Array.isArray(value)) return value.map((v) => withoutApiLinks(v, depth + 1));
  const kept: Record<string, unknown> = {};
  for (const [key, parsed] of Object.entries(value)) {
    if (isApiLink(key, parsed)) continue;
    const v = CHOSEN_KEYS.has(key) ? parsed : withoutApiLinks(parsed, depth + 1);
    // Defined, not assigned: a `__proto__` key stays a field, as JSON.parse made it, not the copy's prototype.
    if (key === "__proto__")
      Object.defineProperty(kept, key, { value: v, enumerable: true, writable: true, configurable: true });
    else kept[key] = v;
  }
  return kept;
}

/** The body parsed without its API links, when it is a JSON object (every GitHub event payload is one). */
function objectOrUndefined(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value)
      ? (withoutApiLinks(value) as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** Fleet's webhook intake: a node:http handler, and the deliveries it answered and still handles. */
export interface WebhookIntake extends BackgroundDeliveries {
  /** Handles the request when it is for the webhook path (true), else leaves it to the next handler. */
  handle(req: IncomingMessage, res: ServerResponse): Promise<boolean>;
}

/**
 * The one way a webhook enters the app, in front of Probot's event handlers:
 * 1. size cap: a body declaring or growing past MAX_WEBHOOK_BYTES is refused before it is buffered;
 * 2. verify: without a well-formed `X-Hub-Signature-256`, or with one that does not match the body, 401;
 * 3. answer: a JSON object (kept without its API links, isApiLink) naming its event (`X-GitHub-Event`) is answered 200 at once (else 400), as
 *    GitHub recommends for its 10-second window: "respond with a 2XX response ... process the payload
 *    in the background" (https://docs.github.com/en/webhooks/using-webhooks/best-practices-for-using-webhooks#respond-within-10-seconds);
 * 4. order: one issue's or pull request's deliveries are handled in the order they came (DeliveryOrder);
 * 5. receive: Probot's `webhooks.receive` runs the handlers, whose failures Probot logs.
 * A delivery whose handling dies with the process is what a failed delivery was (GitHub resends neither);
 * the reconcile pass finds labeled issues with no task.
 */
export function createWebhookIntake(
  probot: Probot,
  opts: { path: string; maxBytes?: number },
): WebhookIntake {
  const max = opts.maxBytes ?? MAX_WEBHOOK_BYTES;
  const path = pathnameOf(opts.path);
  const order = new DeliveryOrder();
  let inFlight = 0;
  let waiters: Array<() => void> = [];
  const settled = () => {
    if (--inFlight > 0) return;
    for (const w of waiters) w();
    waiters = [];
  };
  return {
    get inFlight() {
      return inFlight;
    },
    idle: () => (inFlight === 0 ? Promise.resolve() : new Promise<void>((r) => waiters.push(r))),
    async handle(req, res) {
      if (pathnameOf(req.url) !== path) return false;
      if (req.method !== "POST") {
        refuse(req, res, { status: 405, error: `Webhooks are POSTed to ${path}.` });
        return true;
      }
      const accepted = await accept(probot, req, max);
      if ("status" in accepted) {
        refuse(req, res, accepted);
        return true;
      }
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("ok\n");
      const { id, name, payload } = accepted;
      inFlight++;
      const receive = () =>
        probot.webhooks.receive({ id, name, payload } as Parameters<Probot["webhooks"]["receive"]>[0]);
      void order.run(scopeOf(name, payload), receive).finally(settled);
      return true;
    },
  };
}

/** Steps 1 to 3 of the intake: the delivery, or why it is refused. */
async function accept(
  probot: Probot,
  req: IncomingMessage,
  max: number,
): Promise<{ id: string; name: string; payload: Record<string, unknown> } | Refusal> {
  const signature = req.headers["x-hub-signature-256"];
  if (typeof signature !== "string" || !SIGNATURE.test(signature))
    return {
      status: 401,
      error:
        signature === undefined
          ? "Unsigned webhook: the X-Hub-Signature-256 header is missing."
          : "The X-Hub-Signature-256 header is not sha256=<64 hex digits>.",
    };
  const body = await readCapped(req, max);
  if (!Buffer.isBuffer(body)) return body;
  const text = body.toString("utf8");
  if (!(await probot.webhooks.verify(text, signature).catch(() => false)))
    return { status: 401, error: "The webhook signature does not match its body." };
  const payload = objectOrUndefined(text);
  if (payload === undefined)
    return { status: 400, error: "The body is not a JSON object: GitHub's webhook payloads always are." };
  const name = req.headers["x-github-event"];
  if (typeof name !== "string" || name === "")
    return { status: 400, error: "The X-GitHub-Event header is empty." };
  const id = req.headers["x-github-delivery"];
  return { id: typeof id === "string" ? id : "", name, payload };
}
