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
import {
  createWireReader,
  cutTurn,
  requestedMaxOutput,
  type WireProvider,
  type WireTurn,
  wireProviderOf,
} from "../../economy/wire-usage.ts";

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

/** A credential by name (what reports show) and value (what the upstream gets). */
export interface NamedCredential {
  name: string;
  value: string;
}

/**
 * Where a grant's credential comes from, request by request: a run can move to another credential
 * between two requests (one nears its limit) or retry a request on another (the first answered 429).
 */
export interface GrantCredentials {
  /** The credential `request` (admitted) goes out on: from then on it is in flight on it until settled. */
  current(request?: GatewayRequest): NamedCredential;
  /** `name` answered 429: the credential to retry the same request on, or undefined to pass the 429 on. */
  rateLimited(
    name: string,
    info: { retryAfterSeconds?: number },
    request?: GatewayRequest,
  ): Promise<NamedCredential | undefined>;
}

/** One request the agent asked for, as the policy sees it (the same object from admit to settled). */
export interface GatewayRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The body's size in bytes. */
  bodyBytes?: number;
}

/** What the upstream answered one forwarded request, and what its body said (model requests only). */
export interface GatewayResponse {
  request?: GatewayRequest;
  credential: string;
  status: number;
  headers: IncomingHttpHeaders;
  /**
   * The response's usage, model and tool calls, read from the wire (a model request that succeeded).
   * An answer cut off before its end (the agent went away, the upstream broke off) is charged what
   * was read, its output estimated when its count never came (`cut`).
   */
  turn?: WireTurn;
  /** The answer did not pass in full: `turn` holds estimates where figures were missing. */
  cut?: boolean;
}

/** A run's rules at the gateway: whether a request may go out, and what to learn from each answer. */
export interface GrantPolicy {
  /** Before a request goes out: a reason to refuse it (the run must stop), or undefined. */
  admit?(request: GatewayRequest): Promise<string | undefined> | string | undefined;
  /** After each upstream answer has been passed on in full, or was cut off (a 429 retried is one too). */
  onResponse?(response: GatewayResponse): void;
  /** Once per admitted request, after its last answer was handled or when it got none (the upstream failed, the agent left). */
  settled?(request: GatewayRequest): void;
}

export interface ModelGateway {
  /** `http://127.0.0.1:<port>`: the base URL the agent is pointed at. */
  url: string;
  /**
   * Requests carrying the grant's token go to `upstream` with the credential (or the pool's current
   * one), if they match one of `routes`, under `policy`.
   */
  grant(
    upstream: string,
    credential: string | GrantCredentials,
    routes?: readonly GatewayRoute[],
    policy?: GrantPolicy,
  ): GatewayGrant;
  /** Requests forwarded so far (for reports and tests). */
  readonly forwarded: number;
  close(): Promise<void>;
}

interface Grant {
  upstream: URL;
  credentials: GrantCredentials;
  routes?: readonly GatewayRoute[];
  policy?: GrantPolicy;
}

/** Headers a credential travels in, by provider: Anthropic, OpenAI-style bearer, Google. */
const AUTH_HEADERS = ["x-api-key", "authorization", "x-goog-api-key"] as const;
type AuthHeader = (typeof AUTH_HEADERS)[number];
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
  "content-length",
  "accept-encoding",
]);
const TOKEN_PREFIX = "fleet-run-";

const fixed = (credential: string): GrantCredentials => ({
  current: () => ({ name: "credential", value: credential }),
  rateLimited: async () => undefined,
});

/**
 * Fleet's model gateway: a loopback HTTP server in the worker that sits between an agent and its
 * model API, so the agent never holds a long-lived credential. The agent is given the gateway's URL
 * and a random per-run token; the gateway checks the token, puts the real credential (API key or
 * OAuth token) in the same header the token came in, and streams the response back unchanged while
 * reading its usage, model and tool calls (wire-usage.ts). A request without a live token gets a 401
 * and reaches no upstream; a request the run's policy refuses (a ceiling, a runaway) gets a 400 that
 * says why; a 429 is retried on the pool's next credential when there is one.
 *
 * Hand-written rather than a proxy library: it is a small stream forwarder with one header rewrite,
 * a retry and a tap on the response bytes.
 */
