import { chmod, lstat, readdir, rm } from "node:fs/promises";
import { join } from "node:path";

/**
 * Removes `path` and everything below it, also what an agent made hard to remove: it owns the folders
 * it made and may take their write or search permission away (`chmod 500`), which stops the worker
 * (its uid on the host) from emptying them. On such a refusal every folder below is given back to its
 * owner (u+rwx, links never followed) and the removal tried once more. Never follows a link.
 */
export async function removeTree(path: string): Promise<void> {
  try {
    await rm(path, { recursive: true, force: true });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== "EACCES" && code !== "EPERM" && code !== "ENOTEMPTY") throw error;
    await ownerMayChange(path);
    await rm(path, { recursive: true, force: true });
  }
}

/** Gives the owner read, write and search permission on `dir` and every folder below it. */
export async function ownerMayChange(dir: string): Promise<void> {
  const info = await lstat(dir).catch(() => undefined);
  if (!info?.isDirectory()) return;
  if ((info.mode & 0o700) !== 0o700) await chmod(dir, (info.mode & 0o7777) | 0o700);
  for (const name of await readdir(dir).catch(() => [] as string[])) await ownerMayChange(join(dir, name));
}
