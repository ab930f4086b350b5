import { open, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { getAdapter } from "../../agents/index.ts";
import { eventsOfLog, renderTranscript } from "../../agents/transcript.ts";
import { isActive } from "../../core/lifecycle.ts";
import type { RefusedConnection } from "../../core/network-policy.ts";
import { redactSecrets } from "../../core/redact.ts";
import type { Task } from "../../core/task.ts";
import { renderContextManifest } from "../../render/context-manifest.ts";
import { nextStep, renderTaskOverview } from "../../render/task-overview.ts";
import {
  KNOWLEDGE_FILE,
  LOG_FILE,
  NETWORK_FILE,
  PLAN_FILE,
  RESULT_FILE,
  SETUP_LOG_FILE,
  taskArtifactsDir,
} from "../../worker/workspace/artifacts.ts";
import { CONTEXT_MANIFEST_FILE, type ContextManifest } from "../../worker/workspace/context-manifest.ts";
import { abComparisonOf } from "../ab-compare.ts";
import { parse, TARGET_HELP, TARGET_OPTIONS } from "../args.ts";
import { CliError, NotFoundError, UsageError } from "../errors.ts";
import { json, out, sleep, untilSignal } from "../io.ts";
import { fetchTaskArtifact } from "../run-artifacts.ts";
import { describeTarget, resolveTarget, type Target } from "../target.ts";
import { findTaskRef } from "../task-ref.ts";

export const TASK_USAGE = `Usage: fleet task <id> [log|plan|knowledge|result|compare] [-f] [--raw] [--json]

With no view: the task (state, repository, pull request, plan, each run's tokens) and what to do next.

What a task's agent left on this machine (under --work-dir, default $FLEET_HOME/work), or, against a
GitHub repository when it is not here, in the artifact its Actions run uploaded (fleet-<id>):
  log          the agent's log, readable: what it said, each tool call and the first lines of its
               answer, errors, how the run ended (--raw: the coder's own JSON lines, agent.log; the
               plan phase's plan.log when there is no work log yet), after setup's output
               (setup.log) and before the connections the egress proxy refused
  plan         PLAN.md, the agent's plan
  knowledge    KNOWLEDGE.md, the context the agent was given and gathered
  result       RESULT.json, the agent's own verdict
  compare      the sides of the task's A/B run side by side (tokens, cost, duration, turns, diff,
               tests, verdict): the table Fleet posts on the issue when every side has finished

<id> is a task id (fl-a3f) or an issue (#12, gh-12, 12: its latest task).
Secrets (known credential values and token shapes) are redacted.

  -f, --follow   log only: keep printing as the agent writes, until the task leaves its run
  --raw          log only: the coder's output lines as they are

${TARGET_HELP}`;

const OPTIONS = {
  ...TARGET_OPTIONS,
  follow: { type: "boolean", short: "f" },
  raw: { type: "boolean" },
} as const;
const WHAT = { log: LOG_FILE, plan: PLAN_FILE, knowledge: KNOWLEDGE_FILE, result: RESULT_FILE } as const;
/** The plan phase's log, shown when there is no work log yet. */
const PLAN_LOG_FILE = "plan.log";

/** Values that must never be printed: the credentials in this environment. */
function knownSecrets(env: NodeJS.ProcessEnv): string[] {
  return Object.entries(env)
    .filter(([k, v]) => v && /(TOKEN|KEY|SECRET|PASSWORD|CREDENTIAL)/i.test(k))
    .map(([, v]) => v as string);
}

const readText = (path: string) =>
  readFile(path, "utf8").catch((e: NodeJS.ErrnoException) => {
    if (e.code === "ENOENT") return undefined;
    throw e;
  });

/** Where a task's files are read from: the artifacts folder here, or an artifact of its Actions run. */
interface FileSource {
  read(name: string): Promise<string | undefined>;
  path(name: string): string;
}

/** The file `what` names (the log falls back to the plan phase's log), and for knowledge the context manifest. */
async function readWhat(
  source: FileSource,
  what: keyof typeof WHAT,
): Promise<{ path: string; text?: string; manifest?: ContextManifest }> {
  let path = source.path(WHAT[what]);
  let text = await source.read(WHAT[what]);
  if (text === undefined && what === "log") {
    const plan = await source.read(PLAN_LOG_FILE);
    if (plan !== undefined) {
      path = source.path(PLAN_LOG_FILE);
      text = plan;
    }
  }
  let manifest: ContextManifest | undefined;
  if (what === "knowledge") {
    const manifestText = await source.read(CONTEXT_MANIFEST_FILE);
    if (manifestText) {
      try {
        manifest = JSON.parse(manifestText) as ContextManifest;
      } catch {
        throw new CliError(
          `${source.path(CONTEXT_MANIFEST_FILE)} is not valid JSON: the context measurement is damaged.`,
        );
      }
    }
  }
  return { path, text, manifest };
}

export async function taskCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, OPTIONS, TASK_USAGE);
  const [ref, what, ...extra] = positionals;
  if (!ref) throw new UsageError("fleet task needs a task (an id such as fl-a3f, or #12).", TASK_USAGE);
  if (!what) {
    if (values.follow || values.raw) throw new UsageError("-f and --raw apply to log only.", TASK_USAGE);
    return overview(ref, values);
  }
  if (what === "compare") {
    if (extra.length) throw new UsageError(`Unexpected argument "${extra[0]}".`, TASK_USAGE);
    if (values.follow) throw new UsageError("-f/--follow applies to log only.", TASK_USAGE);
    return compare(ref, values);
  }
  if (!(what in WHAT))
    throw new UsageError(
      `"${what}" is not something a task has: use log, plan, knowledge, result or compare.`,
      TASK_USAGE,
    );
  if (extra.length) throw new UsageError(`Unexpected argument "${extra[0]}".`, TASK_USAGE);
  if (values.follow && what !== "log") throw new UsageError("-f/--follow applies to log only.", TASK_USAGE);
  if (values.raw && what !== "log") throw new UsageError("--raw applies to log only.", TASK_USAGE);

  const target = await resolveTarget(values);
  const { id, task, knownHere } = await resolveTaskRef(target, ref);
  const dir = taskArtifactsDir(target.workDir, id);
  const secrets = knownSecrets(process.env);
  const redact = (t: string) => redactSecrets(t, secrets);
  const file = WHAT[what as keyof typeof WHAT];
  const here: FileSource = { read: (name) => readText(join(dir, name)), path: (name) => join(dir, name) };
  let found = knownHere ? await readWhat(here, what as keyof typeof WHAT) : { path: join(dir, file) };
  const missing = found.text === undefined && found.manifest === undefined;
  const followable = values.follow && isActive(task?.state ?? "done");
  let remote: string | undefined;
  let remoteMiss: string | undefined;
  if (missing && !followable && target.kind === "github") {
    // Not on this machine: an Actions run of the task may have uploaded it (the fleet-task workflow).
    const there = await readFromRunArtifact(target, id, task, what as keyof typeof WHAT);
    if ("found" in there) {
      found = there.found;
      remote = there.where;
    } else remoteMiss = there.miss;
    if (!knownHere && !remote)
      throw new NotFoundError(
        `No task "${ref}" in ${describeTarget(target)}, no artifacts at ${dir}. ${remoteMiss}`,
      );
  }
  const path = found.path;
  let text = found.text;
  if (what === "knowledge") {
    // The measured context (what the agent loaded, duplicates flagged) goes with what it learned.
    const manifest = found.manifest;
    if (values.json && (manifest || text !== undefined)) {
      json({
        task: id,
        knowledge: text === undefined ? null : redact(text),
        context: manifest ?? null,
        ...(remote ? { source: remote } : {}),
      });
      return 0;
    }
    if (manifest)
      text = `${text ?? "(The agent wrote no KNOWLEDGE.md.)\n"}\n${renderContextManifest(manifest)}\n`;
  }
  if (text === undefined && !followable) {
    const state = task?.state;
    throw new NotFoundError(
      `Task ${id} has no ${file}: looked for ${path}${state ? ` (task state: ${state})` : ""}. ` +
        (what === "log"
          ? "The log exists once a run started on this machine; pass --work-dir if the worker used another one."
          : `The agent writes ${file} during its run; pass --work-dir if the worker used another one.`) +
        (remoteMiss ? ` On GitHub: ${remoteMiss}` : ""),
    );
  }
  if (remote && values.follow)
    process.stderr.write(`${id} runs elsewhere: this is the log ${remote} uploaded, not a live one.\n`);

  if (what === "result") return printResult(redact(text ?? ""), values.json);
  // The log goes with what setup printed before the agent, and what the egress proxy refused.
  const around = what === "log" ? await logSurroundings(remote ? undefined : here) : {};
  if (values.json) {
    json({
      task: id,
      what,
      path,
      text: redact(text ?? ""),
      ...(around.setup !== undefined ? { setup: redact(around.setup) } : {}),
      ...(around.network ? { network: around.network } : {}),
      ...(remote ? { source: remote } : {}),
    });
    return 0;
  }
  // Readable unless asked raw (or the coder is not one Fleet reads); redacted before it is rendered.
  const adapter = values.raw ? undefined : getAdapter(task?.coder ?? "");
  const shown = (t: string, quiet = false) => {
    if (!adapter || !t) return redact(t);
    const rendered = renderTranscript(eventsOfLog(adapter, redact(t)), { quiet });
    return rendered ? `${rendered}\n` : "";
  };
  if (!values.follow || remote) {
    if (around.setup)
      process.stdout.write(`== setup (${SETUP_LOG_FILE}) ==\n${redact(around.setup)}== agent ==\n`);
    if (text) process.stdout.write(shown(text));
    if (around.network?.refused.length) process.stdout.write(refusedText(around.network.refused));
    return 0;
  }
  return follow(
    path,
    text ?? "",
    (t) => shown(t, true),
    async () => {
      const t = (await target.store.read()).doc.tasks[id];
      return t !== undefined && isActive(t.state);
    },
  );
}