export async function startModelGateway(opts: { log?: (m: string) => void } = {}): Promise<ModelGateway> {
  const grants = new Map<string, Grant>();
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
    serve(req, res, path, found.grant, found.header, agents, opts.log).catch((error: unknown) => {
      opts.log?.(`model gateway: ${(error as Error).message}`);
      if (!res.headersSent)
        refuse(res, 502, "api_error", "Fleet's model gateway failed to forward the request.");
      else res.destroy();
    });
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
    grant(upstream, credential, routes, policy) {
      const token = `${TOKEN_PREFIX}${randomBytes(24).toString("hex")}`;
      grants.set(token, {
        upstream: new URL(upstream),
        credentials: typeof credential === "string" ? fixed(credential) : credential,
        ...(routes ? { routes } : {}),
        ...(policy ? { policy } : {}),
      });
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

/** One request: read whole (a 429 is retried with the same body), admitted by the policy, sent, answered. */
async function serve(
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  grant: Grant,
  authHeader: AuthHeader,
  agents: { http: HttpAgent; https: HttpsAgent },
  log?: (m: string) => void,
) {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const body = Buffer.concat(chunks);
  const method = req.method ?? "GET";
  const request: GatewayRequest = { method, path, headers: req.headers, bodyBytes: body.length };
  const refused = await grant.policy?.admit?.(request);
  if (refused) {
    log?.(`model gateway: refused ${method} ${path}: ${refused}`);
    return refuse(res, 400, "invalid_request_error", `Fleet stopped this run: ${refused}`);
  }
  let settled = false;
  const settle = () => {
    if (settled) return;
    settled = true;
    tell(log, () => grant.policy?.settled?.(request));
  };
  try {
    await forward(req, res, { request, body, grant, authHeader, agents, settle }, log);
  } catch (error) {
    settle();
    throw error;
  }
}

/** The admitted request upstream, retried on the next credential after a 429; `settle` once it is over. */
async function forward(
  req: IncomingMessage,
  res: ServerResponse,
  at: {
    request: GatewayRequest;
    body: Buffer;
    grant: Grant;
    authHeader: AuthHeader;
    agents: { http: HttpAgent; https: HttpsAgent };
    settle: () => void;
  },
  log?: (m: string) => void,
) {
  const { request, body, grant, settle } = at;
  const provider = wireProviderOf(request.method, request.path);
  const policy = grant.policy;
  let credential = grant.credentials.current(request);
  for (let attempt = 0; ; attempt++) {
    const upstreamRes = await send(
      req,
      body,
      grant.upstream,
      credential.value,
      at.authHeader,
      at.agents,
      res,
    );
    if (!upstreamRes) return settle();
    const status = upstreamRes.statusCode ?? 502;
    const headers = upstreamRes.headers;
    if (status === 429 && attempt < 8) {
      const retryAfter = Number(headers["retry-after"]);
      const next = await grant.credentials.rateLimited(
        credential.name,
        { ...(Number.isFinite(retryAfter) && retryAfter >= 0 ? { retryAfterSeconds: retryAfter } : {}) },
        request,
      );
      tell(log, () => policy?.onResponse?.({ request, credential: credential.name, status, headers }));
      if (next) {
        upstreamRes.resume();
        log?.(`model gateway: ${credential.name} answered 429; retrying on ${next.name}`);
        credential = next;
        continue;
      }
      return pipeBack(upstreamRes, res, undefined, settle);
    }
    const reader =
      provider && status >= 200 && status < 300
        ? createWireReader(provider, String(headers["content-type"] ?? ""))
        : undefined;
    const name = credential.name;
    return pipeBack(upstreamRes, res, reader, (complete) => {
      const turn = reader && provider ? turnOf(provider, reader, complete, body) : undefined;
      tell(log, () =>
        policy?.onResponse?.({
          request,
          credential: name,
          status,
          headers,
          ...(turn ? { turn } : {}),
          ...(complete ? {} : { cut: true }),
        }),
      );
      settle();
    });
  }
}

/** What a model answer said, or (cut off) what it is charged: see cutTurn. */
function turnOf(
  provider: WireProvider,
  reader: ReturnType<typeof createWireReader>,
  complete: boolean,
  body: Buffer,
): WireTurn {
  const read = reader.finish();
  if (complete) return read;
  const maxOutput = requestedMaxOutput(body);
  return cutTurn(provider, read, {
    outputKnown: reader.outputKnown(),
    bodyBytes: body.length,
    ...(maxOutput ? { maxOutput } : {}),
  });
}

/** What the policy does with an answer never breaks the agent's answer. */
function tell(log: ((m: string) => void) | undefined, f: () => void): void {
  try {
    f();
  } catch (error) {
    log?.(`model gateway: the run's policy failed: ${(error as Error).message}`);
  }
}

/** The request, sent upstream with `credential`; undefined when the upstream cannot be reached (the agent got a 502). */
function send(
  req: IncomingMessage,
  body: Buffer,
  upstream: URL,
  credential: string,
  authHeader: AuthHeader,
  agents: { http: HttpAgent; https: HttpsAgent },
  res: ServerResponse,
): Promise<IncomingMessage | undefined> {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || (AUTH_HEADERS as readonly string[]).includes(name))
      continue;
    headers[name] = value;
  }
  headers[authHeader] = authHeader === "authorization" ? `Bearer ${credential}` : credential;
  // Uncompressed, so the usage in the answer can be read on its way through.
  headers["accept-encoding"] = "identity";
  headers["content-length"] = String(body.length);
  // The upstream's own path prefix (e.g. a gateway of the provider at /anthropic) goes first.
  const prefix = upstream.pathname.replace(/\/+$/, "");
  const https = upstream.protocol === "https:";
  return new Promise((resolve) => {
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
      resolve,
    );
    out.on("error", () => {
      if (res.headersSent) res.destroy();
      else refuse(res, 502, "api_error", `Fleet's model gateway could not reach ${upstream.origin}.`);
      resolve(undefined);
    });
    // The agent went away (killed, timed out): the upstream request goes too.
    res.on("close", () => {
      if (!res.writableFinished) out.destroy();
    });
    out.end(body);
  });
}

