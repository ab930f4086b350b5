import type { Context } from "probot";
import { type FleetConfig, parseFleetConfig } from "../core/config.ts";
import type { ConfigCache } from "./config-cache.ts";

export type ConfigLoad =
  | { ok: true; config: FleetConfig }
  | { ok: false; problems: Array<{ path: string; message: string }> };

export const CONFIG_PATH = ".github/fleet.yml";

/**
 * Reads `.github/fleet.yml` through Probot's config loader (which also follows `_extends` and the
 * organization's `.github` repository) and validates it. A missing file means all defaults.
 */
export async function loadRepoConfig(context: Context, cache?: ConfigCache): Promise<ConfigLoad> {
  if (cache) {
    const { owner, repo } = context.repo();
    return cache.get(`${owner}/${repo}`, () => loadRepoConfig(context));
  }
  let raw: unknown;
  try {
    raw = await context.config("fleet.yml");
  } catch (error) {
    // The loader throws on YAML syntax errors; its message names the line.
    return { ok: false, problems: [{ path: CONFIG_PATH, message: (error as Error).message }] };
  }
  const parsed = parseFleetConfig(raw ?? {});
  return parsed.ok ? { ok: true, config: parsed.config } : { ok: false, problems: parsed.problems };
}
