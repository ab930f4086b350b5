// Types of scripts/build-app.mjs, for the TypeScript that imports it (bench/memory.ts, the tests).
export function buildApp(options?: {
  entry?: string;
  outfile?: string;
}): Promise<import("esbuild").Message[]>;
/** Where the app is built by default (what `npm start` and `fleet serve` run). */
export const BUILT_APP: string;
/** Whether `outfile` (default BUILT_APP) was built from the sources as they are now. */
export function builtIsCurrent(outfile?: string): Promise<boolean>;