/**
 * The upstream's answer, streamed back as it comes and read on its way; `done` once, when it has all
 * passed (`complete`) or when it stopped short: the agent went away, the upstream broke off. A turn
 * cut off was paid for all the same, so it is settled too.
 */
function pipeBack(
  upstreamRes: IncomingMessage,
  res: ServerResponse,
  reader: ReturnType<typeof createWireReader> | undefined,
  done: (complete: boolean) => void,
) {
  const back: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(upstreamRes.headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name)) back[name] = value;
  }
  if (upstreamRes.headers["content-length"] !== undefined)
    back["content-length"] = upstreamRes.headers["content-length"];
  let ended = false;
  const settle = (complete: boolean) => {
    if (ended) return;
    ended = true;
    done(complete);
  };
  if (reader) upstreamRes.on("data", (chunk: Buffer) => reader.push(chunk));
  upstreamRes.on("end", () => settle(true));
  upstreamRes.on("aborted", () => settle(false));
  upstreamRes.on("close", () => settle(false));
  res.on("close", () => settle(false));
  res.writeHead(upstreamRes.statusCode ?? 502, back);
  upstreamRes.pipe(res);
  upstreamRes.on("error", () => res.destroy());
}

/** An error in a shape both APIs' clients read: Anthropic's `{type, error: {type, message}}`, OpenAI's `error.message`/`code`. */
function refuse(res: ServerResponse, status: number, type: string, message: string) {
  const body = JSON.stringify({ type: "error", error: { type, code: type, message } });
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}
