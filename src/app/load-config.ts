import { FLEET_CONFIG_PATH } from "../core/config.ts";
import type { GitHub, RepoRef } from "../github/port.ts";
import { type ConfigLoad, readFleetConfig } from "../github/read-config.ts";
import type { ConfigCache } from "../queue/config-cache.ts";

export type { ConfigLoad } from "../github/read-config.ts";

export const CONFIG_PATH = FLEET_CONFIG_PATH;

/** `.github/fleet.yml` of a repository (see readFleetConfig): the same loader as every other part of Fleet. */
export const loadFleetConfig = (github: GitHub, repo: RepoRef): Promise<ConfigLoad> =>
  readFleetConfig(github, repo);

/** The event's repository's config, through the cache when there is one (see loadFleetConfig). */
export async function loadRepoConfig(
  github: GitHub,
  repo: RepoRef,
  cache?: ConfigCache,
): Promise<ConfigLoad> {
  const load = () => loadFleetConfig(github, repo);
  return cache ? cache.get(`${repo.owner}/${repo.repo}`, load) : load();
}
