import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { execa, type Options, type ResultPromise } from "execa";

export const FLEET_BIN = resolve("bin/fleet.js");
export const BIN_PATH = `${resolve("node_modules/.bin")}:${process.env.PATH}`;

export interface CliResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** Environment for the CLI under test: no GitHub token or credentials leak in from the host. */
export function cliEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const k of ["HOME", "TMPDIR", "LANG", "USER"]) if (process.env[k]) env[k] = process.env[k]!;
  return { ...env, PATH: BIN_PATH, ...extra };
}

/** Runs `node bin/fleet.js ...args` to its end. */
export async function fleet(
  args: string[],
  opts: { cwd: string; env: Record<string, string> },
): Promise<CliResult> {
  const r = await execa("node", [FLEET_BIN, ...args], {
    cwd: opts.cwd,
    env: opts.env,
    extendEnv: false,
    reject: false,
    timeout: 120_000,
  });
  return { exitCode: r.exitCode ?? -1, stdout: String(r.stdout), stderr: String(r.stderr) };
}

/** Starts `node bin/fleet.js ...args` in the background (e.g. `run`). */
export function fleetProcess(
  args: string[],
  opts: { cwd: string; env: Record<string, string> } & Options,
): ResultPromise {
  // No SIGKILL 5 s after a SIGTERM (execa's default): a test that stops the CLI checks its own clean
  // stop, which on a loaded machine can take longer; the test's timeout bounds it.
  return execa("node", [FLEET_BIN, ...args], {
    forceKillAfterDelay: false,
    ...opts,
    extendEnv: false,
    reject: false,
  });
}

/** A temporary git repository with one commit on main, plus files. */
export async function tempGitRepo(
  files: Record<string, string> = {},
): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), "fleet-cli-repo-"));
  const git = (...a: string[]) =>
    execa("git", ["-c", "user.name=t", "-c", "user.email=t@e", ...a], { cwd: dir });
  await git("init", "-q", "-b", "main");
  for (const [path, text] of Object.entries({ "README.md": "# r\n", ...files })) {
    await execa("mkdir", ["-p", join(dir, path, "..")]);
    await writeFile(join(dir, path), text);
  }
  await git("add", "-A");
  await git("commit", "-q", "-m", "init");
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

export const tempHome = async (): Promise<{ dir: string; cleanup: () => Promise<void> }> => {
  const dir = await mkdtemp(join(tmpdir(), "fleet-cli-home-"));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
};

/** Maps with at most `limit` calls in flight: each CLI call is a node process. */
export async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<R>,
): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** `fleet run` until the queue is idle, its agents against the scripted model server at `modelUrl`. */
export const scriptedRunArgs = (modelUrl: string): string[] => [
  "run",
  "--until-idle",
  "--poll",
  "300",
  "--model-base-url",
  modelUrl,
  "--agent-env",
  "CLAUDE_CODE_MAX_RETRIES=0",
];

/** The usage each scripted turn of the local-mode tests reports. */
export const SCRIPTED_USAGE = {
  input_tokens: 900,
  output_tokens: 60,
  cache_read_input_tokens: 100,
  cache_creation_input_tokens: 20,
};

/** A git identity for the commits made as the user (`fleet merge`'s merge commits, the tests' own). */
export const USER_GIT_IDENTITY = {
  GIT_AUTHOR_NAME: "Dev",
  GIT_AUTHOR_EMAIL: "dev@example.com",
  GIT_COMMITTER_NAME: "Dev",
  GIT_COMMITTER_EMAIL: "dev@example.com",
};
