// A stopped app makes no more requests: its reconcile sweep (the safety net for missed webhooks and
// lapsed leases) is disarmed with its wake-up timers, so nothing of it reaches GitHub afterwards.
import { afterAll, describe, expect, it } from "vitest";
import { waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";

const PERIOD_MS = 200;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("the app's reconcile sweep", () => {
  let h: Harness | undefined;
  let appStopped = false;
  // A test that failed before stopping the app stops it here: test files share a process.
  afterAll(async () => {
    await (appStopped ? h?.gh.stop() : h?.stop());
  });

  it("runs every reconcileMs while the app runs, and never after it stopped", async () => {
    h = await startHarness({
      files: { ".github/fleet.yml": "dispatch: local\n" },
      app: { reconcileMs: PERIOD_MS },
    });
    const sweeps = () => h!.gh.counts().byRoute["GET /app/installations"] ?? 0;
    await waitFor("two sweeps", async () => sweeps() >= 2);
    await h.app.stop();
    appStopped = true;
    const mark = h.gh.requests.mark();
    await sleep(PERIOD_MS * 5);
    expect(h.gh.counts({ since: mark }).byRoute).toEqual({});
  });
});
