import { Octokit } from "@octokit/rest";
import type { GitHubEmulator } from "../../../src/offline/github/index.ts";

/** A plain Octokit acting as a user against the emulator (no retry/throttle plugins). */
export function userOctokit(em: GitHubEmulator, login: string): Octokit {
  return new Octokit({
    baseUrl: em.url,
    auth: em.userToken(login),
    log: { debug() {}, info() {}, warn() {}, error() {} },
  });
}
