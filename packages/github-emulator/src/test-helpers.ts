import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { Octokit } from "@octokit/rest";
import type { GitHubEmulator } from "./index.ts";

/** A plain Octokit acting as a user against the emulator (no retry/throttle plugins). */
export function userOctokit(em: GitHubEmulator, login: string): Octokit {
  return tokenOctokit(em, em.userToken(login));
}

/** A plain Octokit with any token (an installation token, a workflow's GITHUB_TOKEN). */
export function tokenOctokit(em: GitHubEmulator, token: string): Octokit {
  return new Octokit({
    baseUrl: em.url,
    auth: token,
    log: { debug() {}, info() {}, warn() {}, error() {} },
  });
}

const run = promisify(execFile);
const gitEnv = {
  ...process.env,
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_TERMINAL_PROMPT: "0",
};

/**
 * Runs git with a token as GitHub takes it over HTTP (Basic, any user, the token as password) and
 * extra environment; resolves to the exit code and output instead of throwing.
 */
export async function gitAs(
  cwd: string,
  token: string | undefined,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const auth = token
    ? [
        "-c",
        `http.extraHeader=Authorization: Basic ${Buffer.from(`x-access-token:${token}`).toString("base64")}`,
      ]
    : [];
  try {
    const r = await run(
      "git",
      ["-c", "user.name=Test", "-c", "user.email=test@example.invalid", ...auth, ...args],
      { cwd, env: { ...gitEnv, ...env } },
    );
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return {
      code: typeof err.code === "number" ? err.code : 1,
      stdout: err.stdout ?? "",
      stderr: err.stderr ?? "",
    };
  }
}

/** Polls until `check` returns a value (file:// pushes report back through an asynchronous hook). */
export async function eventually<T>(
  check: () => T | undefined | false,
  what: string,
  tries = 200,
): Promise<T> {
  for (let i = 0; i < tries; i++) {
    const v = check();
    if (v) return v;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}
