// Model-based test of the task lifecycle: random sequences of events from every entry point (labels,
// closes, /fleet commands, reviews, merges, A/B runs, splits, workers that finish, crash, stop or lose
// the state, runs whose end's commit is on its way while other events happen, time passing, config changes) against the real queue and state code, with the invariants
// checked after every step (see lifecycle-world.ts). FLEET_MODEL_RUNS sets how many sequences (default
// 100); `npm run test:model -- --runs 10000` runs a long one. A failing sequence is shrunk and printed;
// keep it in lifecycle-examples.test.ts.
import fc from "fast-check";
import { describe, it } from "vitest";
import { CLAIM_MODES, commandArbitrary, PLAN_MODES, tally, World } from "./lifecycle-world.ts";

const RUNS = Number(process.env.FLEET_MODEL_RUNS ?? 100);
const SEED = process.env.FLEET_MODEL_SEED === undefined ? undefined : Number(process.env.FLEET_MODEL_SEED);

describe("the task lifecycle, as a model: random event sequences against the real queue", () => {
  it(`keeps every invariant over ${RUNS} sequences`, async () => {
    const started = Date.now();
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...PLAN_MODES),
        fc.constantFrom(...CLAIM_MODES),
        fc.commands([commandArbitrary], { maxCommands: 80, size: "+1" }),
        async (plan, claims, cmds) => {
          const world = new World(plan, claims);
          await world.learnTasks();
          await fc.asyncModelRun(() => ({ model: {}, real: world }), cmds);
          tally.set("steps, all sequences", (tally.get("steps, all sequences") ?? 0) + world.log.length);
        },
      ),
      {
        numRuns: RUNS,
        ...(SEED === undefined ? {} : { seed: SEED }),
        reporter: (details) => {
          if (details.failed)
            throw new Error(`${fc.defaultReportMessage(details)}\n${String(details.errorInstance)}`);
          if (!process.env.FLEET_MODEL_REPORT) return;
          const paths = [...tally].sort((a, b) => a[0].localeCompare(b[0]));
          console.log(
            [
              `lifecycle model: ${details.numRuns} sequences passed in ${((Date.now() - started) / 1000).toFixed(1)} s (seed ${details.seed})`,
              "paths walked (times):",
              ...paths.map(([what, n]) => `  ${what}: ${n}`),
            ].join("\n"),
          );
        },
      },
    );
  }, 600_000);
});
