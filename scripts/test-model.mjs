// The long run of the lifecycle's model-based test: `npm run test:model -- --runs 10000 [--seed N]`.
// `npm test` runs the same test with FLEET_MODEL_RUNS sequences (default 100); this runs as many as
// asked, prints the figure (sequences, time, seed) and how often each path of the lifecycle was
// walked, and exits with vitest's status. A failure prints the shrunk sequence to keep as an example.
import { spawn } from "node:child_process";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const USAGE = "Usage: npm run test:model -- [--runs N] [--seed N]";
let values;
try {
  ({ values } = parseArgs({ options: { runs: { type: "string" }, seed: { type: "string" } } }));
} catch (error) {
  process.stderr.write(`${error.message}\n${USAGE}\n`);
  process.exit(2);
}
const whole = (name, text) => {
  if (text === undefined) return undefined;
  if (!/^-?\d+$/.test(text)) {
    process.stderr.write(`--${name} must be a whole number; got "${text}".\n${USAGE}\n`);
    process.exit(2);
  }
  return text;
};
const runs = whole("runs", values.runs) ?? "10000";
const seed = whole("seed", values.seed);

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const child = spawn(
  process.execPath,
  [resolve(root, "node_modules/vitest/vitest.mjs"), "run", "test/queue/lifecycle-model.test.ts"],
  {
    cwd: root,
    stdio: "inherit",
    env: {
      ...process.env,
      FLEET_MODEL_RUNS: runs,
      FLEET_MODEL_REPORT: "1",
      ...(seed === undefined ? {} : { FLEET_MODEL_SEED: seed }),
    },
  },
);
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
