// The child of bench/memory.ts: reads the state of `octo/<repo>` from the offline GitHub as the app does
// (the repository's state store, default transport), runs a scheduling pass, and prints its memory.
// Only what the app itself would load is imported here. It runs as the app runs under `npm start`:
// built JavaScript on plain node (bench/memory.ts builds it with scripts/build-app.mjs), no TypeScript
// loader.
import { Octokit } from "@octokit/rest";
import { defaultFleetConfig } from "../../src/core/config.ts";
import { scheduleNext } from "../../src/core/scheduler.ts";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import { createRepoStateStore } from "../../src/state/repo-store.ts";

// As bin/fleet.js runs the built app: with its source map on.
process.setSourceMapsEnabled(true);
const [url, token, repo] = process.argv.slice(2) as [string, string, string];
const github = githubOverOctokit(new Octokit({ baseUrl: url, auth: token }));
const store = createRepoStateStore({ github, owner: "octo", repo });
const snap = await store.read();
const tasks = Object.values(snap.doc.tasks);
const decisions = scheduleNext({
  tasks,
  config: { ...defaultFleetConfig(), max_concurrent: 10 },
  now: new Date().toISOString(),
});
globalThis.gc?.();
const m = process.memoryUsage();
console.log(
  JSON.stringify({
    tasks: tasks.length,
    beadsBytes: snap.beads.length,
    decisions: decisions.length,
    transport: process.env.FLEET_STATE_TRANSPORT || "git",
    rssMB: +(m.rss / 2 ** 20).toFixed(1),
    heapUsedMB: +(m.heapUsed / 2 ** 20).toFixed(1),
  }),
);
