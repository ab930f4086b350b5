import { type ScriptServer, startAnthropicScriptServer } from "@fleet/model-servers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordLedger } from "../../src/core/state-doc.ts";
import type { Task } from "../../src/core/task.ts";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import { createGitHubStateStore } from "../../src/state/github-store.ts";
import { waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";
import { startTestWorker, type TestWorker } from "../support/worker.ts";

const KEYS: Record<string, string> = {
  KEY_A: "sk-ant-api03-waitAAAAAAAAAAAAAAAAAAAAA",
  KEY_B: "sk-ant-api03-waitBBBBBBBBBBBBBBBBBBBBB",
};

/** App and worker share one clock that the test moves forward: a provider window "reopens" on cue. */
function movableClock() {
  let offsetMs = 0;
  return {
    now: () => new Date(Date.now() + offsetMs),
    advance: (ms: number) => {
      offsetMs += ms;
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("every credential of a coder cooling, through the real app, worker and Claude CLI", () => {
  let h: Harness;
  let model: ScriptServer;
  let worker: TestWorker;
  const clock = movableClock();

  beforeAll(async () => {
    h = await startHarness({
      clock: clock.now,
      files: {
        ".github/fleet.yml": [
          "dispatch: local",
          "max_concurrent: 1",
          "plan_phase: false",
          "timeouts: { run_minutes: 2, stall_minutes: 1 }",
          "coders:",
          "  claude:",
          "    credentials: [KEY_A, KEY_B]",
          "",
        ].join("\n"),
      },
    });
    model = await startAnthropicScriptServer({
      turns: [
        // Both credentials are told to come back in 30 s.
        { error: { status: 429, retryAfter: 30 } },
        { error: { status: 429, retryAfter: 30 } },
        {
          toolUses: [{ name: "Bash", input: { command: "echo waited > WAITED.md", description: "write" } }],
          usage: { input_tokens: 800, output_tokens: 40 },
        },
        { text: "Wrote WAITED.md.", usage: { input_tokens: 850, output_tokens: 10 } },
      ],
    });
    worker = await startTestWorker(h, {
      // The pool is the config's KEY_A and KEY_B alone.
      credentialFor: undefined,
      credentialValue: (name) => KEYS[name],
      modelBaseUrl: model.url,
      clock: clock.now,
    });
  });

  afterAll(async () => {
    await worker?.stop();
    await model?.stop();
    await h?.stop();
  });

  it("waits in rate-limited with the reset on its tracking comment, spins nothing, then resumes by itself to a PR", async () => {
    const issue = await h.newIssue("Add WAITED.md", "Create WAITED.md.");
    await h.label(issue, "fleet:claude");
    const taskOf = async (): Promise<Task | undefined> => (await h.tasks()).find((t) => t.issue === issue);

    const limited = await waitFor(
      "the task to be rate-limited",
      async () => {
        const t = await taskOf();
        return t?.state === "rate-limited" ? t : undefined;
      },
      120_000,
    );
    expect(limited.resetAt).toBeDefined();
    expect(limited.attempts).toBe(1);
    const tracking = await waitFor("the tracking comment to show the reset", async () =>
      h.botComments(issue).find((c) => c.body.includes(`rate-limited until ${limited.resetAt}`)),
    );
    expect(tracking.body).toContain("🧊");

    // Nothing spins while the window is closed: no model request, no run, no state commit. Counted from
    // once the run is over: the state says rate-limited at the run's first end commit, and what the run
    // still writes after it (on a loaded machine, seconds later) is the run's, not a spin.
    await worker.idle();
    await h.settle();
    const main = () => model.requests.filter((r) => r.kind !== "side").length;
    const reader = createGitHubStateStore({
      github: githubOverOctokit(h.mona),
      owner: h.owner,
      repo: h.name,
    });
    const before = { requests: main(), commits: (await reader.history(100)).length };
    expect(before.requests).toBe(2);
    await sleep(3_000); // about fifteen worker polls
    await h.settle();
    expect(main()).toBe(before.requests);
    expect((await reader.history(100)).length).toBe(before.commits);
    expect(worker.running).toBe(0);
    expect((await taskOf())?.state).toBe("rate-limited");
    expect((await taskOf())?.attempts).toBe(1);

    // The window reopens: the task goes back to the queue and runs by itself, on KEY_A again.
    clock.advance(31_000);
    const opened = await waitFor(
      "the PR after the reset",
      async () => {
        const t = await taskOf();
        // The PR's webhook may land before the worker records this attempt's totals (the first
        // attempt's, all 429s, are on the task until then).
        return t?.state === "pr-open" && (t.totals?.usage.input ?? 0) > 0 ? t : undefined;
      },
      120_000,
    );
    expect(opened.attempts).toBe(2);
    expect(opened.totals?.usage.input).toBe(1650);
    expect(opened.totals?.credential).toBe("KEY_A");
    const mains = model.requests.filter((r) => r.kind !== "side");
    expect(mains.length).toBe(4);
    // KEY_A, then KEY_B (both 429), then KEY_A again once its window reopened.
    expect(mains.map((r) => r.headers["x-api-key"])).toEqual([
      KEYS.KEY_A,
      KEYS.KEY_B,
      KEYS.KEY_A,
      KEYS.KEY_A,
    ]);
    const pr = h.gh.pulls(h.full).find((p) => p.number === opened.pr);
    expect(pr?.body).toContain(`Closes #${issue}`);
    const bodies = h
      .botComments(issue)
      .map((c) => c.body)
      .join("\n");
    expect(bodies).not.toContain(KEYS.KEY_A);
    expect(bodies).not.toContain(KEYS.KEY_B);
  }, 300_000);
});

describe("a repository's daily ceiling already spent, through the real app", () => {
  let h: Harness;
  const clock = movableClock();

  beforeAll(async () => {
    h = await startHarness({
      clock: clock.now,
      files: {
        ".github/fleet.yml":
          "dispatch: local\nmax_concurrent: 2\nplan_phase: false\nbudgets:\n  daily_usd: 5\n",
      },
    });
  });

  afterAll(async () => {
    await h?.stop();
  });

  it("holds a newly labeled task with a comment naming the budget and its reset, and starts it by itself when the day turns", async () => {
    // Half a minute before a UTC midnight: the day's budget resets while the test watches.
    const start = clock.now();
    clock.advance(
      Date.UTC(start.getUTCFullYear(), start.getUTCMonth(), start.getUTCDate() + 1) -
        30_000 -
        start.getTime(),
    );
    // The day's spend, as earlier runs left it in the ledger.
    const store = createGitHubStateStore({ github: githubOverOctokit(h.mona), owner: h.owner, repo: h.name });
    const today = clock.now().toISOString().slice(0, 10);
    await store.update(({ doc }) => ({
      doc: recordLedger(doc, { day: today, coder: "claude", costUsd: 5.25, usage: { input: 90_000 } }),
      message: "ledger: earlier runs today",
    }));

    const issue = await h.newIssue("Held by the budget", "Anything.");
    await h.label(issue, "fleet:claude");
    const task = (await h.tasks()).find((t) => t.issue === issue)!;
    expect(task.state).toBe("queued");
    expect(task.lease).toBeUndefined();
    const midnight = new Date(
      Date.UTC(clock.now().getUTCFullYear(), clock.now().getUTCMonth(), clock.now().getUTCDate() + 1),
    ).toISOString();
    expect(task.reason).toBe(
      `held: the daily budget of $5.00 is used ($5.25 spent); it resets at ${midnight}`,
    );
    const tracking = h.botComments(issue).find((c) => c.body.includes("fleet:tracking"));
    expect(tracking?.body).toContain("daily budget of $5.00");
    expect(tracking?.body).toContain(`it resets at ${midnight}`);

    // Redelivered or repeated events keep it held and edit nothing.
    const edits = h.botComments(issue).map((c) => c.body);
    await h.label(issue, "fleet:claude");
    expect((await h.tasks()).find((t) => t.issue === issue)?.state).toBe("queued");
    expect(h.botComments(issue).map((c) => c.body)).toEqual(edits);

    // No event comes: the app's wake-up at the budget's reset runs the pass that dispatches it.
    const started = await waitFor(
      "the task to start after midnight",
      async () => {
        const t = (await h.tasks()).find((t) => t.issue === issue);
        return t?.state === "dispatched" ? t : undefined;
      },
      90_000,
    );
    expect(Date.parse(started.updatedAt)).toBeGreaterThanOrEqual(Date.parse(midnight));
    expect(started.reason).toBeUndefined();
    const shown = await waitFor("the tracking comment to show the start", async () =>
      h.botComments(issue).find((c) => c.body.includes("fleet:tracking") && c.body.includes("dispatched")),
    );
    expect(shown.body).not.toContain("held:");
  }, 120_000);
});
