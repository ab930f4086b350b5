import { rm } from "node:fs/promises";
import { join } from "node:path";
import type { GitHub, RepoRef } from "../github/port.ts";
import {
  contentIdsOf,
  type GitAuth,
  GitError,
  gitIn,
  IGNORE_SUBMODULES,
  lstatBelow,
  type WorktreeGitDirs,
} from "./workspace/git.ts";

/** Agents push only to fleet/* branches; anything else is refused before git is asked. */
export function assertFleetBranch(branch: string): void {
  if (
    !/^fleet\/[A-Za-z0-9._/-]+$/.test(branch) ||
    branch.includes("..") ||
    branch.endsWith(".lock") ||
    branch.endsWith("/")
  ) {
    throw new Error(`Fleet pushes only to fleet/* branches; refusing to push "${branch}".`);
  }
}

const CO_AUTHORS: Record<string, string> = {
  claude: "Claude <noreply@anthropic.com>",
  codex: "Codex <noreply@openai.com>",
};

export function coAuthorTrailer(coder: string): string {
  const who =
    CO_AUTHORS[coder] ?? `${coder} <${coder.replace(/[^A-Za-z0-9-]/g, "-")}@users.noreply.github.com>`;
  return `Co-authored-by: ${who}`;
}

/** Subject line of at most 72 characters from the summary's first line, the rest as the body. */
export function commitMessage(opts: {
  summary?: string;
  title: string;
  issue: number;
  taskId: string;
  coder: string;
}): string {
  // The agent's text opens no HTML comment: a PR opened by hand from a one-commit branch takes its body
  // from the commit's, and Fleet's marker in a PR body's first line names the PR's task (taskIdOfPrBody).
  const summary = (opts.summary ?? "").replaceAll("<!--", "<! --").trim();
  const first = summary.split("\n")[0]!.trim();
  let subject = first || `${opts.title} (#${opts.issue})`;
  if (subject.length > 72) subject = `${subject.slice(0, 71).trimEnd()}…`;
  const body = summary && (summary !== first || first.length > 72) ? `${summary}\n\n` : "";
  return `${subject}\n\n${body}Fleet task ${opts.taskId} for #${opts.issue}.\n\n${coAuthorTrailer(opts.coder)}\n`;
}

/**
 * Stages everything the agent left and commits it; undefined when there is nothing to commit. The
 * agent's sandbox shows the repository read-only, so this is the only commit: Fleet's, of the files.
 */
export async function commitAll(
  wt: WorktreeGitDirs & { setupChanged?: Map<string, string> },
  message: string,
): Promise<string | undefined> {
  await refuseOversized(wt);
  await gitIn(wt, ["add", "-A"]);
  await unstageSetupMade(wt);
  await unstageSetupChanges(wt);
  const diff = await gitIn(wt, ["diff", "--cached", "--quiet"], { okCodes: [1] });
  if (diff.exitCode === 0) return undefined;
  await gitIn(wt, ["commit", "-q", "--no-verify", "-F", "-"], { input: message });
  return (await gitIn(wt, ["rev-parse", "HEAD"])).stdout.trim();
}

/** GitHub refuses a file over 100 MB in a push, and a push over 2 GB. */
export const MAX_COMMITTED_FILE_BYTES = 100 * 1024 * 1024;
export const MAX_COMMITTED_BYTES = 2 * 1024 * 1024 * 1024;

/**
 * Fails, naming the file, when the agent left one that `git add` would take and GitHub refuses: git
 * reads all of it, outside the run's limits and with no time limit, and a sparse file of terabytes
 * costs the agent neither disk nor time to make. Ignored files and what setup made are not looked at.
 */
async function refuseOversized(wt: WorktreeGitDirs): Promise<void> {
  const { stdout } = await gitIn(wt, [
    "status",
    "--porcelain=v1",
    "-z",
    "--untracked-files=all",
    "--no-renames",
    "--ignore-submodules=all",
  ]);
  let total = 0;
  for (const entry of stdout.split("\0")) {
    if (entry.length < 4) continue;
    const path = entry.slice(3);
    const info = await lstatBelow(wt.path, path);
    if (!info?.isFile()) continue;
    total += info.size;
    if (info.size > MAX_COMMITTED_FILE_BYTES)
      throw new Error(
        `The agent left \`${path.slice(0, 200)}\` of ${info.size.toLocaleString("en-US")} bytes; GitHub takes no file over 100 MB, so Fleet commits nothing. Ask for a smaller change, or have the file ignored (.gitignore).`,
      );
    if (total > MAX_COMMITTED_BYTES)
      throw new Error(
        `The agent left more than 2 GB of files to commit; GitHub takes no push that large, so Fleet commits nothing. Ask for a smaller change, or have generated files ignored (.gitignore).`,
      );
  }
}

