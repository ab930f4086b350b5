import { stat } from "node:fs/promises";
import { basename, join, resolve } from "node:path";
import { execa } from "execa";
import { defaultFleetConfig, FLEET_CONFIG_PATH, type FleetConfig, parseFleetConfig } from "../core/config.ts";
import type { FleetStateDoc } from "../core/state-doc.ts";
import { githubForToken } from "../github/octokit-port.ts";
import type { GitHub, RepoRef } from "../github/port.ts";
import { type ConfigLoad, readFleetConfig } from "../github/read-config.ts";
import { createConfigCache } from "../queue/config-cache.ts";
import { localDispatcher } from "../queue/dispatcher.ts";
import { committedFile } from "../queue/local-branches.ts";
import { createLocalGitHub } from "../queue/local-github.ts";
import { openRepository } from "../queue/open-repository.ts";
import type { RepoQueue } from "../queue/repo-queue.ts";
import { effectiveConfig } from "../queue/transitions.ts";
import { createLocalStateStore, defaultFleetHome } from "../state/local-store.ts";
import { createRepoStateStore } from "../state/repo-store.ts";
import type { StateStore } from "../state/store.ts";
import { CliError, UsageError } from "./errors.ts";
import { baseBranchAt } from "./local-merge.ts";
import { localRepositoryAt } from "./local-repository.ts";

/** Where a command reads and writes: a GitHub repository's state branch, or `$FLEET_HOME`. */
export interface TargetBase {
  /** "owner/name"; `local/<dir name>` in local mode. */
  full: string;
  repo: RepoRef;
  home: string;
  workDir: string;
  store: StateStore;
  /** GitHub, or the local records in local mode (see queue/local-github.ts). */
  github: GitHub;
  /** `.github/fleet.yml` as found (defaults when absent); problems when it is invalid. */
  fileConfig(): Promise<{ config: FleetConfig; problems: string[] }>;
  /** `.github/fleet.yml` read as a worker reads it: from GitHub, or from the repository on disk in local mode. */
  loadConfig?: () => Promise<ConfigLoad>;
  /** File config with the state's `config set` overrides. */
  config(doc: FleetStateDoc): Promise<FleetConfig>;
  /** The repository's queue under `fileConfig`, for the transitions the CLI makes itself (see cliQueues). */
  queue(fileConfig: FleetConfig): RepoQueue;
}

/**
 * The CLI's queues come from openRepository like everyone's: its scheduling passes dispatch to local
 * workers only (with dispatch: actions the app schedules). In local mode it keeps the tracking records,
 * at once since the command exits right after; on GitHub it writes none: it acts as a person, whose
 * comment the app would not recognise as its own (it edits only a bot's), so the app keeps them.
 */
function cliQueues(
  github: GitHub,
  repo: RepoRef,
  store: StateStore,
  where: "github" | "local",
): TargetBase["queue"] {
  const repository = openRepository({
    github,
    repo,
    store,
    dispatcherFor: () => localDispatcher,
    trackerIntervalMs: 0,
    tracking: where === "local",
    local: where === "local",
  });
  return (fileConfig) => repository.queue(fileConfig);
}

export interface GitHubTarget extends TargetBase {
  kind: "github";
  token: string;
  apiUrl: string;
}

export interface LocalTarget extends TargetBase {
  kind: "local";
  repoPath: string;
}

export type Target = GitHubTarget | LocalTarget;

export interface TargetFlags {
  repo?: string;
  "api-url"?: string;
  local?: boolean;
  home?: string;
  "repo-path"?: string;
  "work-dir"?: string;
}

const REPO_NAME = /^([A-Za-z0-9-_.]+)\/([A-Za-z0-9-_.]+)$/;

/** owner/name from a GitHub remote URL (https, ssh or scp-like); undefined for anything else. */
export function repoFromRemoteUrl(url: string): string | undefined {
  const m =
    /^(?:https?:\/\/|ssh:\/\/git@|git@)[^/:]+[/:]([A-Za-z0-9-_.]+)\/([A-Za-z0-9-_.]+?)(?:\.git)?\/?$/.exec(
      url.trim(),
    );
  return m ? `${m[1]}/${m[2]}` : undefined;
}

async function originRepo(cwd: string): Promise<string | undefined> {
  const r = await execa("git", ["remote", "get-url", "origin"], { cwd, reject: false });
  return r.exitCode === 0 ? repoFromRemoteUrl(String(r.stdout)) : undefined;
}

async function githubToken(env: NodeJS.ProcessEnv): Promise<string | undefined> {
  const fromEnv = env.GITHUB_TOKEN || env.GH_TOKEN;
  if (fromEnv) return fromEnv;
  const gh = await execa("gh", ["auth", "token"], { reject: false }).catch(() => undefined);
  const token = gh && gh.exitCode === 0 ? String(gh.stdout).trim() : "";
  return token || undefined;
}

