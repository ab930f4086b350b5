import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { execa } from "execa";

// Local mode reads a repository on disk as GitHub reads one: files from its default branch as
// committed, never from the working tree (the branch checked out may be a task's, which its agent
// wrote, and `.github/fleet.yml` decides how agents run).

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
 * The file at `path` as committed on the repository's default branch (`localDefaultBranch`);
 * undefined when that branch has no such file or the repository has no such branch. A folder that
 * is no git repository at all is read as it is. An edit takes effect once committed there.
 */
export async function committedFile(repoPath: string, path: string): Promise<string | undefined> {
  if (!(await gitAt(repoPath, ["rev-parse", "--git-dir"])).ok)
    return readFile(join(repoPath, path), "utf8").catch(() => undefined);
  const branch = await localDefaultBranch(repoPath);
  if (!branch) return undefined;
  const r = await execa("git", ["cat-file", "blob", `refs/heads/${branch}:${path}`], {
    cwd: repoPath,
    reject: false,
    stripFinalNewline: false,
  });
  return r.exitCode === 0 ? String(r.stdout) : undefined;
}
