import { run } from "probot";
import { createFleetApp } from "../app/index.ts";

/**
 * `fleet serve` / `npm start`: Probot's own runner, which reads `.env` (APP_ID, PRIVATE_KEY or
 * PRIVATE_KEY_PATH, WEBHOOK_SECRET, WEBHOOK_PROXY_URL for smee, GHE_HOST) and, without credentials,
 * serves the setup page that registers the app from app.yml.
 */
export async function serve(): Promise<void> {
  await run(createFleetApp());
}