/**
 * What setup made (its exclude list) is not part of the commit, also when the agent's `.gitignore`
 * takes it back (`!node_modules/`: a `.gitignore` outranks `core.excludesFile`).
 */
async function unstageSetupMade(wt: WorktreeGitDirs): Promise<void> {
  if (!wt.excludesFile) return;
  const { stdout } = await gitIn(wt, [
    "ls-files",
    "-z",
    "--cached",
    "--ignored",
    `--exclude-from=${wt.excludesFile}`,
  ]);
  const staged = stdout.split("\0").filter(Boolean);
  if (staged.length)
    await gitIn(wt, ["--literal-pathspecs", "reset", "-q", "--pathspec-from-file=-", "--pathspec-file-nul"], {
      input: staged.join("\0"),
    });
}

/** Tracked files setup changed and the agent did not change further: not part of the commit. */
async function unstageSetupChanges(wt: WorktreeGitDirs & { setupChanged?: Map<string, string> }) {
  if (!wt.setupChanged?.size) return;
  const paths = [...wt.setupChanged.keys()];
  const now = await contentIdsOf(wt, paths);
  const setupOnly = paths.filter((p, i) => now[i] !== "" && now[i] === wt.setupChanged!.get(p));
  // Paths as they are: `gen*.txt` must not also reset the agent's `gen-by-hand.txt`.
  if (setupOnly.length)
    await gitIn(wt, ["--literal-pathspecs", "reset", "-q", "--pathspec-from-file=-", "--pathspec-file-nul"], {
      input: setupOnly.join("\0"),
    });
}

/** True when HEAD has commits the start point lacks. */
export async function hasNewCommits(wt: WorktreeGitDirs, startSha: string): Promise<boolean> {
  const r = await gitIn(wt, ["rev-list", "--count", `${startSha}..HEAD`]);
  return Number(r.stdout.trim()) > 0;
}

/**
 * What the commits since the start point add, file by file (binary files as text): the added lines, the
 * removed ones, and the file's path; for the secret check before a push. Diff headers are read only up
 * to a file's first hunk, so an added line that itself starts with `++` is still an added line.
 */
export async function addedSince(
  wt: WorktreeGitDirs,
  startSha: string,
): Promise<Array<{ file: string; added: string; before: string }>> {
  const out = (await gitIn(wt, ["diff", "--no-color", "--no-ext-diff", "--text", "-U0", startSha, "HEAD"]))
    .stdout;
  const files: Array<{ file: string; added: string; before: string }> = [];
  let current: { file: string; added: string[]; before: string[]; inHunk: boolean } | undefined;
  const close = () => {
    if (current)
      files.push({ file: current.file, added: current.added.join("\n"), before: current.before.join("\n") });
  };
  for (const line of out.split("\n")) {
    if (line.startsWith("diff --git ")) {
      close();
      current = {
        file: line.replace(/^diff --git a\/(.*) b\/.*$/, "$1"),
        added: [],
        before: [],
        inHunk: false,
      };
    } else if (!current) {
    } else if (line.startsWith("@@")) {
      current.inHunk = true;
    } else if (!current.inHunk) {
      // A header: the new path of a rename or copy is what the file is called now.
      const renamed = /^rename to (.*)$/.exec(line)?.[1];
      if (renamed) current.file = renamed;
    } else if (line.startsWith("+")) current.added.push(line.slice(1));
    else if (line.startsWith("-")) current.before.push(line.slice(1));
  }
  close();
  return files;
}

export async function pushBranch(
  wt: WorktreeGitDirs,
  cloneUrl: string,
  branch: string,
  auth?: GitAuth,
): Promise<void> {
  assertFleetBranch(branch);
  try {
    await gitIn(wt, ["push", "-q", cloneUrl, `HEAD:refs/heads/${branch}`], { auth });
  } catch (error) {
    throw error instanceof GitError ? pushRejection(branch, error) : error;
  }
}

/** A refused push, said plainly: what GitHub answered and what to do about it. */
export function pushRejection(branch: string, error: GitError): Error {
  const lines = error.stderr.split("\n").map((l) => l.replace(/^remote:\s*/, "").trim());
  const said = lines
    .filter((l) => l && !/^(To |error: failed to push|hint:)/.test(l))
    .slice(-4)
    .join(" ");
  const moved = /non-fast-forward|fetch first|\[rejected\]/.test(error.stderr);
  const refused = /remote rejected|declined|protected|GH00\d/i.test(error.stderr);
  if (!moved && !refused) return error;
  const what = moved
    ? `the branch \`${branch}\` moved on GitHub while the agent worked (someone else pushed to it); a retry continues from the new commits`
    : `GitHub refused the push to \`${branch}\` (a branch protection rule or push policy); let Fleet's app push to \`fleet/*\` branches, then \`/fleet retry\``;
  return new Error(`The push was rejected: ${what}. GitHub said: ${said || error.message}`);
}

