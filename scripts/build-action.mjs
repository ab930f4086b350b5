// Bundles the Action entry (src/action/run.ts) into one CommonJS file for `runs.using: node24` (action.yml).
// `node scripts/build-action.mjs [outfile]` (default dist/index.js). The output depends only on the
// sources and the locked dependencies, so CI can rebuild it and compare (test/action/dist.test.ts).
import { readFile, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** Builds the bundle to `outfile`; returns esbuild's warnings. */
export async function buildAction(outfile = resolve(root, "dist/index.js")) {
  const result = await build({
    absWorkingDir: root,
    entryPoints: ["src/action/run.ts"],
    outfile,
    bundle: true,
    platform: "node",
    target: "node24",
    format: "cjs",
    legalComments: "eof",
    // CommonJS has no import.meta: its url is this file's, as in the ES module sources.
    define: { "import.meta.url": "__fleet_import_meta_url" },
    banner: { js: 'var __fleet_import_meta_url = require("url").pathToFileURL(__filename).href;' },
    charset: "utf8",
    sourcemap: false,
    minify: false,
    logLevel: "warning",
  });
  // A CommonJS bundle has no import.meta: code that needs it would break on the runner, so refuse.
  const meta = result.warnings.filter((w) => w.text.includes("import.meta"));
  if (meta.length)
    throw new Error(`the bundle uses import.meta: ${meta.map((w) => w.location?.file).join(", ")}`);
  // The repository is "type": "module"; this folder's package.json makes node read the bundle as CommonJS.
  await writeFile(join(dirname(outfile), "package.json"), '{ "type": "commonjs" }\n');
  return result.warnings;
}

/** Files of the built `fresh` folder that differ from (or are missing in) `committed`. */
export async function staleFiles(fresh, committed = resolve(root, "dist")) {
  const stale = [];
  for (const file of ["index.js", "package.json"]) {
    const want = await readFile(join(fresh, file));
    const have = await readFile(join(resolve(root, committed), file)).catch(() => undefined);
    if (!have || !want.equals(have)) stale.push(file);
  }
  return stale;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const out = process.argv[2] ? resolve(process.argv[2]) : undefined;
  await buildAction(out);
}
