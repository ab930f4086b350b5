import type { Context } from "probot";
import { FLEET_CONFIG_PATH } from "../core/config.ts";
import type { GitHubClient } from "../github/client.ts";
import { type ConfigLoad, readFleetConfig } from "../github/read-config.ts";
import type { ConfigCache } from "../queue/config-cache.ts";

export type { ConfigLoad } from "../github/read-config.ts";

export const CONFIG_PATH = FLEET_CONFIG_PATH;

/** `.github/fleet.yml` of a repository (see readFleetConfig): the same loader as every other part of Fleet. */
export const loadFleetConfig = (
  octokit: unknown,
  repo: { owner: string; repo: string },
): Promise<ConfigLoad> => readFleetConfig(octokit as GitHubClient, repo);

/** The event's repository's config, through the cache when there is one (see loadFleetConfig). */
export async function loadRepoConfig(context: Context, cache?: ConfigCache): Promise<ConfigLoad> {
  const repo = context.repo();
  const load = () => loadFleetConfig(context.octokit, repo);
  return cache ? cache.get(`${repo.owner}/${repo.repo}`, load) : load();
}