export interface PullRef {
  number: number;
  url: string;
  head: string;
  created: boolean;
}

/**
 * Opens the pull request for `branch`, or updates the open one. A task's first run creates at once
 * (GitHub answers 422 when the branch already has an open PR, and then it is looked up); a rerun
 * (`mayExist`) looks first, since its PR is usually open. Either way a first run costs one request.
 */
export async function openOrUpdatePullRequest(
  github: GitHub,
  ref: RepoRef,
  pr: { branch: string; base: string; title: string; body: string; mayExist?: boolean; draft?: boolean },
): Promise<PullRef> {
  assertFleetBranch(pr.branch);
  const findOpen = async () =>
    (await github.pulls.listForBranch(ref, pr.branch, "open")).find((p) => p.head.ref === pr.branch);
  const update = async (number: number): Promise<PullRef> => {
    const data = await github.pulls.update(ref, number, { title: pr.title, body: pr.body });
    return { number: data.number, url: data.html_url, head: pr.branch, created: false };
  };
  if (pr.mayExist) {
    const existing = await findOpen();
    if (existing) return update(existing.number);
  }
  try {
    const data = await github.pulls.create(ref, {
      head: pr.branch,
      base: pr.base,
      title: pr.title,
      body: pr.body,
      maintainer_can_modify: true,
      ...(pr.draft ? { draft: true } : {}),
    });
    return { number: data.number, url: data.html_url, head: pr.branch, created: true };
  } catch (error) {
    if ((error as { status?: number }).status !== 422) throw error;
    // "A pull request already exists": a run that crashed after opening it, or a PR opened by hand.
    const existing = await findOpen();
    if (!existing) throw error;
    return update(existing.number);
  }
}

/**
 * A commit Fleet refused to push (it gave a secret away) leaves the cache clone: the branch goes back
 * to where it started and the objects only that commit reached are deleted, so no later agent, which
 * sees the cache clone read-only, can read them with `git cat-file --batch-all-objects`.
 */
/** Where GitHub keeps a repository's workflows: a push that changes them needs the `workflows` permission. */
export const WORKFLOWS_DIR = ".github/workflows/";

/**
 * The change's files under `.github/workflows/`, taken out of its commit (the rest is committed again
 * with the same message), with their diff for a person to apply. GitHub refuses a push that changes a
 * workflow from an app without the `workflows` permission
 * (https://docs.github.com/en/apps/creating-github-apps/registering-a-github-app/choosing-permissions-for-a-github-app),
 * and Fleet's app does not ask for it. Undefined when the change touches no workflow.
 */
export async function holdBackWorkflowChanges(
  wt: WorktreeGitDirs & { cacheDir: string },
  startSha: string,
): Promise<{ paths: string[]; patch: string } | undefined> {
  const changed = (await gitIn(wt, ["diff", "--name-only", "-z", IGNORE_SUBMODULES, startSha, "HEAD"])).stdout
    .split("\0")
    .filter((p) => p.startsWith(WORKFLOWS_DIR));
  if (changed.length === 0) return undefined;
  const patch = (
    await gitIn(wt, [
      "diff",
      "--no-color",
      "--no-ext-diff",
      "--binary",
      startSha,
      "HEAD",
      "--",
      WORKFLOWS_DIR,
    ])
  ).stdout;
  const message = (await gitIn(wt, ["log", "-1", "--format=%B"])).stdout;
  // The same commit without them: the index back to the start for those paths, the rest as it was.
  await gitIn(wt, ["reset", "-q", "--soft", startSha]);
  await gitIn(wt, ["reset", "-q", startSha, "--", WORKFLOWS_DIR]);
  const rest = await gitIn(wt, ["diff", "--cached", "--quiet"], { okCodes: [1] });
  if (rest.exitCode === 1) await gitIn(wt, ["commit", "-q", "--no-verify", "-F", "-"], { input: message });
  return { paths: changed, patch };
}

export async function forgetCommit(
  wt: WorktreeGitDirs & { cacheDir: string },
  startSha: string,
): Promise<void> {
  const head = (await gitIn(wt, ["rev-parse", "HEAD"])).stdout.trim();
  if (head === startSha) return;
  // Back first: then whatever any ref or worktree still reaches is what others use, and stays.
  await gitIn(wt, ["reset", "-q", "--hard", startSha]);
  const only = (await gitIn(wt, ["rev-list", "--objects", head, "--not", "--all"])).stdout
    .split("\n")
    .map((l) => l.split(" ")[0]!)
    .filter((sha) => /^[0-9a-f]{40}$/.test(sha));
  for (const sha of only) {
    await rm(join(wt.cacheDir, "objects", sha.slice(0, 2), sha.slice(2)), { force: true });
  }
}
