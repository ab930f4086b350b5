// Types of scripts/node-flags.mjs, for the TypeScript that imports it (bench/scale-app.ts, the tests).
/** What `fleet serve` runs with unless FLEET_SERVE_NODE_FLAGS says otherwise. */
export const SERVE_NODE_FLAGS: readonly string[];
/** What `fleet run` runs with unless FLEET_RUN_NODE_FLAGS says otherwise. */
export const RUN_NODE_FLAGS: readonly string[];
/** The node flags `command` runs with (FLEET_SERVE_NODE_FLAGS for `serve`, FLEET_RUN_NODE_FLAGS for `run`, when set). */
export function nodeFlagsFor(command: string | undefined, env?: Record<string, string | undefined>): string[];
/** Whether this node can start itself again with flags (process.execve; not on Windows). */
export function canRestartNode(): boolean;
/** What node says refusing `flags`, tried with one short start of it; undefined when it takes them. */
export function nodeRefusal(flags: readonly string[], timeoutMs?: number): Promise<string | undefined>;
/** The variable that gives `command`'s node flags (undefined: a command that runs on node's defaults). */
export function nodeFlagsVariable(command: string | undefined): string | undefined;
