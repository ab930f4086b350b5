import { randomBytes } from "node:crypto";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { parse as parseYaml } from "yaml";
import type {
  CommitSummary,
  GitHub,
  Issue,
  IssueComment,
  PullRequest,
  PullRequestRef,
  RepoRef,
  SubIssue,
} from "../github/port.ts";
import { processEnv, runProgram } from "../process/command-runner.ts";
import { withFileLock } from "../state/file-lock.ts";
import type { StateStore } from "../state/store.ts";
import { committedFile, localDefaultBranch } from "./local-branches.ts";
import {
  LOCAL_ISSUES_KEY,
  type LocalIssue,
  type LocalRepository,
  localIssuesOf,
  nextLocalIssueNumber,
} from "./local-issues.ts";

/**
 * Local mode's GitHub: the `GitHub` port over records on this machine, so the same worker code runs a
 * task end to end without GitHub. Issues are the state document's `local_issues` (`fleet bd create`
 * writes them; `issues.create` files one the same way, e.g. an agent's follow-up); comments, pull
 * requests and sub-issue links are files under `$FLEET_HOME/local/`; a "pull request" is the pushed
 * `fleet/*` branch of the local repository; the repository itself (its branches, commits and
 * committed `.github/fleet.yml`) is read with git, from its default branch, never the working tree.
 *
 * What local mode cannot do is refused with a LocalModeRefusal (status 501) that says what to do
 * instead, never answered with something made up:
 * - issues.update, addLabels, removeLabel: a local issue changes through `fleet bd update` / `fleet bd close`
 * - issues.listLabels, createLabel: local issues take any label at `fleet bd create --labels`
 * - issues.listEvents: nothing records who labeled a local issue
 * - issues.pin: there is no dashboard issue; `fleet tasks` shows the queue
 * - contents.*, git.*: Fleet's state is in `$FLEET_HOME`, not on a branch through the REST API
 * - actions.*: no GitHub Actions; `fleet run` runs tasks, `fleet task <id> log` reads their artifacts
 * - listInstallationRepositories, token: no GitHub App, no token; branches are pushed to the repository
 * Issue listings hold the local issues only (local pull requests are not listed among them); a local
 * pull request has no inline review comments.
 */

/** What local mode cannot do, refused: the message says what to do instead. */
export class LocalModeRefusal extends Error {
  /** Not Implemented: no caller takes it for a missing thing (404) or a conflict (409, 422). */
  readonly status = 501;
  readonly operation: string;
  constructor(
    /** The port's operation, e.g. `issues.update`. */
    operation: string,
    doesNot: string,
    instead: string,
  ) {
    super(`Local mode does not ${doesNot} (${operation}): ${instead}`);
    this.operation = operation;
    this.name = "LocalModeRefusal";
  }
}

const refuse = (operation: string, doesNot: string, instead: string) => async (): Promise<never> => {
  throw new LocalModeRefusal(operation, doesNot, instead);
};

export interface LocalComment {
  id: number;
  body: string;
  createdAt: string;
  updatedAt: string;
}

export interface LocalPull {
  number: number;
  head: string;
  base: string;
  title: string;
  body: string;
  state: "open" | "closed";
  /** Set by `fleet merge`. */
  merged?: boolean;
  url: string;
  /** Opened as a draft (`draft_pr`); cleared when it is marked ready. */
  draft?: boolean;
}

const notFound = (what: string) => Object.assign(new Error(`Not Found: ${what}`), { status: 404 });

async function readJson<T>(path: string, fallback: T): Promise<T> {
  try {
    return JSON.parse(await readFile(path, "utf8")) as T;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return fallback;
    throw error;
  }
}

async function writeJson(path: string, value: unknown): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
  await writeFile(tmp, `${JSON.stringify(value, null, 2)}\n`);
  await rename(tmp, path);
}

