import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { type ApplicationFunctionOptions, createProbot, type Probot, ProbotOctokit } from "probot";
import SmeeClient from "smee-client";
import { CODER_NAMES } from "../core/coders.ts";
import { githubFetch } from "../github/octokit-port.ts";
import { useCommandHelper } from "../process/command-runner.ts";
import { stopAndDrain } from "./deliveries.ts";
import { createFleetApp, type FleetAppOptions } from "./index.ts";
import type { RepoQueues } from "./repo-queues.ts";
import { createWebhookIntake, pathnameOf } from "./webhook-intake.ts";

export interface FleetServerOptions extends FleetAppOptions {
  appId: number | string;
  privateKey: string;
  webhookSecret: string;
  /** GitHub's API base URL; the emulator's URL offline, GitHub Enterprise's `/api/v3` URL there. */
  baseUrl?: string;
  /** Where to listen (default 127.0.0.1 and a free port). */
  host?: string;
  port?: number;
  logLevel?: "trace" | "debug" | "info" | "warn" | "error" | "fatal";
  /** Octokit's retry and throttling; tests that count requests turn them off. */
  resilient?: boolean;
  /** A smee.io channel that forwards GitHub's deliveries here (local development). */
  webhookProxyUrl?: string;
}

export interface FleetServer {
  url: string;
  webhookUrl: string;
  probot: Probot;
  /** One reconcile pass over the repositories this server has seen (what the periodic timer runs). */
  reconcile(): Promise<void>;
  /** Writes tracking comments still waiting for their throttle window. */
  flush(): Promise<void>;
  /** Deliveries answered and not handled yet. */
  readonly inFlight: number;
  /** Resolves when no webhook is being handled (deliveries are answered on receipt and handled after). */
  idle(): Promise<void>;
  /**
   * Stops taking deliveries, lets the answered ones finish (within `drainMs`, default 10 s), writes the
   * comment edits they left waiting (within `flushMs`, default none) and disarms the queues' timers;
   * resolves with how many deliveries were left unfinished.
   */
  stop(o?: { drainMs?: number; flushMs?: number }): Promise<number>;
}

export const WEBHOOK_PATH = "/api/github/webhooks";
/** How long stopping waits for deliveries already answered to be handled. */
const STOP_DRAIN_MS = 10_000;

/** An HTTP handler as Probot's `addHandler` takes one: true (or a promise of it) when it answered. */
type Handler = Parameters<ApplicationFunctionOptions["addHandler"]>[0];

/**
 * Fleet's one server, for `fleet serve`, the demo and the tests: a node:http server whose webhook
 * intake is Fleet's own (createWebhookIntake: size cap, signature, answer, order, then Probot's
 * `webhooks.receive`), in front of the handlers the app adds (the Actions token exchange) and
 * `/ping`. Probot is the framework for the event handlers, their authenticated Octokit and logging;
 * nothing of it is patched.
 */
export async function startFleetServer(options: FleetServerOptions): Promise<FleetServer> {
  // The app commits state with git for every event: from a small helper, not from this large process.
  useCommandHelper();
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
        // A few requests in flight per installation token; a POST over a connection of its own; a GET
        // on a connection closed under it sent once more.
        request: { ...(instance.request as object), fetch: githubFetch },
      })),
    },
  });
  const intake = createWebhookIntake(probot, { path: WEBHOOK_PATH });
  const handlers: Handler[] = [ping, intake.handle];
  // Listening first: the app's own URL is what dispatched runs are told to exchange their token at.
  let ready = false;
  const server: Server = createServer((req, res) => void route(req, res));
  async function route(req: IncomingMessage, res: ServerResponse) {
    if (!ready) {
      res.writeHead(503, { "content-type": "application/json", "retry-after": "1" });
      return void res.end(JSON.stringify({ message: "Fleet is starting; try again in a second." }));
    }
    try {
      for (const handle of handlers) if (await handle(req, res)) return;
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ message: `Not found: ${req.url}. Webhooks go to ${WEBHOOK_PATH}.` }));
    } catch (error) {
      probot.log.error(error as Error);
      if (!res.headersSent) res.writeHead(500);
      res.end();
    }
  }
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", resolve);
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${options.host && options.host !== "0.0.0.0" && options.host !== "::" ? hostForUrl(options.host) : "127.0.0.1"}:${port}`;
  let queues: RepoQueues | undefined;
  try {
    await probot.load(
      createFleetApp({
        ...options,
        publicUrl: options.publicUrl ?? url,
        onReady: (q) => {
          queues = q;
          options.onReady?.(q);
        },
      }),
      { cwd: process.cwd(), addHandler: (h: Handler) => handlers.push(h) },
    );
  } catch (error) {
    // A setting it refuses (FLEET_STATE_TRANSPORT): nothing is left listening.
    server.close();
    throw error;
  }
  ready = true;
  const smee = options.webhookProxyUrl
    ? startSmee(options.webhookProxyUrl, `${url}${WEBHOOK_PATH}`, probot)
    : undefined;
  return {
    url,
    webhookUrl: `${url}${WEBHOOK_PATH}`,
    probot,
    reconcile: async () => queues?.reconcileKnown(options.knownCoders ?? CODER_NAMES, () => {}),
    flush: async () => queues?.flush(),
    get inFlight() {
      return intake.inFlight;
    },
    idle: () => intake.idle(),
    stop: async ({ drainMs = STOP_DRAIN_MS, flushMs = 0 } = {}) => {
      smee?.close();
      // Stop taking deliveries, then let the ones answered finish: an answered delivery is not dropped.
      const close = () =>
        new Promise<void>((resolve, reject) => {
          if (!server.listening) return resolve();
          server.close((e) => (e ? reject(e) : resolve()));
          // Connections kept alive between requests would hold the close until their idle timeout.
          server.closeIdleConnections();
        });
      const left = await stopAndDrain(
        intake,
        { close, forceClose: () => server.closeAllConnections() },
        drainMs,
      );
      if (flushMs > 0)
        await Promise.race([
          queues?.flush().catch(() => {}),
          new Promise((r) => setTimeout(r, flushMs).unref()),
        ]);
      await queues?.stop();
      return left;
    },
  };
}

/** `GET /ping`: the app is up (what a load balancer's health check asks). */
const ping: Handler = (req, res) => {
  if (req.method !== "GET" || pathnameOf(req.url) !== "/ping") return false;
  res.writeHead(200, { "content-type": "text/plain" });
  res.end("PONG");
  return true;
};

const hostForUrl = (host: string) => (host.includes(":") ? `[${host}]` : host);

/** Forwards the deliveries of a smee.io channel to the local webhook URL (local development). */
function startSmee(source: string, target: string, probot: Probot): { close(): void } {
  const log =
    (level: "info" | "error") =>
    (...args: unknown[]) =>
      probot.log[level](args.map(String).join(" "));
  const client = new SmeeClient({ source, target, logger: { info: log("info"), error: log("error") } });
  client.start().catch((e: Error) => probot.log.error(`smee: ${e.message}`));
  return { close: () => void client.stop().catch(() => {}) };
}
