#!/usr/bin/env node
// The `fleet` command: Fleet is TypeScript run through tsx's loader (no build step), so the
// installed command and `npm start` run the same source.
import { register } from "tsx/esm/api";

register();
const { runMain } = await import("../src/cli/main.ts");
await runMain(process.argv.slice(2));
