import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { processEnv, runProgram } from "../process/command-runner.ts";

// Local mode reads a repository on disk as GitHub reads one: files from its default branch as
// committed, never from the working tree (the branch checked out may be a task's, which its agent
// wrote, and `.github/fleet.yml` decides how agents run).

const gitAt = (cwd: string, args: string[]) =>
  runProgram({ file: "git", args, cwd, env: processEnv() }).then((r) => ({
    ok: r.exitCode === 0,
    out: r.stdout.toString("utf8").trim(),
  }));

/**
 * The branch local mode reads `.github/fleet.yml` from, as GitHub reads it from the default branch:
 * the branch `origin/HEAD` names, else git's `init.defaultBranch`, else `main`, else `master` (each
 * only when this repository has it as a branch), else the branch checked out unless it is a task's
 * `fleet/*` branch. Undefined when none of them is there.
 */
export async function localDefaultBranch(repoPath: string): Promise<string | undefined> {
  return defaultBranchFrom(repoPath, await branchesOf(repoPath));
}

/** The default branch from what for-each-ref said, or a command per question when it refused. */
function defaultBranchFrom(repoPath: string, refs: Branches | undefined): Promise<string | undefined> {
  return refs ? defaultOf(repoPath, refs) : defaultBranchStepwise(repoPath);
}

/**
 * The same, a git command per question: for a repository `git for-each-ref` refuses (a branch naming
 * an object that is gone stops it), so that one broken branch does not hide the others.
 */
async function defaultBranchStepwise(repoPath: string): Promise<string | undefined> {
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

/** What one `git for-each-ref` says of a repository's branches (see branchesOf). */
type Branches = { branches: Set<string>; origin?: string; checkedOut?: string };

/**
 * A repository's branches, the branch `origin/HEAD` names and the branch checked out, from one
 * `git for-each-ref` (local mode reads the config at every poll: a git process each costs the
 * worker's CPU). Undefined when git refuses (no git repository, or a branch whose object is gone).
 * An origin/HEAD naming a branch that is gone (pruned) is passed over, as for-each-ref skips it.
 */
async function branchesOf(repoPath: string): Promise<Branches | undefined> {
  const r = await gitAt(repoPath, [
    "for-each-ref",
    // `*objecttype`: a branch may name an annotated tag of a commit, which git reads as that commit.
    "--format=%(HEAD)%00%(refname)%00%(objecttype)%00%(symref)%00%(*objecttype)",
    "refs/heads/",
    "refs/remotes/origin/HEAD",
  ]);
  if (!r.ok) return undefined;
  const out: Branches = { branches: new Set() };
  for (const line of r.out.split("\n").filter(Boolean)) {
    const [head, ref = "", type, symref = "", peeled] = line.split("\0");
    if (ref === "refs/remotes/origin/HEAD") {
      if (symref.startsWith("refs/remotes/origin/")) out.origin = symref.slice("refs/remotes/origin/".length);
      continue;
    }
    const name = ref.slice("refs/heads/".length);
    if (type === "commit" || peeled === "commit") out.branches.add(name);
    if (head === "*") out.checkedOut = name;
  }
  return out;
}

async function defaultOf(repoPath: string, refs: Branches): Promise<string | undefined> {
  const has = (name: string | undefined): name is string =>
    !!name && !name.startsWith("fleet/") && refs.branches.has(name);
  if (has(refs.origin)) return refs.origin;
  const configured = (await gitAt(repoPath, ["config", "--get", "init.defaultBranch"])).out;
  for (const name of [configured, "main", "master", refs.checkedOut]) if (has(name)) return name;
  return undefined;
}

/**
 * The file at `path` as committed on the repository's default branch (`localDefaultBranch`);
 * undefined when that branch has no such file or the repository has no such branch. A folder that
 * is no git repository at all is read as it is. An edit takes effect once committed there.
 */
export async function committedFile(repoPath: string, path: string): Promise<string | undefined> {
  const refs = await branchesOf(repoPath);
  if (!refs && !(await gitAt(repoPath, ["rev-parse", "--git-dir"])).ok)
    return readFile(join(repoPath, path), "utf8").catch(() => undefined);
  const branch = await defaultBranchFrom(repoPath, refs);
  if (!branch) return undefined;
  const r = await runProgram({
    file: "git",
    args: ["cat-file", "blob", `refs/heads/${branch}:${path}`],
    cwd: repoPath,
    env: processEnv(),
  });
  return r.exitCode === 0 ? r.stdout.toString("utf8") : undefined;
}
