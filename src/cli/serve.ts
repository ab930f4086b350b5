import { run } from "probot";
import { type BackgroundDeliveries, stopAndDrain } from "../app/deliveries.ts";
import { createFleetApp } from "../app/index.ts";
import type { RepoQueues } from "../app/repo-queues.ts";

/** How long a stopping `fleet serve` lets the deliveries it answered finish. */
const DRAIN_MS = 10_000;
/** And then how long it gives the tracking-comment edits still waiting for their throttle window. */
const FLUSH_MS = 5_000;

/**
 * `fleet serve` / `npm start`: Probot's own runner, which reads `.env` (APP_ID, PRIVATE_KEY or
 * PRIVATE_KEY_PATH, WEBHOOK_SECRET, WEBHOOK_PROXY_URL for smee, GHE_HOST) and, without credentials,
 * serves the setup page that registers the app from app.yml. SIGTERM and SIGINT stop taking
 * deliveries, let those already answered finish (DRAIN_MS) and write the comment edits they left
 * waiting (FLUSH_MS) before exiting; deliveries left unfinished are reported (the reconcile finds
 * their labels again).
 */
export async function serve(): Promise<void> {
  let deliveries: BackgroundDeliveries | undefined;
  let queues: RepoQueues | undefined;
  const listenersBefore = new Set(process.listeners("SIGINT"));
  const server = await run(
    createFleetApp({
      onReady: (q, d) => {
        queues = q;
        deliveries = d;
      },
    }),
  );
  // Probot's own SIGINT handler exits as soon as the HTTP server is closed, dropping handlers at work.
  for (const l of process.listeners("SIGINT")) if (!listenersBefore.has(l)) process.off("SIGINT", l);
  let stopping = false;
  const stop = async (signal: string) => {
    // A second signal (SIGTERM, then Ctrl-C) does not start a second stop.
    if (stopping) return;
    stopping = true;
    process.stderr.write(`fleet serve: ${signal}, finishing ${deliveries?.inFlight ?? 0} deliveries\n`);
    const left = await stopAndDrain(deliveries, { close: () => server.stop() }, DRAIN_MS);
    if (left > 0)
      process.stderr.write(
        `fleet serve: ${left} deliveries were still being handled after ${DRAIN_MS / 1000} s and are dropped; the next reconcile finds labels and closed issues or PRs among them, not commands or reviews\n`,
      );
    const flushed = (async () => {
      await queues?.flush().catch(() => {});
      await queues?.stop();
    })().catch(() => {});
    await Promise.race([flushed, new Promise((r) => setTimeout(r, FLUSH_MS).unref())]);
    process.exit(0);
  };
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => void stop(signal));
}