/** RESULT.json, pretty-printed when it parses, as it is when it does not. */
function printResult(text: string, asJson: boolean | undefined): number {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (asJson) json(parsed ?? { invalid: text });
  else out(parsed === undefined ? text : JSON.stringify(parsed, null, 2));
  return 0;
}

/** `fleet task <id>`: the task, its plan and runs, and the next thing a person can do. */
async function overview(ref: string, values: Parameters<typeof resolveTarget>[0] & { json?: boolean }) {
  const target = await resolveTarget(values);
  const { id, task } = await resolveTaskRef(target, ref);
  if (!task) throw new NotFoundError(`No task "${ref}" in ${describeTarget(target)}.`);
  const dir = taskArtifactsDir(target.workDir, id);
  const plan = await readText(join(dir, PLAN_FILE));
  const redact = (t: string) => redactSecrets(t, knownSecrets(process.env));
  const view = {
    task,
    where: describeTarget(target),
    local: target.kind !== "github",
    ...(plan ? { plan: redact(plan) } : {}),
  };
  if (values.json) json({ task, plan: view.plan ?? null, next: nextStep(view) });
  else out(renderTaskOverview(view));
  return 0;
}

/** setup.log and the refused connections (network.json) kept beside the agent's log, when there are any. */
async function logSurroundings(
  source: FileSource | undefined,
): Promise<{ setup?: string; network?: { mode: string; refused: RefusedConnection[] } }> {
  if (!source) return {};
  const setup = await source.read(SETUP_LOG_FILE);
  const text = await source.read(NETWORK_FILE);
  let network: { mode: string; refused: RefusedConnection[] } | undefined;
  try {
    network = text ? (JSON.parse(text) as typeof network) : undefined;
  } catch {
    network = undefined;
  }
  return { ...(setup !== undefined ? { setup } : {}), ...(network ? { network } : {}) };
}