export interface LocalGitHubOptions {
  home: string;
  repoPath: string;
  store: StateStore;
  /**
   * Where a new local issue's tasks run and the branch they merge into, as `fleet bd create` records
   * them (the git repository of `repoPath` and its branch now).
   */
  issueRepository: () => Promise<{ repository: LocalRepository; base?: string }>;
  clock?: () => Date;
}

export const localCommentsPath = (home: string, issue: number) =>
  join(home, "local", "issues", `${issue}.comments.json`);
export const localPullsPath = (home: string) => join(home, "local", "pulls.json");

export function readLocalComments(home: string, issue: number): Promise<LocalComment[]> {
  return readJson<LocalComment[]>(localCommentsPath(home, issue), []);
}

export function readLocalPulls(home: string): Promise<LocalPull[]> {
  return readJson<LocalPull[]>(localPullsPath(home), []);
}

// Writes to one $FLEET_HOME are serialized: within this process across the clients of every
// repository `fleet run` serves, and across processes (two `fleet run`s, `fleet merge`, `fleet bd
// close`) by a lock file, so no read-modify-write of pulls.json or a comments file loses another's.
const chains = new Map<string, Promise<unknown>>();
export const localRecordsLockPath = (home: string) => join(home, "local", "records.lock");
function serialFor(home: string): Serial {
  return <T>(fn: () => Promise<T>): Promise<T> => {
    const locked = async () => {
      await mkdir(join(home, "local"), { recursive: true });
      return withFileLock(localRecordsLockPath(home), fn);
    };
    const run = (chains.get(home) ?? Promise.resolve()).then(locked, locked);
    chains.set(
      home,
      run.catch(() => undefined),
    );
    return run;
  };
}

/**
 * Runs `fn` holding $FLEET_HOME's records lock (see serialFor): for a read of pulls.json and a state
 * write that must see each other, as numbering a new local issue after the pull requests does. The
 * lock is always taken before the state store's own, never inside it.
 */
export const withLocalRecords = <T>(home: string, fn: () => Promise<T>): Promise<T> => serialFor(home)(fn);

/** Closes the open local pull request of `branch`, merged or not; false when there is none open. */
function closePull(home: string, branch: string, merged: boolean): Promise<boolean> {
  return serialFor(home)(async () => {
    const pulls = await readLocalPulls(home);
    const pull = pulls.find((x) => x.head === branch && x.state === "open");
    if (!pull) return false;
    pull.state = "closed";
    if (merged) pull.merged = true;
    await writeJson(localPullsPath(home), pulls);
    return true;
  });
}

/** `fleet merge`: the local pull request of `branch` is merged (and closed). */
export const markLocalPullMerged = (home: string, branch: string) => closePull(home, branch, true);
/** `fleet bd close` of a task with an open branch: its local pull request is closed unmerged. */
export const closeLocalPull = (home: string, branch: string) => closePull(home, branch, false);

/** What a branch changes against its base in a local repository, as GitHub counts a pull request's diff. */
export async function localDiffStat(
  repoPath: string,
  base: string,
  head: string,
): Promise<{ files: number; additions: number; deletions: number } | undefined> {
  const r = await runProgram({
    file: "git",
    args: ["diff", "--numstat", `${base}...${head}`, "--"],
    cwd: repoPath,
    env: processEnv(),
  });
  if (r.exitCode !== 0) return undefined;
  const lines = r.stdout.toString("utf8").split("\n").filter(Boolean);
  let additions = 0;
  let deletions = 0;
  for (const line of lines) {
    const [a, d] = line.split("\t");
    additions += Number(a) || 0;
    deletions += Number(d) || 0;
  }
  return { files: lines.length, additions, deletions };
}

type Serial = <T>(fn: () => Promise<T>) => Promise<T>;
const BOT = { login: "fleet[bot]", type: "Bot" };
const LOCAL_USER = { login: "local", type: "User" };

