import * as core from "@actions/core";
import { ActionInputError } from "./main.ts";

/** The path the Fleet app serves the exchange on (src/app/actions-token.ts). */
const EXCHANGE_PATH = "/fleet/actions-token";

/**
 * The Fleet app's token for this run: the job's OIDC token (it needs `permissions: id-token: write`)
 * exchanged at `fleetUrl`. The app's token makes the branch and the PR the app's, so the repository's
 * workflows run for them (GitHub starts none for events made with the job's own GITHUB_TOKEN, and
 * by default lets it open no PR). A 409 (the run's id not recorded yet) and a server error or lost
 * connection are tried again for about five minutes; anything else is said as the app said it.
 */
export async function exchangeForAppToken(
  fleetUrl: string,
  taskId: string,
  opts: { audience: string; env: NodeJS.ProcessEnv; sleep?: (ms: number) => Promise<void> },
): Promise<string> {
  if (!opts.env.ACTIONS_ID_TOKEN_REQUEST_URL)
    throw new ActionInputError(
      "The job cannot get an OIDC token: give the workflow `permissions: id-token: write` (Fleet's fleet-task.yml does), or pass a `github-token` instead.",
    );
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const url = `${fleetUrl.replace(/\/+$/, "")}${EXCHANGE_PATH}`;
  let last = "";
  // About 5 minutes in all: after a burst of dispatches on a busy app, a run's id can take more than a
  // minute to be recorded (bench/scale-actions.ts saw it), and the run's lease is 15 minutes.
  for (const wait of [
    0, 1_000, 2_000, 4_000, 8_000, 15_000, 30_000, 30_000, 30_000, 60_000, 60_000, 60_000,
  ]) {
    if (wait) await sleep(wait);
    // A fresh OIDC token each try: they are short-lived.
    const idToken = await core.getIDToken(opts.audience);
    let res: Response;
    try {
      res = await fetch(url, {
        method: "POST",
        headers: { authorization: `Bearer ${idToken}`, "content-type": "application/json" },
        body: JSON.stringify({ task_id: taskId }),
      });
    } catch (error) {
      last = `${url} could not be reached (${(error as Error).message})`;
      continue;
    }
    const body = (await res.json().catch(() => ({}))) as { token?: string; message?: string };
    if (res.ok && body.token) {
      core.setSecret(body.token);
      return body.token;
    }
    last = `the Fleet app answered ${res.status}: ${body.message ?? "no message"}`;
    if (res.status !== 409 && res.status < 500) break;
  }
  throw new ActionInputError(`Fleet could not get the app's token for this run: ${last}`);
}
