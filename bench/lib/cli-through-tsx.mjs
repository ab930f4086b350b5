// The `fleet` CLI from the TypeScript sources through tsx's loader, as bin/fleet.js runs every command
// it does not build (and `fleet serve` / `fleet run` when the build cannot be written): bench/memory.ts
// measures the worker both ways. Usage: node bench/lib/cli-through-tsx.mjs <fleet arguments>.
import * as nodeModule from "node:module";
import { register } from "tsx/esm/api";

nodeModule.enableCompileCache?.();
register();
const { runMain } = await import("../../src/cli/main.ts");
await runMain(process.argv.slice(2));
