import { randomBytes } from "node:crypto";
import { open, readFile, rename, stat, unlink } from "node:fs/promises";
import { defaultSleep } from "./store.ts";

export interface FileLockOptions {
  /** A lock older than this whose holder cannot be shown alive is broken. */
  staleMs?: number;
  /** Give up waiting after this long. */
  timeoutMs?: number;
  sleep?: (ms: number) => Promise<void>;
  now?: () => number;
}

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
};

/**
 * Runs `fn` while holding `lockPath`, created with O_EXCL (`wx`) and holding `pid time`. A lock whose
 * holder process is gone, or older than `staleMs`, is taken over: renamed aside first, so of two
 * processes that both judge it stale only one removes it.
 */
export async function withFileLock<T>(
  lockPath: string,
  fn: () => Promise<T>,
  opts: FileLockOptions = {},
): Promise<T> {
  const staleMs = opts.staleMs ?? 30_000;
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const sleep = opts.sleep ?? defaultSleep;
  const now = opts.now ?? Date.now;
  const started = now();
  const token = `${process.pid} ${now()} ${randomBytes(4).toString("hex")}\n`;
  for (let attempt = 0; ; attempt++) {
    try {
      const fh = await open(lockPath, "wx");
      try {
        await fh.writeFile(token);
      } finally {
        await fh.close();
      }
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    await breakIfStale(lockPath, staleMs, now);
    if (now() - started > timeoutMs) {
      throw new Error(
        `could not lock ${lockPath} within ${timeoutMs} ms; if no Fleet process is running, delete that file.`,
      );
    }
    await sleep(Math.min(50, 2 + attempt) + Math.floor(Math.random() * 5));
  }
  try {
    return await fn();
  } finally {
    // Only remove the lock if it is still ours (it may have been broken as stale).
    const current = await readFile(lockPath, "utf8").catch(() => "");
    if (current === token) await unlink(lockPath).catch(() => undefined);
  }
}

async function breakIfStale(lockPath: string, staleMs: number, now: () => number): Promise<void> {
  let content: string;
  let mtimeMs: number;
  try {
    content = await readFile(lockPath, "utf8");
    mtimeMs = (await stat(lockPath)).mtimeMs;
  } catch {
    return; // released meanwhile
  }
  const pid = Number.parseInt(content.split(" ")[0] ?? "", 10);
  // A lock just created may not hold its pid yet: judge it by age only.
  const holderGone = content !== "" && Number.isInteger(pid) && pid > 0 && !isAlive(pid);
  if (!holderGone && now() - mtimeMs < staleMs) return;
  const aside = `${lockPath}.stale-${process.pid}-${randomBytes(4).toString("hex")}`;
  try {
    await rename(lockPath, aside);
  } catch {
    return; // someone else broke or released it
  }
  const moved = await readFile(aside, "utf8").catch(() => "");
  await unlink(aside).catch(() => undefined);
  if (moved !== content) {
    // We moved a fresh lock taken in between; its holder will notice it no longer owns the file,
    // but to be safe put a note in the log. This needs two stale-breakers within one microsecond.
    process.emitWarning(`Fleet: broke a fresh lock at ${lockPath} while clearing a stale one`);
  }
}