/** The GitHub port over the local records (see the file comment). */
export function createLocalGitHub(opts: LocalGitHubOptions): GitHub {
  const clock = opts.clock ?? (() => new Date());
  const serial = serialFor(opts.home);
  const state = (op: string) =>
    refuse(
      op,
      "keep Fleet's state on a branch through GitHub's contents or git data API",
      "the state is in $FLEET_HOME, read and written by the local state store (`fleet` commands with --local or --home).",
    );
  const actions = (op: string) =>
    refuse(
      op,
      "have GitHub Actions",
      "tasks run on this machine with `fleet run`, and `fleet task <id> log` (plan, knowledge, result) reads a local run's artifacts from $FLEET_HOME.",
    );
  return {
    issues: localIssues(opts, clock, serial),
    pulls: localPulls(opts, serial),
    repos: localRepos(opts),
    contents: { get: state("contents.get"), put: state("contents.put") },
    git: {
      getRef: state("git.getRef"),
      getCommitTree: state("git.getCommitTree"),
      getBlobText: state("git.getBlobText"),
      createTree: state("git.createTree"),
      createCommit: state("git.createCommit"),
      createRef: state("git.createRef"),
      fastForwardRef: state("git.fastForwardRef"),
    },
    actions: {
      listWorkflowRuns: actions("actions.listWorkflowRuns"),
      dispatchWorkflow: actions("actions.dispatchWorkflow"),
      getWorkflowRun: actions("actions.getWorkflowRun"),
      cancelWorkflowRun: actions("actions.cancelWorkflowRun"),
      listRunArtifacts: actions("actions.listRunArtifacts"),
      listArtifacts: actions("actions.listArtifacts"),
      downloadArtifact: actions("actions.downloadArtifact"),
    },
    listInstallationRepositories: refuse(
      "listInstallationRepositories",
      "have a GitHub App installation",
      "`fleet run` serves the repositories the local tasks were created in.",
    ),
    token: refuse(
      "token",
      "hold a GitHub token",
      "task branches are pushed to the local repository directly. To work against GitHub, pass --repo owner/name with GITHUB_TOKEN set.",
    ),
  };
}

/** A local issue as GitHub answers an issue (its number is its id: sub-issue links take it). */
const issueView = (issue: LocalIssue, repoPath: string): Issue => ({
  id: issue.number,
  number: issue.number,
  title: issue.title,
  body: issue.body,
  state: issue.state,
  labels: issue.labels.map((name) => ({ name })),
  user: LOCAL_USER,
  html_url: `${issue.repository?.path ?? repoPath} (issue #${issue.number})`,
  updated_at: issue.createdAt,
});

/** Issues are the state's local issues; comments and sub-issue links are files under `$FLEET_HOME/local/`. */
function localIssues(opts: LocalGitHubOptions, clock: () => Date, serial: Serial): GitHub["issues"] {
  const issuesNow = async () => localIssuesOf((await opts.store.read()).doc);
  const labels = (op: string) =>
    refuse(
      op,
      "change a local issue's labels",
      "labels are given when the issue is created (`fleet bd create --labels`); to switch coder, `fleet bd close` the task and create it again.",
    );
  return {
    async get(_repo, number) {
      const issue = (await issuesNow())[String(number)];
      if (!issue) throw notFound(`local issue #${number}`);
      return issueView(issue, opts.repoPath);
    },
    async listForRepo(_repo, { state, since }) {
      const { repository } = await opts.issueRepository();
      const from = since === undefined ? Number.NEGATIVE_INFINITY : Date.parse(since);
      return Object.values(await issuesNow())
        .filter((i) => !i.repository || i.repository.path === repository.path)
        .filter((i) => (state === "all" || i.state === state) && Date.parse(i.createdAt) >= from)
        .sort((a, b) => a.number - b.number)
        .map((i) => issueView(i, opts.repoPath));
    },
    create: (repo, issue) => fileLocalIssue(opts, repo, issue, clock(), serial),
    update: refuse(
      "issues.update",
      "edit or close an issue through GitHub's API",
      "edit a local issue with `fleet bd update <id>`, close it with `fleet bd close <id>` (which ends its task too).",
    ),
    ...localComments(opts, clock, serial),
    addLabels: labels("issues.addLabels"),
    removeLabel: labels("issues.removeLabel"),
    listLabels: refuse(
      "issues.listLabels",
      "keep a list of the repository's labels",
      "local issues take any label at `fleet bd create --labels`.",
    ),
    createLabel: refuse(
      "issues.createLabel",
      "keep a list of the repository's labels",
      "local issues take any label at `fleet bd create --labels`.",
    ),
    listEvents: refuse(
      "issues.listEvents",
      "record issue events (such as who labeled an issue)",
      "a local issue is the terminal user's; `fleet bd show <id>` shows what is recorded.",
    ),
    ...localSubIssues(opts, serial, issuesNow),
    pin: refuse("issues.pin", "have a dashboard issue to pin", "`fleet tasks` shows the queue."),
  };
}

