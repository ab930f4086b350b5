import { composeConfigGet } from "@probot/octokit-plugin-config";
import { type ConfigProblem, FLEET_CONFIG_PATH, type FleetConfig, parseFleetConfig } from "../core/config.ts";
import type { GitHubClient, RepoRef } from "./client.ts";

/** `.github/fleet.yml` as read: the validated config, or every problem with its key path. */
export type ConfigLoad =
  | { ok: true; config: FleetConfig; warnings?: string[] }
  | { ok: false; problems: ConfigProblem[] };

/**
 * Reads `.github/fleet.yml` from the default branch and validates it; a missing file means every
 * default. The one loader of the app, the workers, the action and the CLI: through Probot's config
 * loader (@probot/octokit-plugin-config), which follows `_extends` (e.g. to the organization's
 * `.github` repository), so every part of Fleet acts on the same settings.
 */
export async function readFleetConfig(octokit: GitHubClient, ref: RepoRef): Promise<ConfigLoad> {
  let raw: unknown;
  try {
    const { config, files } = await composeConfigGet(octokit as never, { ...ref, path: FLEET_CONFIG_PATH });
    raw = files.some((f) => f.config !== null) ? config : {};
  } catch (error) {
    // The loader throws on YAML syntax errors; its message names the line.
    return { ok: false, problems: [{ path: FLEET_CONFIG_PATH, message: (error as Error).message }] };
  }
  return parseFleetConfig(raw ?? {});
}
