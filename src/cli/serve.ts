import { existsSync } from "node:fs";
import { getPrivateKey } from "@probot/get-private-key";
import { run } from "probot";
import { createFleetApp } from "../app/index.ts";
import { type FleetServerOptions, startFleetServer } from "../app/server.ts";
import { doctorLine } from "../core/doctor.ts";
import { appPreflight, publicUrlAfterStart } from "./doctor/preflight.ts";
import { CliError } from "./errors.ts";

/** How long a stopping `fleet serve` lets the deliveries it answered finish. */
const DRAIN_MS = 10_000;
/** And then how long it gives the tracking-comment edits still waiting for their throttle window. */
const FLUSH_MS = 5_000;

const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal"] as const;

/**
 * `fleet serve` / `npm start`: the app on Fleet's one server (startFleetServer), configured as Probot
 * apps are, from the environment and `.env` in the working folder: APP_ID, PRIVATE_KEY or
 * PRIVATE_KEY_PATH, WEBHOOK_SECRET, WEBHOOK_PROXY_URL (smee, local development), GHE_HOST and
 * GHE_PROTOCOL, HOST and PORT (default localhost:3000), LOG_LEVEL. Without an app id or key (and
 * outside production) it serves Probot's setup page instead, which registers the app from app.yml
 * and writes them into `.env`. SIGTERM and SIGINT stop taking deliveries, let those already answered
 * finish (DRAIN_MS) and write the comment edits they left waiting (FLUSH_MS) before exiting;
 * deliveries left unfinished are reported (the reconcile finds their labels again).
 */
export async function serve(): Promise<void> {
  // As Probot's own runner does: .env fills what the environment does not set.
  if (existsSync(".env")) process.loadEnvFile(".env");
  const env = process.env;
  const privateKey = (() => {
    try {
      return getPrivateKey({ env })?.toString();
    } catch (error) {
      throw new CliError(`The app's private key could not be read: ${(error as Error).message}`);
    }
  })();
  if (!env.APP_ID || !privateKey) {
    if (env.NODE_ENV === "production")
      throw new CliError(
        `${env.APP_ID ? "PRIVATE_KEY or PRIVATE_KEY_PATH" : "APP_ID"} is not set: fleet serve needs the GitHub App's id, private key and webhook secret (see the README's "Install it as a GitHub App").`,
      );
    // The one-off registration page; it serves no webhook and runs no Fleet handler.
    await run(createFleetApp());
    return;
  }
  if (!env.WEBHOOK_SECRET)
    throw new CliError(
      "WEBHOOK_SECRET is not set: fleet serve refuses every webhook it cannot verify. Set it to the app's webhook secret.",
    );
  // What would fail later (a wrong key, no FLEET_PUBLIC_URL for dispatch: actions) stops the start now.
  const settings = await appPreflight(env, (line) => process.stderr.write(`fleet serve: ${line}\n`));
  const level = env.LOG_LEVEL as FleetServerOptions["logLevel"];
  const server = await startFleetServer({
    appId: env.APP_ID,
    privateKey,
    webhookSecret: env.WEBHOOK_SECRET,
    ...(env.GHE_HOST ? { baseUrl: `${env.GHE_PROTOCOL || "https"}://${env.GHE_HOST}/api/v3` } : {}),
    host: env.HOST || "localhost",
    port: env.PORT ? Number(env.PORT) : 3000,
    logLevel: level && LOG_LEVELS.includes(level) ? level : "info",
    ...(env.WEBHOOK_PROXY_URL ? { webhookProxyUrl: env.WEBHOOK_PROXY_URL } : {}),
    ...(settings.publicUrl ? { publicUrl: settings.publicUrl } : {}),
  });
  server.probot.log.info(`Fleet is listening on ${server.url} (webhooks at ${server.webhookUrl})`);
  void publicUrlAfterStart(settings).then((c) => c && server.probot.log.warn(doctorLine(c)));
  let stopping = false;
  const stop = async (signal: string) => {
    // A second signal (SIGTERM, then Ctrl-C) does not start a second stop.
    if (stopping) return;
    stopping = true;
    process.stderr.write(`fleet serve: ${signal}, finishing ${server.inFlight} deliveries\n`);
    const left = await server.stop({ drainMs: DRAIN_MS, flushMs: FLUSH_MS });
    if (left > 0)
      process.stderr.write(
        `fleet serve: ${left} deliveries were still being handled after ${DRAIN_MS / 1000} s and are dropped; the next reconcile finds labels and closed issues or PRs among them, not commands or reviews\n`,
      );
    process.exit(0);
  };
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => void stop(signal));
}
