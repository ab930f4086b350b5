import { createHash, randomBytes } from "node:crypto";
import { appendFile, mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { BEADS_PATH, STATE_PATH } from "../core/state-doc.ts";
import * as cas from "./cas-store.ts";
import { withFileLock } from "./file-lock.ts";
import type { HistoryEntry, StateStore } from "./store.ts";

export interface LocalStateStoreOptions {
  /** `$FLEET_HOME`; the state lives in `<home>/state`. */
  home: string;
  clock?: () => Date;
  /** A lock older than this whose holder cannot be shown alive is broken (default 30 s). */
  staleLockMs?: number;
  lockTimeoutMs?: number;
}

/** `$FLEET_HOME`, or `~/.fleet`. */
export const defaultFleetHome = (env: NodeJS.ProcessEnv = process.env): string =>
  env.FLEET_HOME && env.FLEET_HOME !== "" ? env.FLEET_HOME : join(homedir(), ".fleet");

export interface LocalStateStore extends StateStore {
  readonly dir: string;
  history(limit: number): Promise<HistoryEntry[]>;
}

const readText = async (path: string): Promise<string> => {
  try {
    return await readFile(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return "";
    throw error;
  }
};

const versionOf = (files: cas.StateFiles): string =>
  files.state === "" && files.beads === ""
    ? ""
    : createHash("sha256").update(files.state).update("\0").update(files.beads).digest("hex");

/** Write to a temporary file next to the target, then rename over it: readers see old or new, never half. */
async function writeAtomic(path: string, text: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
  await writeFile(tmp, text);
  await rename(tmp, path);
}

/**
 * A directory on this machine: `<dir>/.fleet/state.json`, `<dir>/.beads/issues.jsonl` and an
 * append-only `<dir>/history.jsonl`. Updates hold a lockfile and read first, so a write never loses.
 */
class FileTransport implements cas.CasTransport {
  readonly readsFirst = true;
  readonly place: cas.StatePlace;
  private readonly paths: cas.StateFiles;
  private readonly historyPath: string;
  private readonly dir: string;
  private readonly opts: LocalStateStoreOptions;

  constructor(dir: string, opts: LocalStateStoreOptions) {
    this.dir = dir;
    this.opts = opts;
    this.paths = { state: join(dir, STATE_PATH), beads: join(dir, BEADS_PATH) };
    this.historyPath = join(dir, "history.jsonl");
    const remedy = `fix the file by hand or restore it from ${this.historyPath}'s last good state`;
    this.place = { where: dir, docPath: this.paths.state, remedy };
  }

  /** Updates hold the lock from their read to their write; reads and history need none. */
  async around<T>(op: cas.StoreOperation, fn: () => Promise<T>): Promise<T> {
    if (op !== "update") return fn();
    await mkdir(this.dir, { recursive: true });
    return withFileLock(join(this.dir, ".lock"), fn, {
      staleMs: this.opts.staleLockMs,
      timeoutMs: this.opts.lockTimeoutMs,
    });
  }

  async read(): Promise<cas.Head> {
    const [state, beads] = await Promise.all([readText(this.paths.state), readText(this.paths.beads)]);
    return { version: versionOf({ state, beads }), state, beads };
  }

  /** Under the update's lock: `base` is what the files hold, so the write cannot lose. */
  async write(
    base: cas.Head,
    files: Partial<cas.StateFiles>,
    message: cas.CommitMessage,
  ): Promise<cas.WriteOutcome<cas.Head>> {
    const next = { state: files.state ?? base.state, beads: files.beads ?? base.beads };
    if (next.state !== base.state) await writeAtomic(this.paths.state, next.state);
    if (next.beads !== base.beads) await writeAtomic(this.paths.beads, next.beads);
    const version = versionOf(next);
    const date = (this.opts.clock ?? (() => new Date()))().toISOString();
    await appendFile(this.historyPath, `${JSON.stringify({ sha: version, message: message.text, date })}\n`);
    return { kind: "written", head: { version, ...next } };
  }

  async history(limit: number): Promise<HistoryEntry[]> {
    const lines = (await readText(this.historyPath)).split("\n").filter((l) => l.trim() !== "");
    const out: HistoryEntry[] = [];
    for (const line of lines.slice(-limit).reverse()) {
      try {
        out.push(JSON.parse(line));
      } catch {
        // A torn last line from a crash is skipped; the state files themselves are written atomically.
      }
    }
    return out;
  }
}

/**
 * The same state on a local directory, for a single machine without GitHub: `<home>/state/.fleet/state.json`,
 * `<home>/state/.beads/issues.jsonl` and an append-only `<home>/state/history.jsonl`. Updates hold a lockfile,
 * so two processes never lose one another's update.
 */
export function createLocalStateStore(opts: LocalStateStoreOptions): LocalStateStore {
  const dir = join(opts.home, "state");
  // No pacing: the lock already takes turns, and no write loses a race.
  const store = cas.createCasStore(new FileTransport(dir, opts), { pacing: 0 });
  return { ...store, dir };
}
