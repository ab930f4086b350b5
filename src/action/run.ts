import { runner } from "./runner.ts";

// The Action's entry (bundled to dist/index.js): everything happens in the runner.
void runner();
