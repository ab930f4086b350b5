import { isTerminal } from "../../core/lifecycle.ts";
import type { Task } from "../../core/task.ts";
import { localRepositoryOf } from "../../queue/local-issues.ts";
import { parse, TARGET_HELP, TARGET_OPTIONS } from "../args.ts";
import { UsageError } from "../errors.ts";
import { renderTaskTable, type TaskRow, taskRow } from "../format.ts";
import { json, out, sleep, untilSignal } from "../io.ts";
import { resolveTarget, type Target } from "../target.ts";
import { showCredentialWindows } from "./tasks-credentials.ts";

export const TASKS_USAGE = `Usage: fleet tasks [--all] [--watch [--interval MS]] [--credentials] [--json]

Running and queued tasks, and those that failed in the last 24 hours (each failure's reason below
the table): id, issue, coder, model, state, priority, elapsed time, tokens (input, output, cache
read/write; * = live from an agent running now on this machine) and cost. In local mode also
the repository each task runs in (its path; --json: repository.path and repository.remote).
CONTEXT: how full a running agent's context was at its last turn (--json: context).

  --all            include every finished task (done, cancelled, failed earlier)
  --watch          refresh in place on a terminal; otherwise print again whenever it changes
  --interval MS    refresh interval for --watch (default 1000)
  --credentials    each credential's rate-limit windows instead: use and reset per window,
                   and what Fleet sent on it this hour; one not set in this environment
                   (where local workers run) shows as not set

${TARGET_HELP}`;

const OPTIONS = {
  ...TARGET_OPTIONS,
  all: { type: "boolean" },
  watch: { type: "boolean", short: "w" },
  interval: { type: "string" },
  credentials: { type: "boolean" },
} as const;

/** How long a failed task stays in the default listing: long enough to be seen the next day. */
const RECENT_FAILURE_MS = 24 * 60 * 60 * 1000;

/** Shown without --all: what is not finished, and a failure recent enough that nobody may have seen it. */
const shownByDefault = (t: Task, now: number): boolean =>
  !isTerminal(t.state) || (t.state === "failed" && now - Date.parse(t.updatedAt) < RECENT_FAILURE_MS);

/** The failed rows' reasons, one line each, under the table. */
export function failureNotes(rows: readonly TaskRow[]): string[] {
  return rows
    .filter((r) => r.state === "failed")
    .map((r) => {
      const reason = (r.reason ?? "no reason recorded").replace(/\s+/g, " ").trim();
      return `${r.id} failed: ${reason.length > 300 ? `${reason.slice(0, 299)}…` : reason}`;
    });
}

/** The table, and the failures' reasons below it. */
function renderRows(r: TaskRow[], local: boolean): string {
  const notes = failureNotes(r);
  return notes.length ? `${renderTaskTable(r, local)}\n\n${notes.join("\n")}` : renderTaskTable(r, local);
}

async function rows(target: Target, all: boolean): Promise<TaskRow[]> {
  const { doc } = await target.store.read();
  const now = Date.now();
  const tasks = Object.values(doc.tasks)
    .filter((t) => all || shownByDefault(t, now))
    .sort((a, b) => a.priority - b.priority || (a.queuedAt < b.queuedAt ? -1 : 1));
  return Promise.all(
    tasks.map((t) =>
      taskRow(t, now, target.workDir, target.kind === "local" ? localRepositoryOf(doc, t) : undefined),
    ),
  );
}

export async function tasksCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, OPTIONS, TASKS_USAGE);
  if (positionals.length)
    throw new UsageError(`fleet tasks takes no arguments (got "${positionals[0]}").`, TASKS_USAGE);
  const interval = values.interval === undefined ? 1000 : Number(values.interval);
  if (!Number.isInteger(interval) || interval < 100)
    throw new UsageError(
      `--interval must be a whole number of milliseconds, at least 100 (got "${values.interval}").`,
    );
  const target = await resolveTarget(values);
  if (values.credentials) return showCredentialWindows(target, Boolean(values.json));
  const all = Boolean(values.all);
  const local = target.kind === "local";
  const text = (r: TaskRow[]) => (values.json ? JSON.stringify(r, null, 2) : renderRows(r, local));
  if (!values.watch) {
    const r = await rows(target, all);
    if (values.json) json(r);
    else out(renderRows(r, local));
    return 0;
  }
  const tty = process.stdout.isTTY && !values.json;
  const signal = untilSignal();
  let stopped = false;
  void signal.promise.then(() => {
    stopped = true;
  });
  let lastKey = "";
  try {
    while (!stopped) {
      const r = await rows(target, all);
      // Elapsed time changes every tick; a non-terminal reader wants the other changes only.
      const key = JSON.stringify(r.map(({ elapsedMs: _e, ...rest }) => rest));
      if (tty) process.stdout.write(`\x1b[H\x1b[2J${text(r)}\n\n(every ${interval} ms; Ctrl-C to stop)\n`);
      else if (key !== lastKey) out(text(r));
      lastKey = key;
      await Promise.race([sleep(interval), signal.promise]);
    }
  } finally {
    signal.dispose();
  }
  return 0;
}
