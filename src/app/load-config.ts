import type { Context } from "probot";
import { FLEET_CONFIG_PATH, type FleetConfig, parseFleetConfig } from "../core/config.ts";
import type { ConfigCache } from "./config-cache.ts";

export type ConfigLoad =
  | { ok: true; config: FleetConfig }
  | { ok: false; problems: Array<{ path: string; message: string }> };

export const CONFIG_PATH = FLEET_CONFIG_PATH;

/** The part of Probot's Octokit that reads config files (`@probot/octokit-plugin-config`). */
interface ConfigReader {
  config: {
    get(options: {
      owner: string;
      repo: string;
      path: string;
    }): Promise<{ config: Record<string, unknown>; files: Array<{ config: unknown }> }>;
  };
}

/**
 * Reads `.github/fleet.yml` from the default branch through Probot's config plugin (which follows
 * `_extends`, e.g. the organization's `.github` repository) and validates it. A missing file means all
 * defaults. Webhook handlers and the reconcile both read it here, so both act on the same file.
 */
export async function loadFleetConfig(
  octokit: unknown,
  repo: { owner: string; repo: string },
): Promise<ConfigLoad> {
  let raw: unknown;
  try {
    const { config, files } = await (octokit as ConfigReader).config.get({ ...repo, path: CONFIG_PATH });
    raw = files.some((f) => f.config !== null) ? config : {};
  } catch (error) {
    // The loader throws on YAML syntax errors; its message names the line.
    return { ok: false, problems: [{ path: CONFIG_PATH, message: (error as Error).message }] };
  }
  const parsed = parseFleetConfig(raw ?? {});
  return parsed.ok ? { ok: true, config: parsed.config } : { ok: false, problems: parsed.problems };
}

/** The event's repository's config, through the cache when there is one (see loadFleetConfig). */
export async function loadRepoConfig(context: Context, cache?: ConfigCache): Promise<ConfigLoad> {
  const repo = context.repo();
  const load = () => loadFleetConfig(context.octokit, repo);
  return cache ? cache.get(`${repo.owner}/${repo.repo}`, load) : load();
}