/** How long a local repository's `.github/fleet.yml`, once read, answers the target's next reads. */
const CONFIG_REREAD_MS = 2_000;

const problemsOf = (r: ConfigLoad): string[] =>
  r.ok ? [] : r.problems.map((p) => `${p.path}: ${p.message}`);

/** Resolves the target from the flags: --local, --repo, the origin remote, else local mode. */
export async function resolveTarget(
  flags: TargetFlags,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Target> {
  const home = resolve(flags.home ?? defaultFleetHome(env));
  const workDir = resolve(flags["work-dir"] ?? join(home, "work"));
  const repoPath = resolve(flags["repo-path"] ?? process.cwd());
  if (flags.local && flags.repo) throw new UsageError("--local and --repo exclude each other: pick one.");

  const full = flags.local ? undefined : (flags.repo ?? (await originRepo(repoPath)));
  if (full) {
    const m = REPO_NAME.exec(full);
    if (!m) throw new UsageError(`"${full}" is not a repository name; use --repo owner/name.`);
    const token = await githubToken(env);
    if (!token) {
      throw new CliError(
        `No GitHub token for ${full}: set GITHUB_TOKEN (or run \`gh auth login\`), or use --local for local mode.`,
      );
    }
    const apiUrl = (flags["api-url"] ?? env.GITHUB_API_URL ?? "https://api.github.com").replace(/\/$/, "");
    const repo = { owner: m[1]!, repo: m[2]! };
    const github = await githubForToken({
      token,
      baseUrl: apiUrl,
      userAgent: "fleet-cli",
      // Failed requests are reported once, by the command, with what to do; not logged per request.
      log: { debug: () => {}, info: () => {}, warn: (m: string) => console.warn(m), error: () => {} },
    });
    const inner = createRepoStateStore({
      github,
      owner: repo.owner,
      repo: repo.repo,
    });
    let checked = false;
    // No state branch yet reads as an empty state; make sure that is not a wrong --repo.
    const store: StateStore = {
      ...inner,
      read: async (o) => {
        const s = await inner.read(o);
        if (s.version === "" && !checked) {
          checked = true;
          await github.repos.get(repo);
        }
        return s;
      },
      update: (m, o) => inner.update(m, o),
    };
    let cached: Promise<{ config: FleetConfig; problems: string[] }> | undefined;
    const fileConfig = () => {
      cached ??= readFleetConfig(github, repo).then((r) => ({
        config: r.ok ? r.config : defaultFleetConfig(),
        problems: problemsOf(r),
      }));
      return cached;
    };
    return {
      kind: "github",
      full,
      repo,
      home,
      workDir,
      store,
      github,
      token,
      apiUrl,
      fileConfig,
      config: async (doc) => effectiveConfig((await fileConfig()).config, doc),
      queue: cliQueues(github, repo, store, "github"),
    };
  }

  const isDir = await stat(repoPath).then(
    (s) => s.isDirectory(),
    () => false,
  );
  if (!isDir) throw new UsageError(`--repo-path ${repoPath} is not a directory.`);
  const name = localRepoName(repoPath);
  const store = createLocalStateStore({ home });
  // As committed on the default branch, never the working tree (see local-branches.ts); "" is the defaults.
  // A command asks for it more than once (the file's config, then the effective one), and each read is
  // three git processes: reads within a moment of each other share one.
  const recentReads = createConfigCache({ ttlMs: CONFIG_REREAD_MS });
  const loadConfig = (): Promise<ConfigLoad> =>
    recentReads.get(repoPath, async () =>
      parseFleetConfig((await committedFile(repoPath, FLEET_CONFIG_PATH)) ?? ""),
    );
  const fileConfig = async () => {
    const r = await loadConfig();
    return { config: r.ok ? r.config : defaultFleetConfig(), problems: problemsOf(r) };
  };
  const repo = { owner: "local", repo: name };
  const github = createLocalGitHub({
    home,
    repoPath,
    store,
    // Where a new issue's tasks run, as `fleet bd create` records it (an agent's follow-up is one).
    issueRepository: async () => {
      const repository = await localRepositoryAt(repoPath);
      return { repository, base: await baseBranchAt(repository.path) };
    },
  });
  return {
    kind: "local",
    full: `local/${name}`,
    repo,
    home,
    workDir,
    store,
    github,
    repoPath,
    fileConfig,
    loadConfig,
    config: async (doc) => effectiveConfig((await fileConfig()).config, doc),
    queue: cliQueues(github, repo, store, "local"),
  };
}

/** The name local mode gives the repository at `path`: `local/<name>` is its `full` name. */
export const localRepoName = (path: string): string =>
  basename(path).replace(/[^A-Za-z0-9-_.]/g, "-") || "repo";

/** Where a target is, in words, for messages. */
export const describeTarget = (t: Target): string =>
  t.kind === "github" ? `${t.full} (${t.apiUrl})` : `local state in ${t.home} (repository ${t.repoPath})`;
