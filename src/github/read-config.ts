import { FLEET_CONFIG_PATH, type ParseConfigResult, parseFleetConfig } from "../core/config.ts";
import type { GitHubClient, RepoRef } from "./client.ts";

/**
 * `.github/fleet.yml` from the default branch, validated, for front doors without Probot's loader
 * (workers, the Action, the CLI). A missing file means every default.
 */
export async function readFleetConfig(octokit: GitHubClient, ref: RepoRef): Promise<ParseConfigResult> {
  try {
    const { data } = await octokit.rest.repos.getContent({ ...ref, path: FLEET_CONFIG_PATH });
    if (Array.isArray(data) || data.type !== "file" || !("content" in data)) {
      return { ok: false, problems: [{ path: FLEET_CONFIG_PATH, message: "is not a file" }] };
    }
    return parseFleetConfig(Buffer.from(data.content, "base64").toString("utf8"));
  } catch (error) {
    if ((error as { status?: number }).status === 404) return parseFleetConfig({});
    throw error;
  }
}
