import { createHash, randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Faults } from "./faults.ts";
import { handleGraphql } from "./graphql.ts";
import { HttpError } from "./http-error.ts";
import { type loadSpec, matchRoute, type OpenApiChecker } from "./openapi-check.ts";
import { classify, type RequestLog } from "./request-log.ts";
import type { Reply, Router } from "./router.ts";
import type { Actor } from "./state.ts";
import { requestScope, type World } from "./world.ts";

type Spec = Awaited<ReturnType<typeof loadSpec>>;

// Contents writes carry base64 of files up to 25 MB (about 34 MB encoded).
const MAX_BODY = 40 * 1024 * 1024;

interface Bucket {
  limit: number;
  used: number;
  reset: number;
}

export interface ServerDeps {
  spec: Spec;
  checker: OpenApiChecker;
  router: Router;
  world: World;
  log: RequestLog;
  faults: Faults;
  validate: boolean;
  rateLimit: number;
  /** GitHub's content-creation secondary limits (80/minute, 500/hour); off when undefined. */
  contentLimits?: { perMinute?: number; perHour?: number };
  baseUrl: () => string;
  unimplemented: Array<{ method: string; path: string; route: string; inSpec: boolean }>;
  internal: (path: string, body: Buffer) => Promise<Reply | undefined>;
}

