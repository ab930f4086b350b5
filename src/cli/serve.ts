import { run } from "probot";
import type { BackgroundDeliveries } from "../app/deliveries.ts";
import { createFleetApp } from "../app/index.ts";

/** How long a stopping `fleet serve` lets the deliveries it answered finish. */
const DRAIN_MS = 10_000;

/**
 * `fleet serve` / `npm start`: Probot's own runner, which reads `.env` (APP_ID, PRIVATE_KEY or
 * PRIVATE_KEY_PATH, WEBHOOK_SECRET, WEBHOOK_PROXY_URL for smee, GHE_HOST) and, without credentials,
 * serves the setup page that registers the app from app.yml. SIGTERM and SIGINT stop taking
 * deliveries and let those already answered finish (up to DRAIN_MS) before exiting.
 */
export async function serve(): Promise<void> {
  let deliveries: BackgroundDeliveries | undefined;
  const server = await run(
    createFleetApp({
      onReady: (_queues, d) => {
        deliveries = d;
      },
    }),
  );
  // Probot's own SIGINT handler exits as soon as the HTTP server is closed, dropping handlers at work.
  process.removeAllListeners("SIGINT");
  const stop = async (signal: string) => {
    process.stderr.write(`fleet serve: ${signal}, finishing ${deliveries?.inFlight ?? 0} deliveries\n`);
    await server.stop().catch(() => {});
    const drained = deliveries?.idle() ?? Promise.resolve();
    await Promise.race([drained, new Promise((r) => setTimeout(r, DRAIN_MS).unref())]);
    process.exit(0);
  };
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => void stop(signal));
}
