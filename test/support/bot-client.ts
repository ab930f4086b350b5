import type { GitHubEmulator } from "@fleet/github-emulator";
import { createProbot, ProbotOctokit } from "probot";
import type { OctokitClient } from "../../src/github/octokit-port.ts";

/** An installation client for the emulated app, as a worker or the Action gets one. */
export async function botClient(gh: GitHubEmulator, fullName: string): Promise<OctokitClient> {
  const probot = createProbot({
    overrides: {
      appId: gh.appId,
      privateKey: gh.privateKey,
      baseUrl: gh.url,
      logLevel: "fatal",
      // A function: Probot shallow-merges its own throttle options over an object, turning throttling back on.
      Octokit: ProbotOctokit.defaults((o: Record<string, unknown>) => ({
        ...o,
        throttle: { ...(o.throttle as object), enabled: false },
        retry: { ...(o.retry as object), enabled: false },
      })),
    },
  });
  return probot.auth(gh.installationId(fullName));
}

/** Polls `check` until it returns a value (not undefined/false), or fails after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | false>,
  timeoutMs = 60_000,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 150));
  }
}
