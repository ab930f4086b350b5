import type { AgentAdapter } from "../agents/types.ts";
import { coderFacts } from "../core/coders.ts";
import type { FleetConfig } from "../core/config.ts";
import { findCoderCli, fleetBinDir } from "./sandbox/bubblewrap.ts";

export interface PreflightInput {
  coder: string;
  adapter: Pick<AgentAdapter, "binary">;
  config: FleetConfig;
  /** The worker's PATH, where the agent's CLI is looked up first. */
  path: string | undefined;
  /**
   * Whether the worker holds a value for a credential name; absent when the worker has no credential
   * lookup of its own (the run is handed its credential by its caller).
   */
  hasCredential?: (name: string) => boolean;
  /** The credential the worker picked itself, whatever its name. */
  given?: string;
}

/**
 * What stops the coder from starting on this worker, said before the task's attempt is spent: its CLI
 * found nowhere, or no credential of its pool set. Undefined when it can start. The text names what was
 * looked for and how to provide it.
 */
export async function coderNotReady(v: PreflightInput): Promise<string | undefined> {
  const facts = coderFacts(v.coder);
  const name = facts?.displayName ?? v.coder;
  if (!(await findCoderCli(v.adapter.binary, v.path))) {
    const install = facts?.npmPackage ? ` (\`npm install -g ${facts.npmPackage}\`)` : "";
    return `${name}'s CLI \`${v.adapter.binary}\` was not found on this worker's PATH or in Fleet's install (${fleetBinDir()}): install it${install} where the worker runs, then retry the task (\`fleet retry\`).`;
  }
  const settings = v.config.coders[v.coder];
  // `home: inherit` runs on the worker user's own login files: there may be no variable to find.
  if (!v.hasCredential || settings?.home === "inherit" || v.given) return undefined;
  const names = [...(settings?.credentials ?? facts?.credential.defaults ?? [])];
  if (names.some((n) => v.hasCredential!(n))) return undefined;
  const listed = names.length ? names.map((n) => `\`${n}\``).join(" or ") : "(none configured)";
  return `no credential for ${name}: looked for ${listed} in the worker's environment and found none. Set one (e.g. \`export ${names[0] ?? facts?.credential.env ?? "API_KEY"}=...\`) where \`fleet run\` starts, or name another in \`coders.${v.coder}.credentials\` of .github/fleet.yml, then retry the task (\`fleet retry\`).`;
}
