import { randomBytes, timingSafeEqual } from "node:crypto";
import {
  createServer,
  Agent as HttpAgent,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type ServerResponse,
} from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import type { AddressInfo, Socket } from "node:net";

/**
 * A grant: for as long as it lives, requests that carry its token go to `upstream` with the real
 * credential in place of the token.
 */
export interface GatewayGrant {
  /** The per-run token the agent holds instead of the credential (worthless once revoked). */
  token: string;
  revoke(): void;
}

/** A request the model API may be asked (method, path without the query); nothing else is forwarded. */
export interface GatewayRoute {
  method: string;
  path: RegExp;
}

export interface ModelGateway {
  /** `http://127.0.0.1:<port>`: the base URL the agent is pointed at. */
  url: string;
  /** Requests carrying the grant's token go to `upstream` with `credential`, if they match one of `routes`. */
  grant(upstream: string, credential: string, routes?: readonly GatewayRoute[]): GatewayGrant;
  /** Requests forwarded so far (for reports and tests). */
  readonly forwarded: number;
  close(): Promise<void>;
}

/** Headers a credential travels in, by provider: Anthropic, OpenAI-style bearer, Google. */
const AUTH_HEADERS = ["x-api-key", "authorization", "x-goog-api-key"] as const;
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
]);
const TOKEN_PREFIX = "fleet-run-";

/**
 * Fleet's model gateway: a loopback HTTP server in the worker that sits between an agent and its
 * model API, so the agent never holds a long-lived credential. The agent is given the gateway's URL
 * and a random per-run token; the gateway checks the token, puts the real credential (API key or
 * OAuth token) in the same header the token came in, and streams the request and the response
 * through unchanged. A request without a live token gets a 401 and reaches no upstream.
 *
 * Hand-written rather than a proxy library: it is a small stream forwarder with one header rewrite,
 * and it is where usage will be read from the wire (server-sent events pass through it).
 */
export async function startModelGateway(opts: { log?: (m: string) => void } = {}): Promise<ModelGateway> {
  const grants = new Map<string, { upstream: URL; credential: string; routes?: readonly GatewayRoute[] }>();
  const sockets = new Set<Socket>();
  const agents = { http: new HttpAgent({ keepAlive: true }), https: new HttpsAgent({ keepAlive: true }) };
  let forwarded = 0;

  const server = createServer((req, res) => {
    const found = findGrant(req.headers);
    if (!found) {
      req.resume();
      return refuse(
        res,
        401,
        "authentication_error",
        "This request carries no live Fleet run token; the model gateway only serves its own runs.",
      );
    }
    const path = (req.url ?? "/").split("?")[0]!;
    const routes = found.grant.routes;
    if (routes && !routes.some((r) => r.method === req.method && r.path.test(path))) {
      req.resume();
      opts.log?.(`model gateway: refused ${req.method} ${path} (not a model request of this coder)`);
      return refuse(
        res,
        403,
        "permission_error",
        `Fleet's model gateway forwards only this coder's model requests, not ${req.method} ${path}.`,
      );
    }
    forwarded++;
    forward(req, res, found.grant.upstream, found.grant.credential, found.header, agents, opts.log);
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;

  function findGrant(headers: IncomingHttpHeaders) {
    for (const header of AUTH_HEADERS) {
      const raw = headers[header];
      if (typeof raw !== "string") continue;
      const token = raw.replace(/^Bearer\s+/i, "").trim();
      if (!token.startsWith(TOKEN_PREFIX)) continue;
      for (const [known, grant] of grants) {
        if (known.length === token.length && timingSafeEqual(Buffer.from(known), Buffer.from(token)))
          return { grant, header };
      }
    }
    return undefined;
  }

  return {
    url: `http://127.0.0.1:${port}`,
    grant(upstream, credential, routes) {
      const token = `${TOKEN_PREFIX}${randomBytes(24).toString("hex")}`;
      grants.set(token, { upstream: new URL(upstream), credential, ...(routes ? { routes } : {}) });
      return { token, revoke: () => void grants.delete(token) };
    },
    get forwarded() {
      return forwarded;
    },
    async close() {
      grants.clear();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      });
      agents.http.destroy();
      agents.https.destroy();
    },
  };
}

function refuse(res: ServerResponse, status: number, type: string, message: string) {
  const body = JSON.stringify({ type: "error", error: { type, message } });
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

function forward(
  req: IncomingMessage,
  res: ServerResponse,
  upstream: URL,
  credential: string,
  authHeader: (typeof AUTH_HEADERS)[number],
  agents: { http: HttpAgent; https: HttpsAgent },
  log?: (m: string) => void,
) {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || (AUTH_HEADERS as readonly string[]).includes(name))
      continue;
    headers[name] = value;
  }
  headers[authHeader] = authHeader === "authorization" ? `Bearer ${credential}` : credential;
  // The upstream's own path prefix (e.g. a gateway of the provider at /anthropic) goes first.
  const prefix = upstream.pathname.replace(/\/+$/, "");
  const https = upstream.protocol === "https:";
  const out = (https ? httpsRequest : httpRequest)(
    {
      protocol: upstream.protocol,
      hostname: upstream.hostname,
      port: upstream.port || (https ? 443 : 80),
      method: req.method,
      path: `${prefix}${req.url ?? "/"}`,
      headers,
      agent: https ? agents.https : agents.http,
    },
    (upstreamRes) => {
      const back: Record<string, string | string[]> = {};
      for (const [name, value] of Object.entries(upstreamRes.headers)) {
        if (value !== undefined && !HOP_BY_HOP.has(name)) back[name] = value;
      }
      res.writeHead(upstreamRes.statusCode ?? 502, back);
      upstreamRes.pipe(res);
      upstreamRes.on("error", () => res.destroy());
    },
  );
  out.on("error", (error) => {
    log?.(`model gateway: ${upstream.origin} unreachable: ${error.message}`);
    if (res.headersSent) return void res.destroy();
    const body = JSON.stringify({
      type: "error",
      error: { type: "api_error", message: `Fleet's model gateway could not reach ${upstream.origin}.` },
    });
    res.writeHead(502, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
    res.end(body);
  });
  // The agent went away (killed, timed out): the upstream request goes too.
  res.on("close", () => {
    if (!res.writableFinished) out.destroy();
  });
  req.pipe(out);
}
