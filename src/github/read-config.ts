import { type ConfigProblem, FLEET_CONFIG_PATH, type FleetConfig, parseFleetConfig } from "../core/config.ts";
import type { GitHub, RepoRef } from "./port.ts";

/** `.github/fleet.yml` as read: the validated config, or every problem with its key path. */
export type ConfigLoad =
  | { ok: true; config: FleetConfig; warnings?: string[] }
  | { ok: false; problems: ConfigProblem[] };

/**
 * Reads `.github/fleet.yml` from the default branch and validates it; a missing file means every
 * default. The one loader of the app, the workers, the action and the CLI: through the port's config
 * read (Probot's config loader over GitHub), which follows `_extends` (e.g. to the organization's
 * `.github` repository), so every part of Fleet acts on the same settings.
 */
export async function readFleetConfig(github: GitHub, ref: RepoRef): Promise<ConfigLoad> {
  let raw: unknown;
  try {
    raw = await github.repos.getConfig(ref, FLEET_CONFIG_PATH);
  } catch (error) {
    // The loader throws on YAML syntax errors; its message names the line.
    return { ok: false, problems: [{ path: FLEET_CONFIG_PATH, message: (error as Error).message }] };
  }
  return parseFleetConfig(raw ?? {});
}