/**
 * A new local issue, recorded as `fleet bd create` records one (in its repository, numbered after
 * every issue and pull request) but with no task: as on GitHub, an issue is queued only when someone
 * queues it (e.g. a follow-up with `auto_label_discovered`).
 */
async function fileLocalIssue(
  opts: LocalGitHubOptions,
  repo: RepoRef,
  input: { title: string; body: string; labels?: string[] },
  now: Date,
  serial: Serial,
): Promise<Issue> {
  const { repository, base } = await opts.issueRepository();
  let filed: LocalIssue | undefined;
  // Under the records lock a worker opening a pull request holds too: the two never take one number.
  const result = await serial(async () => {
    const pulls = await readLocalPulls(opts.home);
    return opts.store.update(({ doc }) => {
      const number = nextLocalIssueNumber(doc, Math.max(0, ...pulls.map((p) => p.number)));
      filed = {
        number,
        title: input.title,
        body: input.body,
        labels: input.labels ?? [],
        state: "open",
        createdAt: now.toISOString(),
        repository,
        ...(base ? { base } : {}),
      };
      return {
        doc: { ...doc, [LOCAL_ISSUES_KEY]: { ...localIssuesOf(doc), [number]: filed } },
        message: `create local issue #${number} in ${repo.owner}/${repo.repo}`,
      };
    });
  });
  if (!result.applied || !filed)
    throw new Error(`The local issue "${input.title}" was not recorded; try again.`);
  return issueView(filed, opts.repoPath);
}

/** Comments live in `$FLEET_HOME/local/issues/<n>.comments.json`, written by Fleet (a bot) only. */
function localComments(
  opts: LocalGitHubOptions,
  clock: () => Date,
  serial: Serial,
): Pick<GitHub["issues"], "listComments" | "getComment" | "createComment" | "updateComment"> {
  const commentView = (
    issue: number,
    c: LocalComment,
  ): IssueComment & { created_at: string; updated_at: string } => ({
    id: c.id,
    body: c.body,
    user: BOT,
    created_at: c.createdAt,
    updated_at: c.updatedAt,
    html_url: `${localCommentsPath(opts.home, issue)}#${c.id}`,
  });
  const indexPath = join(opts.home, "local", "comment-index.json");
  // Comment ids are unique across issues, as on GitHub; the id says which file holds it.
  const allComments = () => readJson<Record<string, number>>(indexPath, {});
  return {
    async listComments(_repo, issue) {
      const list = await readLocalComments(opts.home, issue);
      return list.map((c) => commentView(issue, c));
    },
    async getComment(_repo, commentId) {
      const issue = (await allComments())[String(commentId)];
      const c =
        issue === undefined
          ? undefined
          : (await readLocalComments(opts.home, issue)).find((x) => x.id === commentId);
      if (issue === undefined || !c) throw notFound(`local comment ${commentId}`);
      return commentView(issue, c);
    },
    createComment: (_repo, issue, body) =>
      serial(async () => {
        const index = await allComments();
        const id = Math.max(0, ...Object.keys(index).map(Number)) + 1;
        const at = clock().toISOString();
        const list = await readLocalComments(opts.home, issue);
        const c: LocalComment = { id, body, createdAt: at, updatedAt: at };
        await writeJson(localCommentsPath(opts.home, issue), [...list, c]);
        await writeJson(indexPath, { ...index, [id]: issue });
        return commentView(issue, c);
      }),
    updateComment: (_repo, commentId, body) =>
      serial(async () => {
        const issue = (await allComments())[String(commentId)];
        if (issue === undefined) throw notFound(`local comment ${commentId}`);
        const list = await readLocalComments(opts.home, issue);
        const c = list.find((x) => x.id === commentId);
        if (!c) throw notFound(`local comment ${commentId}`);
        c.body = body;
        c.updatedAt = clock().toISOString();
        await writeJson(localCommentsPath(opts.home, issue), list);
        return commentView(issue, c);
      }),
  };
}

