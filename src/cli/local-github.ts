import { randomBytes } from "node:crypto";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { execa } from "execa";
import type { GitHubClient } from "../github/client.ts";
import { localIssuesOf, nextLocalIssueNumber } from "../queue/local-issues.ts";
import { withFileLock } from "../state/file-lock.ts";
import type { StateStore } from "../state/store.ts";

/**
 * Local mode has no GitHub: the issues `fleet bd create` writes live in the state document under
 * `local_issues`, and what the worker would post (comments) or open (pull requests) is recorded
 * under `$FLEET_HOME/local/`. This client answers the handful of REST calls the worker makes with
 * those records, so the same worker code runs a task end to end; its "pull request" is the pushed
 * `fleet/*` branch of the local repository.
 */

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
  const r = await execa("git", ["diff", "--numstat", `${base}...${head}`, "--"], {
    cwd: repoPath,
    reject: false,
  });
  if (r.exitCode !== 0) return undefined;
  const lines = String(r.stdout).split("\n").filter(Boolean);
  let additions = 0;
  let deletions = 0;
  for (const line of lines) {
    const [a, d] = line.split("\t");
    additions += Number(a) || 0;
    deletions += Number(d) || 0;
  }
  return { files: lines.length, additions, deletions };
}

/** A GitHubClient over the local records (see the file comment); unknown calls fail loudly. */
export function createLocalGitHub(opts: LocalGitHubOptions): GitHubClient {
  const clock = opts.clock ?? (() => new Date());
  const serial = serialFor(opts.home);
  const rest = {
    issues: localIssues(opts, clock, serial),
    repos: localRepos(opts),
    pulls: localPulls(opts, serial),
  };
  const client = {
    rest,
    // Local lists are never paged: one call returns everything.
    async paginate(fn: (p: unknown) => Promise<{ data: unknown[] }>, params: unknown) {
      return (await fn(params)).data;
    },
    async request(route: string) {
      throw new Error(`local mode has no GitHub API (asked for ${route})`);
    },
  };
  return client as unknown as GitHubClient;
}

type Serial = <T>(fn: () => Promise<T>) => Promise<T>;
const BOT = { login: "fleet[bot]", type: "Bot" };

/** Issues are the state's local issues; comments are files under `$FLEET_HOME/local/issues/`. */
function localIssues(opts: LocalGitHubOptions, clock: () => Date, serial: Serial) {
  const commentView = (issue: number, c: LocalComment) => ({
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
    async get(p: { issue_number: number }) {
      const issue = localIssuesOf((await opts.store.read()).doc)[String(p.issue_number)];
      if (!issue) throw notFound(`local issue #${p.issue_number}`);
      return {
        data: {
          number: issue.number,
          title: issue.title,
          body: issue.body,
          state: issue.state,
          labels: issue.labels.map((name) => ({ name })),
          user: { login: "local", type: "User" },
        },
      };
    },
    async listComments(p: { issue_number: number }) {
      const list = await readLocalComments(opts.home, p.issue_number);
      return { data: list.map((c) => commentView(p.issue_number, c)) };
    },
    async getComment(p: { comment_id: number }) {
      const issue = (await allComments())[String(p.comment_id)];
      const c =
        issue === undefined
          ? undefined
          : (await readLocalComments(opts.home, issue)).find((x) => x.id === p.comment_id);
      if (issue === undefined || !c) throw notFound(`local comment ${p.comment_id}`);
      return { data: commentView(issue, c) };
    },
    createComment: (p: { issue_number: number; body: string }) =>
      serial(async () => {
        const index = await allComments();
        const id = Math.max(0, ...Object.keys(index).map(Number)) + 1;
        const at = clock().toISOString();
        const list = await readLocalComments(opts.home, p.issue_number);
        const c: LocalComment = { id, body: p.body, createdAt: at, updatedAt: at };
        await writeJson(localCommentsPath(opts.home, p.issue_number), [...list, c]);
        await writeJson(indexPath, { ...index, [id]: p.issue_number });
        return { data: commentView(p.issue_number, c) };
      }),
    updateComment: (p: { comment_id: number; body: string }) =>
      serial(async () => {
        const issue = (await allComments())[String(p.comment_id)];
        if (issue === undefined) throw notFound(`local comment ${p.comment_id}`);
        const list = await readLocalComments(opts.home, issue);
        const c = list.find((x) => x.id === p.comment_id);
        if (!c) throw notFound(`local comment ${p.comment_id}`);
        c.body = p.body;
        c.updatedAt = clock().toISOString();
        await writeJson(localCommentsPath(opts.home, issue), list);
        return { data: commentView(issue, c) };
      }),
  };
}

/** The person at the terminal owns the local repository; its files are read from disk. */
function localRepos(opts: LocalGitHubOptions) {
  return {
    async getCollaboratorPermissionLevel() {
      return { data: { permission: "admin", role_name: "admin" } };
    },
    async getContent(p: { path: string }) {
      try {
        const text = await readFile(join(opts.repoPath, p.path));
        return { data: { type: "file", content: text.toString("base64"), encoding: "base64" } };
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") throw notFound(p.path);
        throw error;
      }
    },
  };
}

/** A local "pull request" is a record of the pushed `fleet/*` branch, in `$FLEET_HOME/local/pulls.json`. */
function localPulls(opts: LocalGitHubOptions, serial: Serial) {
  return {
    /** As GitHub answers it: open or closed, merged, and the diff against the base (from git). */
    async get(p: { pull_number: number }) {
      const pull = (await readLocalPulls(opts.home)).find((x) => x.number === p.pull_number);
      if (!pull) throw notFound(`local pull ${p.pull_number}`);
      const diff = await localDiffStat(opts.repoPath, pull.base, pull.head);
      return {
        data: {
          number: pull.number,
          state: pull.state,
          merged: pull.merged === true,
          title: pull.title,
          body: pull.body,
          html_url: pull.url,
          head: { ref: pull.head },
          base: { ref: pull.base },
          changed_files: diff?.files ?? 0,
          additions: diff?.additions ?? 0,
          deletions: diff?.deletions ?? 0,
        },
      };
    },
    async list(p: { head?: string; state?: string }) {
      const branch = p.head?.split(":").pop();
      const pulls = await readLocalPulls(opts.home);
      return {
        data: pulls
          .filter(
            (x) => (!branch || x.head === branch) && (!p.state || p.state === "all" || x.state === p.state),
          )
          .map((x) => ({ ...x, html_url: x.url, head: { ref: x.head } })),
      };
    },
    create: (p: { head: string; base: string; title: string; body?: string }) =>
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
          body: p.body ?? "",
          state: "open",
          url: `${opts.repoPath} (branch ${p.head})`,
        };
        await writeJson(localPullsPath(opts.home), [...pulls, pull]);
        return { data: { number, html_url: pull.url, head: { ref: p.head } } };
      }),
    update: (p: { pull_number: number; title?: string; body?: string }) =>
      serial(async () => {
        const pulls = await readLocalPulls(opts.home);
        const pull = pulls.find((x) => x.number === p.pull_number);
        if (!pull) throw notFound(`local pull ${p.pull_number}`);
        if (p.title !== undefined) pull.title = p.title;
        if (p.body !== undefined) pull.body = p.body;
        await writeJson(localPullsPath(opts.home), pulls);
        return { data: { number: pull.number, html_url: pull.url, head: { ref: pull.head } } };
      }),
  };
}
