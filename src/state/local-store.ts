import { createHash, randomBytes } from "node:crypto";
import { appendFile, mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import {
  BEADS_PATH,
  cloneStateDoc,
  type FleetStateDoc,
  parseStateDoc,
  STATE_PATH,
  serializeStateDoc,
} from "./doc.ts";
import { withFileLock } from "./file-lock.ts";
import type { Mutation, StateSnapshot, StateStore, UpdateResult } from "./store.ts";

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
  history(limit: number): Promise<Array<{ sha: string; message: string; date: string }>>;
}

const readText = async (path: string): Promise<string> => {
  try {
    return await readFile(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return "";
    throw error;
  }
};

const versionOf = (stateText: string, beads: string): string =>
  stateText === "" && beads === ""
    ? ""
    : createHash("sha256").update(stateText).update("\0").update(beads).digest("hex");

/** Write to a temporary file next to the target, then rename over it: readers see old or new, never half. */
async function writeAtomic(path: string, text: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
  await writeFile(tmp, text);
  await rename(tmp, path);
}

/**
 * The same state on a local directory, for a single machine without GitHub: `<home>/state/.fleet/state.json`,
 * `<home>/state/.beads/issues.jsonl` and an append-only `<home>/state/history.jsonl`. Updates hold a lockfile,
 * so two processes never lose one another's update.
 */
export function createLocalStateStore(opts: LocalStateStoreOptions): LocalStateStore {
  const dir = join(opts.home, "state");
  const statePath = join(dir, STATE_PATH);
  const beadsPath = join(dir, BEADS_PATH);
  const historyPath = join(dir, "history.jsonl");
  const lockPath = join(dir, ".lock");
  const clock = opts.clock ?? (() => new Date());
  const remedy = `fix the file by hand or restore it from ${historyPath}'s last good state`;

  async function readNow(): Promise<StateSnapshot & { stateText: string }> {
    const [stateText, beads] = await Promise.all([readText(statePath), readText(beadsPath)]);
    const doc = parseStateDoc(stateText, statePath, remedy);
    return { doc, beads, version: versionOf(stateText, beads), stateText };
  }

  const publicSnapshot = (s: StateSnapshot): StateSnapshot => ({
    doc: s.doc,
    beads: s.beads,
    version: s.version,
  });

  return {
    dir,
    async read() {
      return publicSnapshot(await readNow());
    },
    async update(mutation: Mutation): Promise<UpdateResult> {
      await mkdir(dir, { recursive: true });
      return withFileLock(
        lockPath,
        async () => {
          const current = await readNow();
          const out = mutation({ doc: cloneStateDoc(current.doc), beads: current.beads });
          if (out === null) return { applied: false, snapshot: publicSnapshot(current), retries: 0 };
          const doc: FleetStateDoc = out.doc ?? current.doc;
          const stateText = serializeStateDoc(doc);
          const beads = out.beads ?? current.beads;
          const stateChanged = stateText !== current.stateText;
          const beadsChanged = beads !== current.beads;
          if (!stateChanged && !beadsChanged)
            return { applied: true, snapshot: publicSnapshot(current), retries: 0 };
          if (stateChanged) await writeAtomic(statePath, stateText);
          if (beadsChanged) await writeAtomic(beadsPath, beads);
          const version = versionOf(stateText, beads);
          await appendFile(
            historyPath,
            `${JSON.stringify({ sha: version, message: out.message, date: clock().toISOString() })}\n`,
          );
          return { applied: true, snapshot: { doc, beads, version }, retries: 0, commit: version };
        },
        { staleMs: opts.staleLockMs, timeoutMs: opts.lockTimeoutMs },
      );
    },
    async history(limit: number) {
      const lines = (await readText(historyPath)).split("\n").filter((l) => l.trim() !== "");
      const out: Array<{ sha: string; message: string; date: string }> = [];
      for (const line of lines.slice(-limit).reverse()) {
        try {
          out.push(JSON.parse(line));
        } catch {
          // A torn last line from a crash is skipped; the state files themselves are written atomically.
        }
      }
      return out;
    },
  };
}