export const localSubIssuesPath = (home: string) => join(home, "local", "sub-issues.json");

/** Sub-issue links (a split's), by the epic's number, in `$FLEET_HOME/local/sub-issues.json`. */
function localSubIssues(
  opts: LocalGitHubOptions,
  serial: Serial,
  issuesNow: () => Promise<Record<string, LocalIssue>>,
): Pick<GitHub["issues"], "listSubIssues" | "addSubIssue"> {
  const links = () => readJson<Record<string, number[]>>(localSubIssuesPath(opts.home), {});
  return {
    async listSubIssues(_repo, epic) {
      const issues = await issuesNow();
      return ((await links())[String(epic)] ?? []).flatMap((n): SubIssue[] => {
        const i = issues[String(n)];
        return i ? [{ id: i.number, number: i.number, title: i.title, state: i.state }] : [];
      });
    },
    addSubIssue: (_repo, epic, subIssueId) =>
      serial(async () => {
        const issues = await issuesNow();
        if (!issues[String(subIssueId)]) throw notFound(`local issue #${subIssueId}`);
        const all = await links();
        const list = all[String(epic)] ?? [];
        if (list.includes(subIssueId)) return;
        await writeJson(localSubIssuesPath(opts.home), { ...all, [epic]: [...list, subIssueId] });
      }),
  };
}

const gitIn = (repoPath: string, args: string[]) =>
  runProgram({ file: "git", args, cwd: repoPath, env: processEnv() }).then((r) => ({
    ok: r.exitCode === 0,
    out: r.stdout.toString("utf8"),
  }));

/** The person at the terminal owns the local repository; it is read with git, from its default branch. */
function localRepos(opts: LocalGitHubOptions): GitHub["repos"] {
  const commitOf = async (branch: string) => {
    const r = await gitIn(opts.repoPath, ["rev-parse", "--verify", "-q", `refs/heads/${branch}^{commit}`]);
    if (!r.ok) throw notFound(`branch ${branch} in ${opts.repoPath}`);
    return r.out.trim();
  };
  return {
    async get() {
      const branch = await localDefaultBranch(opts.repoPath);
      if (!branch) throw notFound(`a default branch in ${opts.repoPath} (commit a first commit)`);
      return { default_branch: branch, clone_url: opts.repoPath };
    },
    getBranch: async (_repo, branch) => ({ commit: { sha: await commitOf(branch) } }),
    getCollaboratorPermission: async () => ({ permission: "admin", role_name: "admin" }),
    // As committed on the default branch (see local-branches.ts); there is no `_extends` to follow.
    async getConfig(_repo, path) {
      const text = await committedFile(opts.repoPath, path);
      return text === undefined ? undefined : (parseYaml(text) ?? undefined);
    },
    async listCommits(_repo, branch, limit) {
      await commitOf(branch);
      const n = String(Math.max(1, Math.min(100, limit)));
      const r = await gitIn(opts.repoPath, [
        "log",
        "-n",
        n,
        "--format=%H%x1f%cI%x1f%B%x1e",
        `refs/heads/${branch}`,
      ]);
      return r.out
        .split("\x1e")
        .map((entry) => entry.replace(/^\n/, ""))
        .filter(Boolean)
        .map((entry): CommitSummary => {
          const [sha = "", date = "", message = ""] = entry.split("\x1f");
          return { sha, date, message: message.replace(/\n+$/, "") };
        });
    },
  };
}