function refusedText(refused: readonly RefusedConnection[]): string {
  const rows = refused.map((r) => `  ${r.host}:${r.port}  ${r.count}×  ${r.why}`);
  return `== network: Fleet's egress proxy refused ==\n${rows.join("\n")}\n(to allow a host, add it to network.allow in .github/fleet.yml)\n`;
}

/** `fleet task <id> compare`: the A/B comparison table (the GitHub comment's), or its figures with --json. */
async function compare(ref: string, values: { json?: boolean } & Parameters<typeof resolveTarget>[0]) {
  const target = await resolveTarget(values);
  const { doc } = await target.store.read();
  const task = findTaskRef(doc, ref, describeTarget(target));
  const view = await abComparisonOf(target, doc, task);
  if (values.json) {
    json({ issue: view.issue, finished: view.finished, sides: view.sides });
    return 0;
  }
  out(view.table);
  if (!view.finished) {
    const open = view.sides.filter((s) => !["pr-open", "done", "failed", "cancelled"].includes(s.state));
    out(
      `\nNot every side has finished: ${open.map((s) => `${s.taskId} is ${s.state}`).join(", ") || "a side's figures are not recorded yet"}.`,
    );
  }
  return 0;
}

/** The task a reference names, or only its id when the state forgot it but its artifacts remain. */
async function resolveTaskRef(
  target: Target,
  ref: string,
): Promise<{ id: string; task?: Task; knownHere: boolean }> {
  const { doc } = await target.store.read();
  try {
    const task = findTaskRef(doc, ref, describeTarget(target));
    return { id: task.id, task, knownHere: true };
  } catch (error) {
    // Artifacts outlive the state: a task id with a folder here (or an artifact on GitHub) is still shown.
    if (!(error instanceof NotFoundError)) throw error;
    const dir = taskArtifactsDir(target.workDir, ref);
    if (await stat(dir).catch(() => undefined)) return { id: ref, knownHere: true };
    if (target.kind !== "github") throw new NotFoundError(`${error.message} No artifacts at ${dir} either.`);
    return { id: ref, knownHere: false };
  }
}

