import { execa } from "execa";
import type { LocalRepository } from "../queue/local-issues.ts";
import { CliError } from "./errors.ts";

/**
 * The git repository `dir` is in, as a local task records it: its top folder (absolute) and its
 * `origin` remote when it has one. A folder outside any git repository is an error saying what to do.
 */
export async function localRepositoryAt(dir: string): Promise<LocalRepository> {
  const top = await execa("git", ["rev-parse", "--show-toplevel"], { cwd: dir, reject: false });
  if (top.exitCode !== 0)
    throw new CliError(
      `${dir} is not in a git repository: local tasks run in the repository they were created in. Run the command inside it, or pass --repo-path.`,
    );
  const path = String(top.stdout).trim();
  const remote = await execa("git", ["remote", "get-url", "origin"], { cwd: path, reject: false });
  const url = remote.exitCode === 0 ? String(remote.stdout).trim() : "";
  return url ? { path, remote: url } : { path };
}
