import type { RateLimits } from "../rate-limits.ts";
import type { Router } from "../router.ts";

/** The caller's rate limit status (https://docs.github.com/en/rest/rate-limit/rate-limit). */
export function registerRateLimitRoutes(r: Router, limits: RateLimits): void {
  r.on("GET /rate_limit", (ctx) => ({ status: 200, body: limits.status(ctx.actor) }));
}
