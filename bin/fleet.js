#!/usr/bin/env node
// The `fleet` command: the TypeScript sources run through tsx's loader (no build step), so the
// command always runs the current source. `npm start` runs the app built instead (scripts/build-app.mjs,
// esbuild, into build/fleet.mjs) on plain node: the loader costs a long-running process ~48 MB of RSS.
import { register } from "tsx/esm/api";

register();
const { runMain } = await import("../src/cli/main.ts");
await runMain(process.argv.slice(2));
