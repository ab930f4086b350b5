import { createHash, randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { delayOf, type FaultSpec, type Faults } from "./faults.ts";
import { handleGraphql } from "./graphql.ts";
import { HttpError } from "./http-error.ts";
import { type loadSpec, matchRoute, type OpenApiChecker, type RouteMatch } from "./openapi-check.ts";
import type { Bucket, RateLimits } from "./rate-limits.ts";
import { classify, type RequestLog } from "./request-log.ts";
import type { Reply, Router } from "./router.ts";
import type { Actor } from "./state.ts";
import { requestScope, type World } from "./world.ts";

type Spec = Awaited<ReturnType<typeof loadSpec>>;

// Contents writes carry base64 of files up to 25 MB (about 34 MB encoded).
const MAX_BODY = 40 * 1024 * 1024;
const DOCS = "https://docs.github.com/rest";

export interface ServerDeps {
  spec: Spec;
  checker: OpenApiChecker;
  router: Router;
  world: World;
  log: RequestLog;
  faults: Faults;
  validate: boolean;
  limits: RateLimits;
  unimplemented: Array<{ method: string; path: string; route: string; inSpec: boolean }>;
  internal: (path: string, body: Buffer) => Promise<Reply | undefined>;
}

/** One REST request's answer: GitHub's headers, the ETag / 304 rule, the rate headers and the log entry. */
class Exchange {
  readonly method: string;
  readonly url: URL;
  readonly requestId = randomUUID().slice(0, 18).toUpperCase();
  /** "METHOD /template" once the route is known, "METHOD <path>" before. */
  route: string;
  actorName = "anonymous";
  bucket: Bucket | undefined;
  /** Whether the request spent its bucket (a 304 gives it back). */
  counted = false;
  private readonly req: IncomingMessage;
  private readonly res: ServerResponse;
  private readonly log: RequestLog;
  private readonly limits: RateLimits;

  constructor(req: IncomingMessage, res: ServerResponse, log: RequestLog, limits: RateLimits) {
    this.req = req;
    this.res = res;
    this.log = log;
    this.limits = limits;
    this.method = (req.method ?? "GET").toUpperCase();
    this.url = new URL(req.url ?? "/", "http://emulator.invalid");
    this.route = `${this.method} ${this.url.pathname}`;
  }

  send(status: number, body: unknown, headers: Record<string, string> = {}): void {
    const h: Record<string, string> = {
      "x-github-request-id": this.requestId,
      "x-github-media-type": "github.v3; format=json",
      "x-github-api-version-selected": "2022-11-28",
      "access-control-expose-headers":
        "ETag, Link, Location, Retry-After, X-GitHub-OTP, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Used, X-RateLimit-Resource, X-RateLimit-Reset",
      ...headers,
    };
    let payload: Buffer | undefined;
    if (body !== undefined && status !== 204 && status !== 304) {
      payload = Buffer.isBuffer(body)
        ? body
        : Buffer.from(typeof body === "string" ? body : JSON.stringify(body));
      h["content-type"] ??= "application/json; charset=utf-8";
      if ((this.method === "GET" || this.method === "HEAD") && status === 200) {
        const etag = `W/"${createHash("sha256").update(payload).digest("hex").slice(0, 40)}"`;
        h.etag = etag;
        if (this.req.headers["if-none-match"]?.split(",").some((t) => t.trim() === etag)) {
          // GitHub does not charge conditional requests that answer 304.
          if (this.counted && this.bucket) this.bucket.used -= 1;
          status = 304;
          payload = undefined;
        }
      }
    }
    if (this.bucket) Object.assign(h, this.limits.headers(this.bucket));
    const { method, route } = this;
    this.log.add({
      method,
      path: this.url.pathname,
      route,
      status,
      class: classify(method, route),
      actor: this.actorName,
    });
    this.res.writeHead(status, h);
    this.res.end(method === "HEAD" ? undefined : payload);
  }

  fail(e: HttpError): void {
    this.send(
      e.status,
      { message: e.message, documentation_url: DOCS, ...e.extra, status: String(e.status) },
      e.headers,
    );
  }
}

/** The HTTP pipeline: auth, route match, limits, faults, OpenAPI check, handler, ETag. */
export function createHandler(d: ServerDeps) {
  const warned = new Set<string>();
  const warnOnce = (route: string, why: string) => {
    if (warned.has(route)) return;
    warned.add(route);
    process.stderr.write(`[github-emulator] 404 for ${route}: ${why}\n`);
  };

  return async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const x = new Exchange(req, res, d.log, d.limits);
    let raw: Buffer;
    try {
      raw = await readBody(req);
    } catch {
      return x.fail(new HttpError(413, "Request body too large"));
    }
    if (x.url.pathname.startsWith("/_emulator/")) {
      const r = await d.internal(x.url.pathname, raw);
      res.writeHead(r?.status ?? 404, { "content-type": "application/json" });
      res.end(JSON.stringify(r?.body ?? { message: "Not Found" }));
      return;
    }
    let actor: Actor;
    try {
      actor = d.world.auth.actor(req.headers.authorization);
    } catch (e) {
      return x.fail(e as HttpError);
    }
    x.actorName = actorName(actor);
    x.bucket = d.limits.bucket(actor, req.socket.remoteAddress ?? "");
    // GitHub's secondary limit on concurrent requests (its message does not say which limit it was).
    // In flight from here until the answer is sent (or the client goes away).
    const limitKey = d.limits.key(actor, req.socket.remoteAddress ?? "");
    if (!d.limits.requestStarted(limitKey))
      return x.fail(
        new HttpError(
          403,
          `You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID ${x.requestId}.`,
          {},
          { "retry-after": "60" },
        ),
      );
    res.once("close", () => d.limits.requestEnded(limitKey));
    // GraphQL is outside the REST description: only the mutations REST lacks (see graphql.ts).
    if (x.method === "POST" && x.url.pathname === "/graphql") return graphql(d, x, actor, raw);
    const match = matchRoute(d.spec, x.method, x.url.pathname);
    if (!match) {
      d.unimplemented.push({ method: x.method, path: x.url.pathname, route: x.route, inSpec: false });
      warnOnce(x.route, "not in GitHub's OpenAPI description");
      return x.send(404, { message: "Not Found", documentation_url: DOCS, status: "404" });
    }
    x.route = `${x.method === "HEAD" ? "GET" : x.method} ${match.operation.template}`;
    const admitted = await admit(d, x, actor, match, req.socket.remoteAddress ?? "");
    if (admitted instanceof HttpError) return x.fail(admitted);
    const parsed = parseRequest(d, x, match, raw);
    if (parsed instanceof HttpError) return x.fail(parsed);
    const handler = d.router.find(x.method, match.operation.template);
    if (!handler) {
      d.unimplemented.push({ method: x.method, path: x.url.pathname, route: x.route, inSpec: true });
      warnOnce(x.route, "in GitHub's OpenAPI description but not implemented");
      return x.send(404, {
        message: "Not Found (not implemented by the GitHub emulator)",
        documentation_url: DOCS,
        route: x.route,
        status: "404",
      });
    }
    try {
      const reply = await requestScope.run(
        { actor, dropDeliveries: admitted.fault?.dropDelivery === true },
        () =>
          handler({
            method: x.method,
            template: match.operation.template,
            path: x.url.pathname,
            params: parsed.params,
            query: x.url.searchParams,
            body: parsed.body,
            actor,
            headers: req.headers,
          }),
      );
      x.send(reply.status, reply.body, reply.headers);
    } catch (e) {
      if (e instanceof HttpError) return x.fail(e);
      process.stderr.write(`[github-emulator] ${x.route} failed: ${(e as Error).stack ?? e}\n`);
      x.fail(new HttpError(500, `Emulator error: ${(e as Error).message}`));
    }
  };
}

