import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { Readable } from "node:stream";

/** Statuses whose response has no body (the Fetch standard's null body statuses). */
export const NULL_BODY = new Set([101, 103, 204, 205, 304]);
/** GitHub asks a client to repeat the request at the new address on these (see `follow`). */
const REDIRECTS = new Set([301, 302, 307, 308]);
const MAX_REDIRECTS = 5;
const SILENT_CONNECTION_MS = 300_000;

/**
 * fetch for a request that must not be sent twice (a POST that creates a comment or a pull request),
 * over a connection of its own that closes after the answer. On a kept-alive connection, the server
 * may close it as the request goes out (its idle timeout, while a loaded worker's event loop was
 * late to retire it): the request then fails with a reset, and whether the server acted on it cannot
 * be known, so it cannot be sent again. A fresh connection has no such moment. It costs a connection
 * per request, and only the few requests that create something take it.
 *
 * Handles what Octokit sends: a string or bytes body, a plain or Headers header set, a signal.
 * Returns undefined for anything else (the caller uses fetch).
 */
export function fetchOnFreshConnection(
  input: string | URL | Request,
  init: RequestInit = {},
): Promise<Response> | undefined {
  if (input instanceof Request) return undefined;
  const body = init.body;
  if (body != null && typeof body !== "string" && !(body instanceof Uint8Array)) return undefined;
  return send(new URL(String(input)), init, body ?? undefined, MAX_REDIRECTS);
}

function send(
  url: URL,
  init: RequestInit,
  body: string | Uint8Array | undefined,
  redirectsLeft: number,
): Promise<Response> {
  const method = (init.method ?? "GET").toUpperCase();
  const headers = Object.fromEntries(new Headers(init.headers));
  const request = url.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise<Response>((resolve, reject) => {
    const req = request(
      url,
      {
        method,
        headers: { ...headers, connection: "close" },
        agent: false,
        ...(init.signal ? { signal: init.signal } : {}),
      },
      (res) => {
        const location = res.headers.location;
        if (REDIRECTS.has(res.statusCode ?? 0) && location && init.redirect !== "manual") {
          res.resume();
          if (redirectsLeft === 0) return reject(new TypeError(`too many redirects from ${url}`));
          const next = new URL(location, url);
          // GitHub: "repeat the request verbatim" at the new address; credentials stay with the origin.
          // https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api#follow-redirects
          const sameOrigin = next.origin === url.origin;
          const nextInit = sameOrigin ? init : { ...init, headers: withoutAuthorization(init.headers) };
          return resolve(send(next, nextInit, body, redirectsLeft - 1));
        }
        resolve(responseOf(res, method));
      },
    );
    // As fetch (undici) gives up on a silent connection: after 300 s without a byte.
    req.setTimeout(SILENT_CONNECTION_MS, () =>
      req.destroy(new Error(`no answer from ${url.origin} in ${SILENT_CONNECTION_MS / 1000} s`)),
    );
    req.on("error", reject);
    req.end(body);
  });
}

function responseOf(res: IncomingMessage, method: string): Response {
  const status = res.statusCode ?? 502;
  const headers = new Headers();
  for (const [name, value] of Object.entries(res.headers)) {
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else if (value !== undefined) headers.set(name, value);
  }
  const empty = NULL_BODY.has(status) || method === "HEAD";
  if (empty) res.resume();
  return new Response(empty ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), {
    status,
    statusText: res.statusMessage ?? "",
    headers,
  });
}

function withoutAuthorization(headers: RequestInit["headers"]): Headers {
  const h = new Headers(headers);
  h.delete("authorization");
  return h;
}
