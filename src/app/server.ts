import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createNodeMiddleware, createProbot, ProbotOctokit } from "probot";
import { CODER_NAMES } from "../core/coders.ts";
import { type BackgroundDeliveries, stopAndDrain } from "./deliveries.ts";
import { createFleetApp, type FleetAppOptions } from "./index.ts";
import type { RepoQueues } from "./repo-queues.ts";

export interface FleetServerOptions extends FleetAppOptions {
  appId: number | string;
  privateKey: string;
  webhookSecret: string;
  /** GitHub's API base URL; the emulator's URL offline, GitHub Enterprise's `/api/v3` URL there. */
  baseUrl?: string;
  port?: number;
  logLevel?: "trace" | "debug" | "info" | "warn" | "error" | "fatal";
  /** Octokit's retry and throttling; tests that count requests turn them off. */
  resilient?: boolean;
}

export interface FleetServer {
  url: string;
  webhookUrl: string;
  /** One reconcile pass over the repositories this server has seen (what the periodic timer runs). */
  reconcile(): Promise<void>;
  /** Writes tracking comments still waiting for their throttle window. */
  flush(): Promise<void>;
  /** Resolves when no webhook is being handled (deliveries are answered on receipt and handled after). */
  idle(): Promise<void>;
  stop(): Promise<void>;
}

export const WEBHOOK_PATH = "/api/github/webhooks";
/** How long stopping waits for deliveries already answered to be handled. */
const STOP_DRAIN_MS = 10_000;

/**
 * Serves the Probot app on a node:http server. `fleet serve` uses Probot's own runner (which adds
 * smee forwarding and the setup flow); this is for embedding: the demo, tests and benchmarks.
 */
export async function startFleetServer(options: FleetServerOptions): Promise<FleetServer> {
  const resilient = options.resilient ?? true;
  const probot = createProbot({
    overrides: {
      appId: options.appId,
      privateKey: options.privateKey,
      secret: options.webhookSecret,
      baseUrl: options.baseUrl,
      logLevel: options.logLevel ?? "warn",
      // A function, not an object: Probot merges its own throttle options over an object's (shallow
      // Object.assign), which silently turned throttling back on (1 s between writes) with resilient: false.
      Octokit: ProbotOctokit.defaults((instance: Record<string, unknown>) => ({
        ...instance,
        throttle: { ...(instance.throttle as object), enabled: resilient },
        retry: { ...(instance.retry as object), enabled: resilient },
      })),
    },
  });
  // Listening first: the app's own URL is what dispatched runs are told to exchange their token at.
  let middleware: Awaited<ReturnType<typeof createNodeMiddleware>> | undefined;
  const server: Server = createServer((req, res) => {
    if (!middleware) {
      res.writeHead(503, { "content-type": "application/json", "retry-after": "1" });
      return void res.end(JSON.stringify({ message: "Fleet is starting; try again in a second." }));
    }
    void middleware(req, res, () => {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ message: `Not found: ${req.url}. Webhooks go to ${WEBHOOK_PATH}.` }));
    });
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;
  let queues: RepoQueues | undefined;
  let deliveries: BackgroundDeliveries | undefined;
  let appFn: ReturnType<typeof createFleetApp>;
  try {
    appFn = createFleetApp({
      ...options,
      publicUrl: options.publicUrl ?? url,
      onReady: (q, d) => {
        queues = q;
        deliveries = d;
        options.onReady?.(q, d);
      },
    });
  } catch (error) {
    // A setting it refuses (FLEET_STATE_TRANSPORT): nothing is left listening.
    server.close();
    throw error;
  }
  middleware = await createNodeMiddleware(appFn, { probot, webhooksPath: WEBHOOK_PATH });
  return {
    url,
    webhookUrl: `${url}${WEBHOOK_PATH}`,
    reconcile: async () => queues?.reconcileKnown(options.knownCoders ?? CODER_NAMES, () => {}),
    flush: async () => queues?.flush(),
    idle: async () => deliveries?.idle(),
    stop: async () => {
      // Stop taking deliveries, then let the ones answered finish: an answered delivery is not dropped.
      const close = () =>
        new Promise<void>((resolve, reject) => {
          if (!server.listening) return resolve();
          server.close((e) => (e ? reject(e) : resolve()));
          // Connections kept alive between requests would hold the close until their idle timeout.
          server.closeIdleConnections();
        });
      await stopAndDrain(
        deliveries,
        { close, forceClose: () => server.closeAllConnections() },
        STOP_DRAIN_MS,
      );
      await queues?.stop();
    },
  };
}
