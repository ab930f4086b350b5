import { randomUUID } from "node:crypto";
import { mkdirSync, realpathSync } from "node:fs";
import { access, chmod, lstat, mkdir, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { DEFAULT_STATE_BRANCH as STATE_BRANCH } from "../../state/github-store.ts";
import { safeSegment } from "./artifacts.ts";
import { type GitAuth, GitError, git, gitIn, type WorktreeGitDirs } from "./git.ts";
import { removeTree } from "./remove-tree.ts";

export interface RepoSource {
  /** "owner/name". */
  repo: string;
  /** file:// or https URL; used per command and never stored in the clone's config. */
  cloneUrl: string;
  auth?: GitAuth;
}

export interface Worktree {
  /** The bare cache clone the worktree belongs to. */
  cacheDir: string;
  path: string;
  /** The worktree's admin folder in the cache clone; Fleet's git commands name it (see `gitIn`). */
  gitDir: string;
  branch: string;
  /** The branch the pull request targets. */
  baseBranch: string;
  /** The commit the worktree started from. */
  startSha: string;
  /**
   * True when the task branch already existed on the remote with a change of its own (its tree is not
   * the tree it forked from): an earlier run's work, which setup must treat as the agent's.
   */
  continued: boolean;
  /** True when the task branch already existed on the remote (with a change or not, e.g. a draft's start). */
  pushed: boolean;
  /** What setup made, as gitignore patterns Fleet's git reads (see `recordSetupMade`). */
  excludesFile?: string;
  /** Tracked files setup changed, with their content's hash after setup (left out of a commit while unchanged since). */
  setupChanged?: Map<string, string>;
}

const exists = (p: string) =>
  access(p).then(
    () => true,
    () => false,
  );

// Git commands on one cache clone are serialized: concurrent fetches race on ref locks.
const locks = new Map<string, Promise<unknown>>();
function exclusive<T>(key: string, fn: () => Promise<T>): Promise<T> {
  const run = (locks.get(key) ?? Promise.resolve()).then(fn, fn);
  locks.set(
    key,
    run.catch(() => undefined),
  );
  return run;
}

export const cacheCloneDir = (workDir: string, repo: string): string => {
  const [owner, name] = repo.split("/");
  return join(workDir, "repos", safeSegment(owner ?? ""), `${safeSegment(name ?? "")}.git`);
};

export const worktreePath = (workDir: string, taskId: string): string =>
  join(workDir, "worktrees", safeSegment(taskId), "repo");

/** A failed fetch of a cache clone is tried once more this long after (see syncCacheClone). */
const FETCH_RETRY_MS = 1000;
/** What git says when the server refused a fetch or the repository is not there: asking again will not help. */
const REFUSED_FETCH =
  /Authentication failed|could not read (Username|Password)|Repository not found|does not appear to be a git repository|returned error: (401|403|404)|Permission denied|invalid refspec|not our ref/i;

/**
 * A fetch of a cache clone waiting for its turn on the clone: the tasks that ask for one meanwhile
 * share it, and its outcome (tasks starting together fetched one after another, each the same refs).
 * Once it has begun, the next ask gets a fetch of its own: what it needs may have been pushed after
 * this one began.
 */
const queuedSyncs = new Map<string, Promise<{ dir: string; defaultBranch: string }>>();

/** The bare cache clone for a repository, created on first use and fetched for every use. */
export function syncCacheClone(
  workDir: string,
  src: RepoSource,
): Promise<{ dir: string; defaultBranch: string }> {
  const dir = cacheCloneDir(workDir, src.repo);
  // Shared only with the same credentials (a fetch with another's token could see what this one may not).
  const key = `${dir}\0${src.cloneUrl}\0${src.auth?.username ?? ""}\0${src.auth?.token ?? ""}`;
  const queued = queuedSyncs.get(key);
  if (queued) return queued;
  const sync = exclusive(dir, async () => {
    // Begun: a later ask gets a fetch of its own.
    if (queuedSyncs.get(key) === sync) queuedSyncs.delete(key);
    try {
      return await fetchCacheClone(dir, workDir, src);
    } catch (error) {
      // Every task that joined this fetch would fail with it: a moment's failure (the network, the
      // server) gets one more try a second later; a refusal (credentials, no such repository) does not.
      if (!(error instanceof GitError) || REFUSED_FETCH.test(error.stderr)) throw error;
      await new Promise((r) => setTimeout(r, FETCH_RETRY_MS));
      return await fetchCacheClone(dir, workDir, src).catch((again: Error) => {
        throw new Error(`${again.message} (the first try: ${error.message})`, { cause: again });
      });
    }
  });
  queuedSyncs.set(key, sync);
  return sync;
}

/** Fetches the cache clone (made on first use) and asks the remote for its default branch; on the clone's lock. */
async function fetchCacheClone(
  dir: string,
  workDir: string,
  src: RepoSource,
): Promise<{ dir: string; defaultBranch: string }> {
  if (!(await exists(join(dir, "HEAD")))) {
    await mkdir(dir, { recursive: true });
    await git(["init", "--bare", "-q", dir], { cwd: workDir });
  }
  // Fleet's state branch stays out: the agent's sandbox shows this clone, and the state is Fleet's.
  await git(
    [
      "fetch",
      "--prune",
      "--no-tags",
      "-q",
      src.cloneUrl,
      "+refs/heads/*:refs/remotes/origin/*",
      `^refs/heads/${STATE_BRANCH}`,
    ],
    { cwd: dir, auth: src.auth },
  );
  await git(["update-ref", "-d", `refs/remotes/origin/${STATE_BRANCH}`], { cwd: dir, okCodes: [1] });
  const head = await git(["ls-remote", "--symref", src.cloneUrl, "HEAD"], { cwd: dir, auth: src.auth });
  const m = /^ref: refs\/heads\/(\S+)\s+HEAD/m.exec(head.stdout);
  return { dir, defaultBranch: m?.[1] ?? "main" };
}

/**
 * The commits the cache clone's remote-tracking branches `names` point at (absent when a branch is not
 * there), in one `for-each-ref`. Refnames cannot hold glob characters (git-check-ref-format), so each
 * pattern matches its branch literally, or refs below it, which are left out.
 */
async function remoteBranchShas(cacheDir: string, names: string[]): Promise<Map<string, string>> {
  const refs = names.map((n) => `refs/remotes/origin/${n}`);
  const r = await git(
    [
      "for-each-ref",
      "--format=%(refname)%00%(objecttype)%00%(objectname)%00%(*objecttype)%00%(*objectname)",
      ...refs,
    ],
    { cwd: cacheDir },
  );
  const found = new Map<string, string>();
  for (const line of r.stdout.split("\n")) {
    const [ref, type, sha, peeledType, peeled] = line.split("\0");
    const i = refs.indexOf(ref ?? "");
    if (i < 0) continue;
    // A branch at an annotated tag names the tag's commit (as `^{commit}` would).
    const commit = type === "commit" ? sha : peeledType === "commit" ? peeled : undefined;
    if (commit) found.set(names[i]!, commit);
  }
  return found;
}

/** The cache clone's linked worktrees, read from their admin folders (gitrepository-layout(5): `worktrees/<id>/gitdir`, `HEAD`). */
async function linkedWorktrees(
  cacheDir: string,
): Promise<Array<{ admin: string; checkout: string | undefined; head: string }>> {
  const root = join(cacheDir, "worktrees");
  const names = await readdir(root).catch(() => [] as string[]);
  return Promise.all(
    names.map(async (name) => {
      const admin = join(root, name);
      const head = (await readFile(join(admin, "HEAD"), "utf8").catch(() => "")).trim();
      return { admin, checkout: await registeredCheckout(admin), head };
    }),
  );
}

/**
 * Removes whatever a crashed earlier run left: registered worktrees of the same branch or path, a stray
 * directory at the path, and the registrations of checkouts that are gone. The registrations are read
 * from the admin folders, and only those are dropped: never `git worktree prune`, which also drops a
 * running task's whose agent deleted its `.git` link, and whose admin folder's name (every checkout is
 * `…/repo`) the next `worktree add` would then give to another task.
 */
async function clearStale(cacheDir: string, path: string, branch: string): Promise<void> {
  for (const entry of await linkedWorktrees(cacheDir)) {
    if (!entry.checkout || !(await exists(entry.checkout))) await removeTree(entry.admin);
    else if (entry.checkout === path || entry.head === `ref: refs/heads/${branch}`)
      await discardCheckout(cacheDir, entry.checkout, entry.admin);
  }
  await removeTree(path);
}

/**
 * A checkout at `path` that cannot be used: unregistered and removed, on the clone's lock. What a
 * refused `worktree remove` leaves registered goes with its admin folder (`admin`, else the one that
 * names `path`).
 */
async function discardCheckout(cacheDir: string, path: string, admin?: string): Promise<void> {
  await git(["worktree", "remove", "--force", "--force", path], { cwd: cacheDir, okCodes: [128] }).catch(
    () => undefined,
  );
  await removeTree(path);
  const left = admin ?? (await adminDirOf(cacheDir, path).catch(() => undefined));
  if (left && (await registers(left, path))) await removeTree(left);
}

/**
 * The checkout an admin folder registers: its `gitdir` file names the checkout's `.git` file, absolute
 * (relative to the admin folder with worktree.useRelativePaths). Undefined when it names none.
 */
async function registeredCheckout(admin: string): Promise<string | undefined> {
  const link = (await readFile(join(admin, "gitdir"), "utf8").catch(() => "")).trim();
  const gitLink = link ? resolve(admin, link) : undefined;
  return gitLink && basename(gitLink) === ".git" ? dirname(gitLink) : undefined;
}

/** Whether the admin folder `admin` is the registration of the checkout at `path`. */
const registers = async (admin: string, path: string): Promise<boolean> =>
  (await registeredCheckout(admin)) === path;

/** Spare checkouts kept per cache clone: a new task reuses one instead of writing every file again. */
const MAX_SPARES = 4;
/** A folder beside the cache clone `<name>.git`: `<name>.<suffix>`. */
const besideClone = (cacheDir: string, suffix: string) => `${cacheDir.replace(/\.git$/, "")}.${suffix}`;
const sparesDir = (cacheDir: string) => besideClone(cacheDir, "spares2");
// `.spares` held checkouts kept before their submodule folders were emptied (see emptyGitlinkFolders).
const legacySparesDir = (cacheDir: string) => besideClone(cacheDir, "spares");
const legacyCleared = new Set<string>();

/** A spare checkout of this cache clone, if one is left (its folder is taken out of the spare pool). */
async function takeSpare(cacheDir: string): Promise<string | undefined> {
  if (!legacyCleared.has(cacheDir)) {
    // Their registrations go at the next start (clearStale: the checkouts are gone).
    await removeTree(legacySparesDir(cacheDir));
    legacyCleared.add(cacheDir);
  }
  const names = await readdir(sparesDir(cacheDir)).catch(() => [] as string[]);
  for (const name of names) {
    const dir = join(sparesDir(cacheDir), name);
    if (await exists(join(dir, ".git"))) return dir;
    await removeTree(dir);
  }
  return undefined;
}

/**
 * A fresh worktree on `branch`: continuing the remote branch if it exists, else from the default branch.
 * A spare checkout left by an earlier task (cleaned when that task ended) is moved into place and
 * switched to the branch with a forced checkout, which rewrites only the files that differ: in a large
 * repository that is a fraction of checking every file out again.
 *
 * Only what changes the cache clone's worktree registrations or reads its remote refs holds the clone's
 * lock (tasks starting together wait on it); the spare's checkout touches its own files, its own admin
 * folder and its own branch, and start from the commit read under the lock, not from a ref a
 * fetch could move meanwhile.
 */
export async function addWorktree(
  workDir: string,
  src: RepoSource,
  taskId: string,
  branch: string,
): Promise<Worktree> {
  // Git records a checkout by its real path: the admin folders are matched against it (see registers).
  // (At once, without awaiting: tasks starting together still meet at one queued fetch.)
  mkdirSync(workDir, { recursive: true });
  const realWorkDir = realpathSync(workDir);
  const { dir: cacheDir, defaultBranch } = await syncCacheClone(realWorkDir, src);
  const path = worktreePath(realWorkDir, taskId);
  const placed = await exclusive(cacheDir, async () => {
    await clearStale(cacheDir, path, branch);
    // The agent is the worker's uid on the host: a setuid program it writes in the checkout (or the
    // notes beside it) is the worker's, and no other local user may reach it to run it.
    await mkdir(join(path, ".."), { recursive: true, mode: 0o700 });
    await chmod(join(path, ".."), 0o700);
    const shas = await remoteBranchShas(cacheDir, [branch, defaultBranch]);
    const existing = shas.get(branch);
    const startSha = existing ?? shas.get(defaultBranch);
    if (!startSha)
      throw new Error(
        `${src.repo} has no branch "${defaultBranch}" to start from; push a first commit, then retry.`,
      );
    const continued = existing !== undefined && !(await treeAsForked(cacheDir, branch, defaultBranch));
    const spare = await takeSpare(cacheDir);
    if (spare) {
      try {
        await git(["worktree", "move", spare, path], { cwd: cacheDir });
        return { startSha, existing, continued, spare: true };
      } catch {
        await discardCheckout(cacheDir, path);
        await removeTree(spare);
      }
    }
    await git(["worktree", "add", "-q", "--force", "-B", branch, path, startSha], { cwd: cacheDir });
    return { startSha, existing, continued, spare: false };
  });
  let gitDir = await adminDirOf(cacheDir, path);
  if (placed.spare) {
    try {
      // The spare was cleaned when its task ended (removeWorktree): no untracked or ignored file, nothing
      // in a submodule's folder; the forced checkout leaves the commit's files alone.
      await gitIn({ path, gitDir }, ["checkout", "-q", "--force", "-B", branch, placed.startSha]);
    } catch {
      // A spare that cannot be switched: a checkout of its own instead.
      gitDir = await exclusive(cacheDir, async () => {
        await discardCheckout(cacheDir, path);
        await git(["worktree", "add", "-q", "--force", "-B", branch, path, placed.startSha], {
          cwd: cacheDir,
        });
        return adminDirOf(cacheDir, path);
      });
    }
  }
  return {
    cacheDir,
    path,
    gitDir,
    branch,
    baseBranch: defaultBranch,
    startSha: placed.startSha,
    continued: placed.continued,
    pushed: placed.existing !== undefined,
  };
}

/**
 * Whether the remote task branch's tree is the tree of its fork point from the default branch: nothing
 * of an agent's on it (only commits that change nothing, such as `draft_pr`'s start).
 */
async function treeAsForked(cacheDir: string, branch: string, defaultBranch: string): Promise<boolean> {
  const fork = (
    await git(["merge-base", `refs/remotes/origin/${branch}`, `refs/remotes/origin/${defaultBranch}`], {
      cwd: cacheDir,
      okCodes: [1],
    })
  ).stdout.trim();
  if (!fork) return false;
  const trees = await git(["rev-parse", `refs/remotes/origin/${branch}^{tree}`, `${fork}^{tree}`], {
    cwd: cacheDir,
  });
  const [a, b] = trees.stdout.trim().split("\n");
  return a !== undefined && a === b;
}

/**
 * Removes the worktree's folder (including the agent's notes next to it); never throws. The checkout
 * itself is kept as a spare (detached, so its branch is free) while the pool has room.
 */
export async function removeWorktree(wt: { cacheDir: string; path: string; gitDir: string }): Promise<void> {
  const pool = sparesDir(wt.cacheDir);
  const roomIn = async () => (await readdir(pool).catch(() => [] as string[])).length < MAX_SPARES;
  // The agent may have replaced the `.git` link, planted repositories, FIFOs or setuid files. A checkout
  // whose registration is no longer its own gets no git command of Fleet's (they would act on another's).
  const own = await cleanAfterAgent(wt).then(
    () => true,
    () => false,
  );
  // Outside the clone's lock: these touch only the checkout, its admin folder and no branch.
  let spare = own && (await roomIn()) && !(await operationInProgress(wt.gitDir));
  if (spare) {
    try {
      // Nothing of the task lingers in the spare: back to its commit, detached, untracked files gone.
      await gitIn(wt, ["checkout", "-q", "--force", "--detach"]);
      await gitIn(wt, ["clean", "-q", "-ffdx"]);
      await emptyGitlinkFolders(wt);
    } catch {
      spare = false;
    }
  }
  await exclusive(wt.cacheDir, async () => {
    if (spare && (await roomIn())) {
      try {
        await mkdir(pool, { recursive: true });
        await git(["worktree", "move", wt.path, join(pool, randomUUID())], { cwd: wt.cacheDir });
        await removeTree(join(wt.path, ".."));
        return;
      } catch {
        // Not movable (already gone, locked): removed below like any other.
      }
    }
    if (own) await discardCheckout(wt.cacheDir, wt.path, wt.gitDir).catch(() => undefined);
    await removeTree(join(wt.path, ".."));
  });
}

/** What a stopped rebase, merge, cherry-pick or revert leaves in a worktree's admin folder. */
const IN_PROGRESS = [
  "rebase-merge",
  "rebase-apply",
  "MERGE_HEAD",
  "CHERRY_PICK_HEAD",
  "REVERT_HEAD",
  "sequencer",
];

/** Whether git has an operation under way in this worktree (its checkout is then not kept as a spare). */
async function operationInProgress(gitDir: string): Promise<boolean> {
  for (const name of IN_PROGRESS) if (await exists(join(gitDir, name))) return true;
  return false;
}

/**
 * Empties the folders of the checkout's submodules (gitlinks), as a fresh checkout has them: `clean` and
 * `checkout` never look inside one, so what the agent wrote there would reach the next task's agent.
 */
async function emptyGitlinkFolders(wt: WorktreeGitDirs): Promise<void> {
  const { stdout } = await gitIn(wt, ["ls-files", "--stage", "-z"]);
  for (const entry of stdout.split("\0")) {
    const path = /^160000 [0-9a-f]+ \d\t(.+)$/s.exec(entry)?.[1];
    if (!path) continue;
    const dir = join(wt.path, path);
    await removeTree(dir);
    await mkdir(dir, { recursive: true });
  }
}

/**
 * The admin folder (`<cache>/worktrees/<name>`) of the worktree checked out at `path`, found from the
 * cache clone's side (each admin folder's `gitdir` file names its checkout), never from the checkout's
 * own `.git` link, which the agent could have rewritten.
 */
export async function adminDirOf(cacheDir: string, path: string): Promise<string> {
  const root = join(cacheDir, "worktrees");
  for (const name of await readdir(root).catch(() => [] as string[]))
    if (await registers(join(root, name), path)) return join(root, name);
  throw new Error(`${path} is not a worktree of ${cacheDir}.`);
}

/** Puts back the checkout's `.git` link to its admin folder, whatever the agent left there. */
export async function restoreGitLink(wt: { path: string; gitDir: string }): Promise<void> {
  const link = join(wt.path, ".git");
  // The admin folder is still this checkout's: were it dropped (and its name given to another task's
  // checkout), Fleet's commit would land on that task's branch.
  if (!(await registers(wt.gitDir, wt.path)))
    throw new Error(
      `The worktree ${wt.path} is no longer registered in its cache clone (${wt.gitDir} names another checkout or none); Fleet runs no git in it.`,
    );
  const next = join(wt.path, `.git.fleet-${randomUUID()}`);
  await writeFile(next, `gitdir: ${wt.gitDir}\n`);
  // Replaced in one rename, never removed first: a `git worktree prune` on the cache clone (Fleet runs
  // none, but git's own gc could) drops the admin folder of any worktree whose link it finds missing.
  try {
    await rename(next, link);
  } catch {
    // A folder the agent made at `.git` cannot be renamed over.
    await removeTree(link);
    await rename(next, link);
  }
}

/**
 * What an agent left in its worktree that Fleet's own git (or the next task that reuses the checkout)
 * must not meet, removed before Fleet touches the worktree again:
 * - any `.git` below the top: git runs `status` in a nested repository (a submodule path the agent
 *   filled, say) with that repository's config, so its filter drivers would run on the host;
 * - FIFOs, sockets and devices (a read of a FIFO never returns);
 * - setuid, setgid and sticky bits and group- or world-writable modes;
 * - folders the owner may not change (`chmod 500`), which the worker could not empty or remove.
 * The top-level `.git` link is written back. Symlinks are never followed.
 */
export async function cleanAfterAgent(wt: { path: string; gitDir: string }): Promise<void> {
  const top = await lstat(wt.path);
  if ((top.mode & 0o700) !== 0o700) await chmod(wt.path, (top.mode & 0o755) | 0o700);
  await restoreGitLink(wt);
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.name === ".git" && dir !== wt.path) {
        await removeTree(path);
        continue;
      }
      if (dir === wt.path && entry.name === ".git") continue;
      if (entry.isSymbolicLink()) continue;
      if (!entry.isFile() && !entry.isDirectory()) {
        await rm(path, { force: true });
        continue;
      }
      const { mode } = await lstat(path);
      // A folder stays its owner's to change (the agent may have taken that away): Fleet empties it later.
      const fixed = (mode & 0o755) | (entry.isDirectory() ? 0o700 : 0);
      if (fixed !== (mode & 0o7777)) await chmod(path, fixed);
      if (entry.isDirectory()) await walk(path);
    }
  };
  await walk(wt.path);
}