const actorName = (a: Actor): string =>
  a.kind === "user" || a.kind === "installation" ? a.user.login : a.kind === "app" ? "app" : "anonymous";

function graphql(d: ServerDeps, x: Exchange, actor: Actor, raw: Buffer): void {
  let query: unknown;
  try {
    query = JSON.parse(raw.toString("utf8"));
  } catch {
    x.fail(new HttpError(400, "Problems parsing JSON"));
    return;
  }
  const r = handleGraphql(d.world.state, actor, query, d.world);
  x.send(r.status, r.body);
}

/**
 * What stands between a matched request and its handler, in GitHub's order: the primary rate limit
 * (spent here), an injected fault (after its latency), the content-creation limit. The refusal, or
 * the fault that lets the request through (it may drop its webhooks).
 */
async function admit(
  d: ServerDeps,
  x: Exchange,
  actor: Actor,
  match: RouteMatch,
  remote: string,
): Promise<HttpError | { fault?: FaultSpec }> {
  const bucket = x.bucket!;
  if (!x.url.pathname.startsWith("/rate_limit")) {
    if (bucket.used >= bucket.limit)
      return new HttpError(403, `API rate limit exceeded for ${x.actorName}.`, {
        documentation_url:
          "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-the-rate-limit",
      });
    bucket.used += 1;
    x.counted = true;
  }
  const fault = d.faults.take(x.method === "HEAD" ? "GET" : x.method, match.operation.template);
  await delayOf(fault);
  if (fault?.status) {
    const headers: Record<string, string> = {};
    if (fault.retryAfter !== undefined) headers["retry-after"] = String(fault.retryAfter);
    const message =
      fault.status === 403 || fault.status === 429
        ? `You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID ${x.requestId}.`
        : fault.status >= 500
          ? "Server Error"
          : "Injected fault";
    return new HttpError(fault.status, message, {}, headers);
  }
  if (classify(x.method, x.route) === "content") {
    const wait = d.limits.contentWait(d.limits.key(actor, remote));
    if (wait !== undefined)
      return new HttpError(
        403,
        `You have exceeded a secondary rate limit and have been temporarily blocked from content creation. Please retry your request again later. If you reach out to GitHub Support for help, please include the request ID ${x.requestId}.`,
        {},
        { "retry-after": String(Math.max(wait, 1)) },
      );
  }
  return { fault };
}

/** The request's JSON body and its parameters (path and query), checked against the OpenAPI description. */
function parseRequest(
  d: ServerDeps,
  x: Exchange,
  match: RouteMatch,
  raw: Buffer,
): HttpError | { body: unknown; params: Record<string, unknown> } {
  let body: unknown;
  const hasBody = raw.length > 0;
  if (hasBody) {
    try {
      body = JSON.parse(raw.toString("utf8"));
    } catch {
      return new HttpError(400, "Problems parsing JSON");
    }
  }
  const query: Record<string, string | string[]> = {};
  for (const k of new Set(x.url.searchParams.keys())) {
    const all = x.url.searchParams.getAll(k);
    query[k] = all.length > 1 ? all : all[0]!;
  }
  if (!d.validate) return { body, params: { ...match.params, ...query } };
  const c = d.checker.check(match, query, body, hasBody);
  if (c.ok) return { body, params: c.params };
  // A path GitHub cannot parse (issue number "abc") is simply not found there.
  const pathParam = match.operation.parameters.some(
    (p) => p.in === "path" && c.error.errors[0]?.field === p.name,
  );
  if (pathParam) return new HttpError(404, "Not Found");
  return new HttpError(c.error.status, c.error.message, { errors: c.error.errors });
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > MAX_BODY) throw new Error("too large");
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks);
}
