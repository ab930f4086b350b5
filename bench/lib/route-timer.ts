// Per-route latency of the emulator, measured in-process from Node's http diagnostics channels:
// request start -> response finish on the emulator's port, grouped by the OpenAPI route template.
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import type { IncomingMessage, ServerResponse } from "node:http";
import { loadSpec, matchRoute } from "@fleet/github-emulator/openapi-check";

export interface RouteStat {
  route: string;
  count: number;
  totalMs: number;
  meanMs: number;
  p50Ms: number;
  maxMs: number;
}

export async function startRouteTimer(port: number) {
  const spec = await loadSpec();
  const started = new WeakMap<IncomingMessage, number>();
  const samples = new Map<string, number[]>();
  const onStart = (m: unknown) => {
    const { request } = m as { request: IncomingMessage };
    if (request.socket.localPort === port) started.set(request, performance.now());
  };
  const onFinish = (m: unknown) => {
    const { request } = m as { request: IncomingMessage; response: ServerResponse };
    const t0 = started.get(request);
    if (t0 === undefined) return;
    const method = (request.method ?? "GET").toUpperCase();
    const path = new URL(request.url ?? "/", "http://x").pathname;
    const match = path.startsWith("/_emulator/") ? undefined : matchRoute(spec, method, path);
    const route = match ? `${method} ${match.operation.template}` : `${method} ${path}`;
    const list = samples.get(route) ?? [];
    list.push(performance.now() - t0);
    samples.set(route, list);
  };
  subscribe("http.server.request.start", onStart);
  subscribe("http.server.response.finish", onFinish);
  return {
    reset: () => samples.clear(),
    stats(): RouteStat[] {
      return [...samples.entries()]
        .map(([route, xs]) => {
          const s = [...xs].sort((a, b) => a - b);
          const total = s.reduce((a, b) => a + b, 0);
          return {
            route,
            count: s.length,
            totalMs: round(total),
            meanMs: round(total / s.length),
            p50Ms: round(s[Math.floor(s.length / 2)]!),
            maxMs: round(s.at(-1)!),
          };
        })
        .sort((a, b) => b.totalMs - a.totalMs);
    },
    stop() {
      unsubscribe("http.server.request.start", onStart);
      unsubscribe("http.server.response.finish", onFinish);
    },
  };
}

export const round = (x: number, digits = 2) => Number(x.toFixed(digits));
