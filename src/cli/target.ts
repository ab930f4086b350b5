import { readFile, stat } from "node:fs/promises";
import { basename, join, resolve } from "node:path";
import { execa } from "execa";
import { defaultFleetConfig, FLEET_CONFIG_PATH, type FleetConfig, parseFleetConfig } from "../core/config.ts";
import type { FleetStateDoc } from "../core/state-doc.ts";
import type { GitHubClient, RepoRef } from "../github/client.ts";
import { type ConfigLoad, readFleetConfig } from "../github/read-config.ts";
import { localDispatcher } from "../queue/dispatcher.ts";
import { openRepository } from "../queue/open-repository.ts";
import type { RepoQueue } from "../queue/repo-queue.ts";
import { effectiveConfig } from "../queue/transitions.ts";
import { createLocalStateStore, defaultFleetHome } from "../state/local-store.ts";
import { createRepoStateStore } from "../state/repo-store.ts";
import type { StateStore } from "../state/store.ts";
import { CliError, UsageError } from "./errors.ts";
import { createLocalGitHub } from "./local-github.ts";

/** Where a command reads and writes: a GitHub repository's state branch, or `$FLEET_HOME`. */
export interface TargetBase {
  /** "owner/name"; `local/<dir name>` in local mode. */
  full: string;
  repo: RepoRef;
  home: string;
  workDir: string;
  store: StateStore;
  /** GitHub, or the local records in local mode (see local-github.ts). */
  octokit: GitHubClient;
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
  octokit: GitHubClient,
  repo: RepoRef,
  store: StateStore,
  where: "github" | "local",
): TargetBase["queue"] {
  const repository = openRepository({
    octokit,
    repo,
    store,
    dispatcherFor: () => localDispatcher,
    trackerIntervalMs: 0,
    tracking: where === "local",
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
    // Loaded only for GitHub targets: local mode does not pay for it.
    const { Octokit } = await import("@octokit/rest");
    const octokit = new Octokit({
      auth: token,
      baseUrl: apiUrl,
      userAgent: "fleet-cli",
      // Failed requests are reported once, by the command, with what to do; not logged per request.
      log: { debug: () => {}, info: () => {}, warn: (m: string) => console.warn(m), error: () => {} },
    });
    const inner = createRepoStateStore({
      octokit: octokit as unknown as GitHubClient,
      owner: repo.owner,
      repo: repo.repo,
    });
    let checked = false;
    // No state branch yet reads as an empty state; make sure that is not a wrong --repo.
    const store: StateStore = {
      ...inner,
      read: async () => {
        const s = await inner.read();
        if (s.version === "" && !checked) {
          checked = true;
          await octokit.rest.repos.get({ ...repo });
        }
        return s;
      },
      update: (m, o) => inner.update(m, o),
    };
    let cached: Promise<{ config: FleetConfig; problems: string[] }> | undefined;
    const fileConfig = () => {
      cached ??= readFleetConfig(octokit, repo).then((r) => ({
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
      octokit,
      token,
      apiUrl,
      fileConfig,
      config: async (doc) => effectiveConfig((await fileConfig()).config, doc),
      queue: cliQueues(octokit as unknown as GitHubClient, repo, store, "github"),
    };
  }

  const isDir = await stat(repoPath).then(
    (s) => s.isDirectory(),
    () => false,
  );
  if (!isDir) throw new UsageError(`--repo-path ${repoPath} is not a directory.`);
  const name = localRepoName(repoPath);
  const store = createLocalStateStore({ home });
  const loadConfig = async (): Promise<ConfigLoad> => parseFleetConfig(await committedFleetYml(repoPath));
  const fileConfig = async () => {
    const r = await loadConfig();
    return { config: r.ok ? r.config : defaultFleetConfig(), problems: problemsOf(r) };
  };
  const repo = { owner: "local", repo: name };
  const octokit = createLocalGitHub({ home, repoPath, store });
  return {
    kind: "local",
    full: `local/${name}`,
    repo,
    home,
    workDir,
    store,
    octokit,
    repoPath,
    fileConfig,
    loadConfig,
    config: async (doc) => effectiveConfig((await fileConfig()).config, doc),
    queue: cliQueues(octokit, repo, store, "local"),
  };
}

const gitAt = (cwd: string, args: string[]) =>
  execa("git", args, { cwd, reject: false, stripFinalNewline: true }).then((r) => ({
    ok: r.exitCode === 0,
    out: String(r.stdout ?? "").trim(),
  }));

/**
 * The branch local mode reads `.github/fleet.yml` from, as GitHub reads it from the default branch:
 * the branch `origin/HEAD` names, else git's `init.defaultBranch`, else `main`, else `master` (each
 * only when this repository has it as a branch), else the branch checked out unless it is a task's
 * `fleet/*` branch. Undefined when none of them is there.
 */
export async function localDefaultBranch(repoPath: string): Promise<string | undefined> {
  const has = async (name: string) =>
    name !== "" &&
    !name.startsWith("fleet/") &&
    (await gitAt(repoPath, ["rev-parse", "--verify", "-q", `refs/heads/${name}^{commit}`])).ok;
  const origin = await gitAt(repoPath, ["symbolic-ref", "-q", "--short", "refs/remotes/origin/HEAD"]);
  const candidates = [
    origin.ok ? origin.out.replace(/^origin\//, "") : "",
    (await gitAt(repoPath, ["config", "--get", "init.defaultBranch"])).out,
    "main",
    "master",
  ];
  for (const name of candidates) if (await has(name)) return name;
  const head = await gitAt(repoPath, ["symbolic-ref", "-q", "--short", "HEAD"]);
  return head.ok && (await has(head.out)) ? head.out : undefined;
}

/**
 * `.github/fleet.yml` as committed on the repository's default branch (`localDefaultBranch`), never
 * as the working tree holds it: the branch checked out may be a task's, which its agent wrote, and the
 * file decides how agents run (`sandbox`, `credentials`, `home`, who may dispatch). An edit takes effect
 * once committed there. "" (the defaults) when that branch has no such file or the repository has no
 * such branch; a folder that is no git repository at all is read as it is.
 */
async function committedFleetYml(repoPath: string): Promise<string> {
  if (!(await gitAt(repoPath, ["rev-parse", "--git-dir"])).ok)
    return readFile(join(repoPath, FLEET_CONFIG_PATH), "utf8").catch(() => "");
  const branch = await localDefaultBranch(repoPath);
  if (!branch) return "";
  const r = await execa("git", ["cat-file", "blob", `refs/heads/${branch}:${FLEET_CONFIG_PATH}`], {
    cwd: repoPath,
    reject: false,
    stripFinalNewline: false,
  });
  return r.exitCode === 0 ? String(r.stdout) : "";
}

/** The name local mode gives the repository at `path`: `local/<name>` is its `full` name. */
export const localRepoName = (path: string): string =>
  basename(path).replace(/[^A-Za-z0-9-_.]/g, "-") || "repo";

/** Where a target is, in words, for messages. */
export const describeTarget = (t: Target): string =>
  t.kind === "github" ? `${t.full} (${t.apiUrl})` : `local state in ${t.home} (repository ${t.repoPath})`;
