#!/usr/bin/env node
// The `fleet` command. `fleet serve` (the long-running app) runs built: src/ bundled by esbuild
// (scripts/build-app.mjs, a fraction of a second) into build/fleet.mjs and run on plain node, because
// tsx's loader costs a long-running process ~48 MB of RSS (bench/memory.ts); rebuilt at every start,
// so it is never stale. Every other command runs the TypeScript sources through tsx's loader.
const argv = process.argv.slice(2);
let runMain;
if (argv[0] === "serve") {
  const { buildApp, BUILT_APP } = await import("../scripts/build-app.mjs");
  await buildApp();
  ({ runMain } = await import(BUILT_APP));
} else {
  const { register } = await import("tsx/esm/api");
  register();
  ({ runMain } = await import("../src/cli/main.ts"));
}
await runMain(argv);