/** A local "pull request" is a record of the pushed `fleet/*` branch, in `$FLEET_HOME/local/pulls.json`. */
function localPulls(opts: LocalGitHubOptions, serial: Serial): GitHub["pulls"] {
  const refOf = (x: LocalPull): PullRequestRef => ({
    number: x.number,
    html_url: x.url,
    head: { ref: x.head },
  });
  return {
    /** As GitHub answers it: open or closed, merged, and the diff against the base (from git). */
    async get(repo, number): Promise<PullRequest> {
      const pull = (await readLocalPulls(opts.home)).find((x) => x.number === number);
      if (!pull) throw notFound(`local pull ${number}`);
      const diff = await localDiffStat(opts.repoPath, pull.base, pull.head);
      const full = { full_name: `${repo.owner}/${repo.repo}` };
      return {
        number: pull.number,
        state: pull.state,
        merged: pull.merged === true,
        draft: pull.draft === true,
        title: pull.title,
        body: pull.body,
        html_url: pull.url,
        head: { ref: pull.head, repo: full },
        base: { ref: pull.base, repo: full },
        changed_files: diff?.files ?? 0,
        additions: diff?.additions ?? 0,
        deletions: diff?.deletions ?? 0,
      };
    },
    async listForBranch(_repo, branch, state) {
      const pulls = await readLocalPulls(opts.home);
      return pulls
        .filter((x) => x.head === branch && (state === "all" || x.state === state))
        .slice(0, 10)
        .map(refOf);
    },
    create: (_repo, p) =>
      serial(async () => {
        const pulls = await readLocalPulls(opts.home);
        // One series of numbers for issues and pull requests, as on GitHub (see nextLocalIssueNumber).
        const { doc } = await opts.store.read();
        const number = nextLocalIssueNumber(doc, Math.max(0, ...pulls.map((x) => x.number)));
        const pull: LocalPull = {
          number,
          head: p.head,
          base: p.base,
          title: p.title,
          body: p.body,
          state: "open",
          url: `${opts.repoPath} (branch ${p.head})`,
          ...(p.draft ? { draft: true } : {}),
        };
        await writeJson(localPullsPath(opts.home), [...pulls, pull]);
        return refOf(pull);
      }),
    update: (_repo, number, patch) =>
      serial(async () => {
        const pulls = await readLocalPulls(opts.home);
        const pull = pulls.find((x) => x.number === number);
        if (!pull) throw notFound(`local pull ${number}`);
        if (patch.title !== undefined) pull.title = patch.title;
        if (patch.body !== undefined) pull.body = patch.body;
        await writeJson(localPullsPath(opts.home), pulls);
        return refOf(pull);
      }),
    // A local pull request is reviewed in the repository itself: it has no inline review comments.
    listReviewComments: async () => [],
    // Local pull requests are branches of the local repository: agent reviews are a GitHub feature.
    listFiles: async () => [],
    createReview: async () => {
      throw new Error("Agent reviews post to GitHub pull requests; a local pull request has none.");
    },
    markReadyForReview: (_repo, number) =>
      serial(async () => {
        const pulls = await readLocalPulls(opts.home);
        const pull = pulls.find((x) => x.number === number);
        if (!pull) throw notFound(`local pull ${number}`);
        if (!pull.draft) return;
        delete pull.draft;
        await writeJson(localPullsPath(opts.home), pulls);
      }),
  };
}