/** The file from the artifact an Actions run of the task uploaded; or why it is not there. */
async function readFromRunArtifact(
  target: Target,
  id: string,
  task: Task | undefined,
  what: keyof typeof WHAT,
): Promise<{ found: Awaited<ReturnType<typeof readWhat>>; where: string } | { miss: string }> {
  try {
    const artifact = await fetchTaskArtifact(target.github, target.repo, id, task);
    const there = await readWhat(
      { read: async (name) => artifact.read(name), path: (name) => `${artifact.where}: ${name}` },
      what,
    );
    if (there.text !== undefined || there.manifest !== undefined)
      return { found: there, where: artifact.where };
    const has = [...artifact.files.keys()].join(", ") || "nothing";
    return { miss: `${artifact.where} has no ${WHAT[what]} either (it holds: ${has}).` };
  } catch (error) {
    if (!(error instanceof NotFoundError)) throw error;
    return { miss: error.message };
  }
}

/** Prints the file and then what is appended, line by line, while `running()` says the task runs. */
async function follow(
  path: string,
  initial: string,
  redact: (t: string) => string,
  running: () => Promise<boolean>,
): Promise<number> {
  // Only whole lines are redacted and printed, so a secret split across two reads is still caught.
  let pending = "";
  const emit = (chunk: string, flush = false) => {
    pending += chunk;
    const cut = flush ? pending.length : pending.lastIndexOf("\n") + 1;
    if (cut > 0) process.stdout.write(redact(pending.slice(0, cut)));
    pending = pending.slice(cut);
  };
  emit(initial);
  let offset = Buffer.byteLength(initial);
  const signal = untilSignal();
  let stopped = false;
  void signal.promise.then(() => {
    stopped = true;
  });
  let lastCheck = 0;
  let alive = true;
  try {
    while (!stopped) {
      const size = (await stat(path).catch(() => undefined))?.size ?? 0;
      if (size < offset) offset = 0; // a new attempt starts a fresh log
      if (size > offset) {
        const fh = await open(path, "r");
        try {
          const buf = Buffer.alloc(size - offset);
          await fh.read(buf, 0, buf.length, offset);
          offset = size;
          emit(buf.toString("utf8"));
        } finally {
          await fh.close();
        }
        continue;
      }
      if (!alive) break;
      if (Date.now() - lastCheck > 1000) {
        lastCheck = Date.now();
        // One more read after the task stops, for what it wrote last.
        alive = await running();
        if (!alive) continue;
      }
      await Promise.race([sleep(200), signal.promise]);
    }
  } finally {
    signal.dispose();
    emit("", true);
  }
  return 0;
}