/** The HTTP pipeline: auth, route match, faults, OpenAPI check, handler, rate limit, ETag. */
export function createHandler(d: ServerDeps) {
  const buckets = new Map<string, Bucket>();
  const contentTimes = new Map<string, number[]>();

  /** Seconds to wait when this content-creating request would exceed a secondary limit. */
  const contentWait = (key: string): number | undefined => {
    const lim = d.contentLimits;
    if (!lim) return undefined;
    const now = Date.now();
    const times = (contentTimes.get(key) ?? []).filter((t) => t > now - 3600_000);
    contentTimes.set(key, times);
    const lastMinute = times.filter((t) => t > now - 60_000);
    if (lim.perMinute !== undefined && lastMinute.length >= lim.perMinute)
      return Math.ceil((lastMinute[0]! + 60_000 - now) / 1000);
    if (lim.perHour !== undefined && times.length >= lim.perHour)
      return Math.ceil((times[0]! + 3600_000 - now) / 1000);
    times.push(now);
    return undefined;
  };
  const warned = new Set<string>();

  const bucketFor = (actor: Actor, remote: string): [string, Bucket] => {
    const key =
      actor.kind === "installation"
        ? `installation:${actor.installationId}`
        : actor.kind === "user"
          ? `user:${actor.user.login}`
          : actor.kind === "app"
            ? "app"
            : `ip:${remote}`;
    let b = buckets.get(key);
    const now = Math.floor(Date.now() / 1000);
    if (!b || b.reset <= now) {
      b = { limit: actor.kind === "anonymous" ? 60 : d.rateLimit, used: 0, reset: now + 3600 };
      buckets.set(key, b);
    }
    return [key, b];
  };

  const rateHeaders = (b: Bucket): Record<string, string> => ({
    "x-ratelimit-limit": String(b.limit),
    "x-ratelimit-remaining": String(Math.max(b.limit - b.used, 0)),
    "x-ratelimit-reset": String(b.reset),
    "x-ratelimit-used": String(b.used),
    "x-ratelimit-resource": "core",
  });

  return {
    buckets,
    rateHeaders,
    bucketFor,
    async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
      const method = (req.method ?? "GET").toUpperCase();
      const url = new URL(req.url ?? "/", "http://emulator.invalid");
      const requestId = randomUUID().slice(0, 18).toUpperCase();
      let route = `${method} ${url.pathname}`;
      let actorName = "anonymous";
      let bucket: Bucket | undefined;
      let counted = false;

      const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
        const h: Record<string, string> = {
          "x-github-request-id": requestId,
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
          if ((method === "GET" || method === "HEAD") && status === 200) {
            const etag = `W/"${createHash("sha256").update(payload).digest("hex").slice(0, 40)}"`;
            h.etag = etag;
            const inm = req.headers["if-none-match"];
            if (inm?.split(",").some((t) => t.trim() === etag)) {
              // GitHub does not charge conditional requests that answer 304.
              if (counted && bucket) bucket.used -= 1;
              status = 304;
              payload = undefined;
            }
          }
        }
        if (bucket) Object.assign(h, rateHeaders(bucket));
        d.log.add({
          method,
          path: url.pathname,
          route,
          status,
          class: classify(method, route),
          actor: actorName,
        });
        res.writeHead(status, h);
        res.end(method === "HEAD" ? undefined : payload);
      };
      const sendError = (e: HttpError) =>
        send(
          e.status,
          {
            message: e.message,
            documentation_url: "https://docs.github.com/rest",
            ...e.extra,
            status: String(e.status),
          },
          e.headers,
        );

      let raw: Buffer;
      try {
        raw = await readBody(req);
      } catch {
        return sendError(new HttpError(413, "Request body too large"));
      }

      if (url.pathname.startsWith("/_emulator/")) {
        const r = await d.internal(url.pathname, raw);
        res.writeHead(r?.status ?? 404, { "content-type": "application/json" });
        res.end(JSON.stringify(r?.body ?? { message: "Not Found" }));
        return;
      }

      let actor: Actor;
      try {
        actor = d.world.auth.actor(req.headers.authorization);
      } catch (e) {
        return sendError(e as HttpError);
      }
      actorName =
        actor.kind === "user" || actor.kind === "installation"
          ? actor.user.login
          : actor.kind === "app"
            ? "app"
            : "anonymous";

      [, bucket] = bucketFor(actor, req.socket.remoteAddress ?? "");
      // GraphQL is outside the REST description: only the mutations REST lacks (see graphql.ts).
      if (method === "POST" && url.pathname === "/graphql") {
        let query: unknown;
        try {
          query = JSON.parse(raw.toString("utf8"));
        } catch {
          return sendError(new HttpError(400, "Problems parsing JSON"));
        }
        const r = handleGraphql(d.world.state, actor, query);
        return send(r.status, r.body);
      }
      const match = matchRoute(d.spec, method, url.pathname);
      if (!match) {
        d.unimplemented.push({ method, path: url.pathname, route, inSpec: false });
        warnOnce(warned, route, "not in GitHub's OpenAPI description");
        return send(404, {
          message: "Not Found",
          documentation_url: "https://docs.github.com/rest",
          status: "404",
        });
      }
      route = `${method === "HEAD" ? "GET" : method} ${match.operation.template}`;

      if (!url.pathname.startsWith("/rate_limit")) {
        if (bucket.used >= bucket.limit) {
          return sendError(
            new HttpError(403, `API rate limit exceeded for ${actorName}.`, {
              documentation_url:
                "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-the-rate-limit",
            }),
          );
        }
        bucket.used += 1;
        counted = true;
      }

      const fault = d.faults.take(method === "HEAD" ? "GET" : method, match.operation.template);
      if (fault?.latencyMs) await new Promise((r) => setTimeout(r, fault.latencyMs));
      if (fault?.status) {
        const secondary = fault.status === 403 || fault.status === 429;
        const headers: Record<string, string> = {};
        if (fault.retryAfter !== undefined) headers["retry-after"] = String(fault.retryAfter);
        const message = secondary
          ? `You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID ${requestId}.`
          : fault.status >= 500
            ? "Server Error"
            : "Injected fault";
        return sendError(new HttpError(fault.status, message, {}, headers));
      }

      if (classify(method, route) === "content") {
        const wait = contentWait(bucketFor(actor, req.socket.remoteAddress ?? "")[0]);
        if (wait !== undefined) {
          return sendError(
            new HttpError(
              403,
              `You have exceeded a secondary rate limit and have been temporarily blocked from content creation. Please retry your request again later. If you reach out to GitHub Support for help, please include the request ID ${requestId}.`,
              {},
              { "retry-after": String(Math.max(wait, 1)) },
            ),
          );
        }
      }

      let body: unknown;
      const hasBody = raw.length > 0;
      if (hasBody) {
        try {
          body = JSON.parse(raw.toString("utf8"));
        } catch {
          return sendError(new HttpError(400, "Problems parsing JSON"));
        }
      }

      const query: Record<string, string | string[]> = {};
      for (const k of new Set(url.searchParams.keys())) {
        const all = url.searchParams.getAll(k);
        query[k] = all.length > 1 ? all : all[0]!;
      }
      let params: Record<string, unknown> = { ...match.params, ...query };
      if (d.validate) {
        const c = d.checker.check(match, query, body, hasBody);
        if (!c.ok) {
          // A path GitHub cannot parse (issue number "abc") is simply not found there.
          const pathParam = match.operation.parameters.some(
            (p) => p.in === "path" && c.error.errors[0]?.field === p.name,
          );
          if (pathParam) return sendError(new HttpError(404, "Not Found"));
          return sendError(new HttpError(c.error.status, c.error.message, { errors: c.error.errors }));
        }
        params = c.params;
      }

      const handler = d.router.find(method, match.operation.template);
      if (!handler) {
        d.unimplemented.push({ method, path: url.pathname, route, inSpec: true });
        warnOnce(warned, route, "in GitHub's OpenAPI description but not implemented");
        return send(404, {
          message: "Not Found (not implemented by the Fleet GitHub emulator)",
          documentation_url: "https://docs.github.com/rest",
          route,
          status: "404",
        });
      }

      try {
        const reply = await requestScope.run({ actor, dropDeliveries: fault?.dropDelivery === true }, () =>
          handler({
            method,
            template: match.operation.template,
            path: url.pathname,
            params,
            query: url.searchParams,
            body,
            actor,
            headers: req.headers,
          }),
        );
        send(reply.status, reply.body, reply.headers);
      } catch (e) {
        if (e instanceof HttpError) return sendError(e);
        process.stderr.write(`[github-emulator] ${route} failed: ${(e as Error).stack ?? e}\n`);
        sendError(new HttpError(500, `Emulator error: ${(e as Error).message}`));
      }
    },
  };
}

function warnOnce(warned: Set<string>, route: string, why: string): void {
  if (warned.has(route)) return;
  warned.add(route);
  process.stderr.write(`[github-emulator] 404 for ${route}: ${why}\n`);
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
