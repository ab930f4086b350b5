// The flags of node (V8's) that the long-running commands run with. V8 sizes its heap for the machine's
// memory: on a large one its young generation grows to 64 MB a semi-space, and its old one to several
// times what a collection left, and it keeps what it grew to. `--optimize-for-size` keeps the heap near
// what it holds (README, "The app's RSS" and the 50-agent rows):
// - `fleet serve`: a burst of 2,000 labels over 100 repositories peaked at ~530 MB resident on a 24 GB
//   machine (~100 MB live); 219 MB with it, 134 MB after, for about twice the app's CPU in the burst;
// - `fleet run`: 50 agents' ends at once peaked at 194-246 MB; 128-133 MB with it, the worker's own CPU
//   20-50% more (Fleet's CPU per running agent 2.1-2.6% -> 2.5-3.2% of a core, local queue).
// Not for one-shot commands: they start ~50% slower with it.
// node takes these flags only at its start, so bin/fleet.js starts node again in the same process.

/** What `fleet serve` runs with unless FLEET_SERVE_NODE_FLAGS says otherwise. */
export const SERVE_NODE_FLAGS = ["--optimize-for-size"];
/** What `fleet run` runs with unless FLEET_RUN_NODE_FLAGS says otherwise. */
export const RUN_NODE_FLAGS = ["--optimize-for-size"];

/**
 * node's flags that run something other than the script, or print and exit (`node --help`), or hold it
 * until a debugger attaches (`--inspect-brk`, `--inspect-wait`: the flags' try, `node <flags> -e ""`,
 * would wait for one too; run `node --inspect-brk bin/fleet.js run` to debug instead).
 */
const MODE_FLAGS =
  /^(-[vhcepi]|--(version|help|check|eval|print|interactive|test|run|watch|v8-options|inspect-brk|inspect-wait)(=|-|$))/;

/** The long-running commands, the variable that sets their node flags, and their own. */
const LONG_RUNNING = {
  serve: { variable: "FLEET_SERVE_NODE_FLAGS", flags: SERVE_NODE_FLAGS },
  run: { variable: "FLEET_RUN_NODE_FLAGS", flags: RUN_NODE_FLAGS },
};

/** Whether this node can start itself again with flags (process.execve; not on Windows, where it throws). */
export function canRestartNode() {
  return typeof process.execve === "function" && process.platform !== "win32";
}

/**
 * What node says refusing `flags` (a flag it does not know), tried with one short start of it
 * (`node <flags> -e ""`); undefined when it takes them. `timeoutMs`: give up waiting then, and say so.
 */
export async function nodeRefusal(flags, timeoutMs) {
  const { spawnSync } = await import("node:child_process");
  const tried = spawnSync(process.execPath, [...flags, "-e", ""], {
    encoding: "utf8",
    ...(timeoutMs ? { timeout: timeoutMs } : {}),
  });
  if (tried.status === 0) return undefined;
  if (tried.error?.code === "ETIMEDOUT")
    return `node did not exit within ${timeoutMs / 1000} s with them (a debugger flag such as --inspect-brk waits for a debugger)`;
  return (tried.stderr || tried.error?.message || `exit ${tried.status}`).trim().split("\n")[0];
}

/** The variable that gives `command`'s node flags (undefined: a command that runs on node's defaults). */
export function nodeFlagsVariable(command) {
  return Object.hasOwn(LONG_RUNNING, command) ? LONG_RUNNING[command].variable : undefined;
}

/**
 * The node flags `command` runs with: for `serve` and `run` (the app and a worker), their variable
 * (FLEET_SERVE_NODE_FLAGS, FLEET_RUN_NODE_FLAGS, from the environment: `.env` is read later, by the
 * command) when it is set, in place of their own (split on spaces; empty for none); for every other
 * command, none. Throws, naming the variable, on a word that is not a flag.
 */
export function nodeFlagsFor(command, env = process.env) {
  const long = Object.hasOwn(LONG_RUNNING, command) ? LONG_RUNNING[command] : undefined;
  if (!long) return [];
  const given = env[long.variable];
  if (given === undefined) return [...long.flags];
  const flags = given.split(/\s+/).filter(Boolean);
  // Flags only: anything else would be taken for the script node runs (a path, a quoted value).
  const notFlag = flags.find((f) => !/^--?[A-Za-z]/.test(f));
  if (notFlag !== undefined)
    throw new Error(
      `${long.variable} has \`${notFlag}\`, which is not a node flag: give node's flags separated by spaces (e.g. --max-old-space-size=512), without quotes, or leave it empty for none.`,
    );
  // Flags that make node do something else than run the command (print its version and exit 0, check
  // or evaluate other code, run tests): a supervisor would see the command end, not fail.
  const other = flags.find((f) => MODE_FLAGS.test(f));
  if (other !== undefined)
    throw new Error(
      `${long.variable} has \`${other}\`, which makes node do something else than run \`fleet ${command}\`: give only flags that tune it (e.g. --max-old-space-size=512).`,
    );
  return flags;
}
