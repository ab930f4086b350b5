import type { GitHubEmulator } from "@fleet/github-emulator";
import { createProbot, ProbotOctokit } from "probot";
import type { OctokitClient } from "../../src/github/octokit-port.ts";

/**
 * An installation client for the emulated app, as a worker gets one, with Octokit's throttling and
 * retries off so every request is counted once. (A plain options object passed to
 * `ProbotOctokit.defaults` is shallow-merged under Probot's own throttle options and turns throttling
 * back on: 1 s between writes, 3 s between comments. A function keeps it off.)
 */
export async function countingBotClient(gh: GitHubEmulator, fullName: string): Promise<OctokitClient> {
  const probot = createProbot({
    overrides: {
      appId: gh.appId,
      privateKey: gh.privateKey,
      baseUrl: gh.url,
      logLevel: "fatal",
      Octokit: ProbotOctokit.defaults((o: Record<string, unknown>) => ({
        ...o,
        throttle: { ...(o.throttle as object), enabled: false },
        retry: { enabled: false },
      })),
    },
  });
  return probot.auth(gh.installationId(fullName));
}
