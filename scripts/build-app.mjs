// Builds the app and CLI (src/cli/main.ts) into ES modules for plain node: build/fleet.mjs and the chunks
// it loads as a command needs them (build/chunks/). Every `fleet` command runs it once it is current
// (bin/fleet.js): `fleet serve`, `npm start` and `fleet run` build it first, because tsx's loader costs
// a long-running process RSS (~45 MB for the app: bench/memory.ts); the one-shot commands start on
// ~35% less CPU than from the sources (~0.43 s against ~0.68 s for `fleet tasks`), most of it from
// resolving and loading ~270 package modules one by one.
// `node scripts/build-app.mjs [outfile]` (default build/fleet.mjs). The packages Fleet's commands load
// (execa, zod, yaml and theirs) are bundled; Probot and Octokit stay external, imported from
// node_modules as usual, so the app loads one copy of Octokit (Probot's) and CommonJS Probot loads as
// in development.
import { createHash } from "node:crypto";
import { mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { basename, dirname, extname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
/** Where the app is built by default (what `npm start`, `fleet serve` and `fleet run` run). */
export const BUILT_APP = resolve(root, "build/fleet.mjs");

/** Beside the build: the files it was made from and a digest of their contents (see builtIsCurrent). */
const sourcesOf = (outfile) => `${outfile}.sources.json`;

/**
 * A digest of the files' contents, and of what else shapes the build: this script (its options),
 * package.json and tsconfig.json where there are (esbuild reads them) and esbuild's version;
 * undefined when one of the files is gone.
 */
async function digestOf(files) {
  const hash = createHash("sha256");
  hash.update(`esbuild ${await esbuildVersion()}\0`);
  // The packages bundled are read off the lockfiles (npm rewrites node_modules/.package-lock.json at
  // every install), not file by file: ~300 files a start would cost more than the check saves.
  for (const extra of [
    "package.json",
    "tsconfig.json",
    "package-lock.json",
    "node_modules/.package-lock.json",
  ]) {
    const text = await readFile(resolve(root, extra)).catch(() => "(none)");
    hash.update(`${extra}\0${text.length}\0`).update(text);
  }
  for (const file of [...files, fileURLToPath(import.meta.url)]) {
    const text = await readFile(resolve(root, file)).catch(() => undefined);
    if (text === undefined) return undefined;
    hash.update(`${file}\0${text.length}\0`).update(text);
  }
  return hash.digest("hex");
}

/** An input under node_modules (a bundled package's file): the lockfiles stand for it in the digest. */
const inPackages = (file) => /(^|[\\/])node_modules[\\/]/.test(file);

/** Packages left to node_modules: Probot (CommonJS, with its own Octokit) and Octokit, and what only the demo, the Action or a build loads. */
const EXTERNAL = [
  "probot",
  "@probot/*",
  "@octokit/*",
  "@actions/*",
  "smee-client",
  "@fleet/*",
  "esbuild",
  "tsx",
];

/** The installed esbuild's version, as node would load it from here ("unknown" when it cannot be read). */
async function esbuildVersion() {
  try {
    const main = createRequire(import.meta.url).resolve("esbuild");
    // <package>/lib/main.js
    const manifest = resolve(dirname(main), "..", "package.json");
    return JSON.parse(await readFile(manifest, "utf8")).version ?? "unknown";
  } catch {
    return "unknown";
  }
}

/**
 * Whether `outfile` was built from the sources as they are now: every file the build read has the
 * content it had (a new file can only come in through an import, which changes a file it read). Reads
 * the ~1 MB of sources (a few ms) instead of building (~0.7 s of CPU).
 */
export async function builtIsCurrent(outfile = BUILT_APP) {
  try {
    const recorded = JSON.parse(await readFile(sourcesOf(outfile), "utf8"));
    const output = createHash("sha256")
      .update(await readFile(outfile))
      .digest("hex");
    return (
      typeof recorded.digest === "string" &&
      recorded.output === output &&
      recorded.digest === (await digestOf(recorded.files))
    );
  } catch {
    return false;
  }
}

/**
 * Builds `entry` (relative to the repository, or absolute) into the ES module `outfile`; returns
 * esbuild's warnings. bench/memory.ts builds its child the same way, so it measures what runs.
 */
export async function buildApp({ entry = "src/cli/main.ts", outfile = BUILT_APP } = {}) {
  // Loaded here, not above: bin/fleet.js reads BUILT_APP off this module without loading esbuild.
  const { build, stop } = await import("esbuild");
  const startedMs = Date.now();
  const result = await build({
    absWorkingDir: root,
    // outfile's name and extension (an ES module's: .mjs, or .js where package.json says "module").
    entryPoints: { [basename(outfile, extname(outfile))]: entry },
    outdir: dirname(outfile),
    outExtension: { ".js": extname(outfile) || ".js" },
    // What only some commands load (the worker, the app, Octokit's client) is in chunks of its own,
    // named by their content: builds side by side share the chunks they have in common.
    splitting: true,
    chunkNames: "chunks/[name]-[hash]",
    // Written below, by rename: two starts building at once never run a half-written file.
    write: false,
    bundle: true,
    external: EXTERNAL,
    // The CommonJS packages bundled (cross-spawn, which) call require() for node's modules.
    banner: {
      js: 'import { createRequire as __fleetCreateRequire } from "node:module"; const require = __fleetCreateRequire(import.meta.url);',
    },
    platform: "node",
    // package.json's engines (node >= 22.12).
    target: "node22",
    format: "esm",
    charset: "utf8",
    // Linked: the app's stack traces name src/ files (bin/fleet.js turns source maps on).
    sourcemap: "linked",
    // Without the sources' text: the map still names src/ files and lines (src/ ships with Fleet), and
    // is a third of the size; a process running with it keeps ~13 MB less (bench/memory.ts).
    sourcesContent: false,
    minify: false,
    metafile: true,
    logLevel: "warning",
  }).finally(
    // esbuild's service process would otherwise live (~40 MB) as long as the app it built, or beside
    // the sources run through tsx after a failed build.
    () => stop(),
  );
  await mkdir(resolve(dirname(outfile), "chunks"), { recursive: true });
  // The record of what the build was made from goes before the build does (written again below).
  await rm(sourcesOf(outfile), { force: true });
  // The map first: the module names it.
  for (const file of [...result.outputFiles].sort(
    (a, b) => Number(a.path === outfile) - Number(b.path === outfile),
  )) {
    const partial = `${file.path}.${process.pid}.partial`;
    await writeFile(partial, file.contents);
    await rename(partial, file.path);
  }
  // Last: a build cut short leaves no record that its sources are current. A source written since the
  // build began (a checkout, an editor) may not be in it: no record then, and the next start builds.
  const own = Object.keys(result.metafile.inputs)
    .filter((f) => !inPackages(f))
    .sort();
  const changed = await Promise.all(
    own.map((f) =>
      stat(resolve(root, f)).then(
        (s) => s.mtimeMs >= startedMs - 1,
        () => true,
      ),
    ),
  );
  if (changed.some(Boolean)) return result.warnings;
  // The output's own digest too: when two starts build at once, the record names the build it describes.
  const module = result.outputFiles.find((f) => f.path === outfile);
  const output = createHash("sha256").update(module.contents).digest("hex");
  const partial = `${sourcesOf(outfile)}.${process.pid}.partial`;
  await writeFile(partial, JSON.stringify({ digest: await digestOf(own), output, files: own }));
  await rename(partial, sourcesOf(outfile));
  return result.warnings;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const outfile = process.argv[2] ? resolve(process.argv[2]) : undefined;
  await buildApp({ outfile }).catch((error) => {
    // The message names what failed (esbuild's errors, or the folder that cannot be written).
    process.stderr.write(`could not build the app into ${outfile ?? BUILT_APP}: ${error.message}\n`);
    process.exitCode = 1;
  });
}
