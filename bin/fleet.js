#!/usr/bin/env node
// The `fleet` command. Commands run built: src/ and the packages its commands load, bundled by esbuild
// (scripts/build-app.mjs) into build/fleet.mjs and its chunks, on plain node. The long-running ones,
// `fleet serve` (the app) and `fleet run` (the worker), build it first when a file it was built from has
// changed (builtIsCurrent), so they never run a stale build, and never tsx's loader, which costs a
// long-running process RSS (~45 MB for the app, 9-17 MB for an idle worker: bench/memory.ts). Every other
// command runs the build when it is current (it starts on ~35% less CPU than the sources) and the
// TypeScript sources otherwise, on node's own type stripping (22.18 and later; src/ keeps to erasable
// syntax, tsconfig's erasableSyntaxOnly), without building: a command after an edit runs the edit.
// tsx's loader runs them on an older node, under node_modules (where node strips no types), and serve
// and run when the build cannot be written (a read-only install).
import { spawn } from "node:child_process";
import * as nodeModule from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";

// V8's compiled code of Fleet's modules and its packages is kept on disk (in the OS's temporary folder)
// between runs: a CLI command starts ~15% sooner (0.75 → 0.64 s of CPU for `fleet tasks --help`).
// Read off the namespace: a node without it (before 22.1) must still start and say what it needs.
nodeModule.enableCompileCache?.();

const argv = process.argv.slice(2);
/** The commands that build first when the build is not current (their `--help` does not: it exits at once). */
const BUILDING_COMMANDS = new Set(["serve", "run"]);
const help = argv.length === 0 || argv.includes("--help") || argv.includes("-h");
if (!help) await withNodeFlags(argv);
let runMain;
if (!help) {
  const { BUILT_APP, builtIsCurrent } = await import("../scripts/build-app.mjs");
  let built = await builtIsCurrent();
  if (!built && BUILDING_COMMANDS.has(argv[0])) {
    // In a process of its own: esbuild built in this one left ~8 MB behind in the app or worker that
    // then runs for days (bench/memory.ts). Its errors and warnings go to this stderr.
    const script = fileURLToPath(new URL("../scripts/build-app.mjs", import.meta.url));
    built = await new Promise((done) => {
      const child = spawn(process.execPath, [script], { stdio: ["ignore", "ignore", "inherit"] });
      child.once("error", () => done(false));
      child.once("exit", (code) => done(code === 0));
    });
    if (!built) process.stderr.write(`fleet ${argv[0]}: running the sources instead of the build\n`);
  }
  if (built) {
    // Stack traces in the logs point into src/, not the bundle.
    process.setSourceMapsEnabled(true);
    try {
      ({ runMain } = await import(pathToFileURL(BUILT_APP).href));
    } catch (error) {
      // A build whose chunks are gone (a clean of build/chunks) is not run; the sources are.
      process.stderr.write(`fleet: the build could not be loaded (${error.message}); running the sources\n`);
    }
  }
}
if (!runMain && nativeTypeScript()) ({ runMain } = await import("../src/cli/main.ts"));
if (!runMain) {
  const { register } = await import("tsx/esm/api");
  register();
  ({ runMain } = await import("../src/cli/main.ts"));
}
await runMain(argv);

/**
 * `fleet serve` and `fleet run` (the long-running commands) run on node flags of their own
 * (scripts/node-flags.mjs), which node takes only at its start: node is started again with them in this
 * same process (execve: the same pid, so a supervisor's signals still reach the app, and nothing is left
 * behind). The command runs as it is where node cannot (before 22.15, on Windows, under the permission
 * model), under a debugger or `--watch`, and with an IPC channel to a parent (execve would close it).
 */
async function withNodeFlags(args) {
  // Set to this pid by the start below (execve keeps the pid): this node is that start.
  const mark = process.env.FLEET_NODE_FLAGS_SET;
  delete process.env.FLEET_NODE_FLAGS_SET;
  if (mark === String(process.pid)) return;
  const { canRestartNode, nodeFlagsFor, nodeFlagsVariable, nodeRefusal } = await import(
    "../scripts/node-flags.mjs"
  );
  if (!canRestartNode()) return;
  if (typeof process.send === "function") return;
  if (process.execArgv.some((a) => /^--(inspect|watch|debug)/.test(a))) return;
  let flags;
  try {
    flags = nodeFlagsFor(args[0]);
  } catch (error) {
    process.stderr.write(`fleet ${args[0]}: ${error.message}\n`);
    process.exit(64);
  }
  if (flags.length === 0) return;
  // Flags given in the variable are tried first (a node that does not know one would stop with "bad
  // option" and exit 9, not naming the variable): one short node start, only when the variable is set.
  const variable = nodeFlagsVariable(args[0]);
  const said = variable && process.env[variable] !== undefined ? await nodeRefusal(flags) : undefined;
  if (said !== undefined) {
    process.stderr.write(
      `fleet ${args[0]}: node refuses the flags in ${variable} (${said}): fix or unset it.\n`,
    );
    process.exit(64);
  }
  try {
    process.execve(
      process.execPath,
      [process.execPath, ...process.execArgv, ...flags, fileURLToPath(import.meta.url), ...args],
      { ...process.env, FLEET_NODE_FLAGS_SET: String(process.pid) },
    );
  } catch (error) {
    // Refused before anything was replaced (the permission model): the command runs as it is.
    process.stderr.write(`fleet ${args[0]}: runs without ${flags.join(" ")} (${error.message})\n`);
  }
}

/**
 * Whether node runs Fleet's TypeScript itself: it strips types (`process.features.typescript`), and
 * not from under node_modules, which it refuses. Its experimental warning, where a node still prints
 * one, is not the command's output.
 */
function nativeTypeScript() {
  if (!process.features.typescript || /[\\/]node_modules[\\/]/.test(fileURLToPath(import.meta.url)))
    return false;
  const emitWarning = process.emitWarning;
  process.emitWarning = (warning, ...rest) => {
    const text = typeof warning === "string" ? warning : warning?.message;
    if (/type stripping/i.test(String(text))) return;
    emitWarning.call(process, warning, ...rest);
  };
  return true;
}
