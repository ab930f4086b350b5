import { execa } from "execa";
import { getAdapter, knownCoders } from "../../agents/index.ts";
import { type BeadIssue, issueNumberOf, liveIssues, parseJsonl, readyIssues } from "../../beads/index.ts";
import type { FleetConfig } from "../../core/config.ts";
import { parseDependencies, withDependencyLines } from "../../core/dependencies.ts";
import { parseFleetLabel } from "../../core/labels.ts";
import { SLOT_HOLDING_STATES } from "../../core/lifecycle.ts";
import type { FleetStateDoc } from "../../core/state-doc.ts";
import type { Priority, Task } from "../../core/task.ts";
import { closeLocalPull, readLocalPulls, withLocalRecords } from "../../queue/local-github.ts";
import {
  closeLocalIssue,
  createLocalIssue,
  editLocalIssue,
  localIssueExists,
  localIssuesOf,
  localRepositoryOf,
  setLocalIssueDependencies,
} from "../../queue/local-issues.ts";
import { dependencyCycles } from "../../queue/transitions.ts";
import { parse, TARGET_HELP, TARGET_OPTIONS } from "../args.ts";
import { CliError, NotFoundError, UsageError } from "../errors.ts";
import { table } from "../format.ts";
import { json, out } from "../io.ts";
import { baseBranchAt } from "../local-merge.ts";
import { localRepositoryAt } from "../local-repository.ts";
import { describeTarget, localRepoName, resolveTarget, type Target } from "../target.ts";
import { findTaskRef } from "../task-ref.ts";

export const BD_USAGE = `Usage: fleet bd create --title T --description D [--coder C] [--model M] [--priority 0-4]
                       [--deps 12,fl-a3f] [--labels a,b] [--ab coder[:model],coder[:model]]
       fleet bd list [--all]      beads of Fleet's tasks (open ones unless --all)
       fleet bd ready             open beads nothing blocks (as \`bd ready\`)
       fleet bd show <id>         one bead and its task
       fleet bd update <id> [--title T] [--description D] [--priority 0-4]
                       [--deps 12,fl-a3f | --deps none] [--add-dep 12] [--remove-dep 12]
       fleet bd close <id> [--reason R]

Against GitHub, create opens an issue labeled fleet:<coder>[:<model>] (and fleet:p<n>), with a
"Depends on #N" line per dependency; the Fleet app queues it. In local mode the task and its bead
are written to $FLEET_HOME directly, with the repository it is for (the git repository of
--repo-path, default cwd: its path and origin remote); \`fleet run\` runs it there.

--deps names issues (12 or #12) or tasks (fl-a3f) that must be done first; each must exist. On
update, --deps replaces the dependencies (--deps none clears them), --add-dep and --remove-dep
change them one by one (both take a list too); the issue's "Depends on" lines are rewritten to say
so, and a task waiting for an issue it no longer depends on is run (one already started keeps going:
they hold its later runs). A task needs a repository with a commit to start from: create tasks after
the first commit.

A/B run: several coders or models on one issue, each side its own task and branch, compared by
\`fleet task <id> compare\` once all have finished. --coder and --model repeat and pair by position
(--coder claude --model opus --coder codex); one --coder with several --model compares models;
or --ab claude:opus,codex. --json prints the task (an A/B run: {issue, repository, tasks}).
<id> is a bead/task id (fl-a3f) or an issue (#12).

${TARGET_HELP}`;

const OPTIONS = {
  ...TARGET_OPTIONS,
  title: { type: "string" },
  description: { type: "string" },
  coder: { type: "string", multiple: true },
  model: { type: "string", multiple: true },
  ab: { type: "string" },
  priority: { type: "string" },
  deps: { type: "string" },
  "add-dep": { type: "string" },
  "remove-dep": { type: "string" },
  labels: { type: "string" },
  reason: { type: "string" },
  all: { type: "boolean" },
} as const;

function parsePriority(text: string | undefined): Priority | undefined {
  if (text === undefined) return undefined;
  const t = text.replace(/^p/i, "");
  if (!/^[0-4]$/.test(t)) throw new UsageError(`--priority must be 0 (most urgent) to 4; got "${text}".`);
  return Number(t) as Priority;
}

const list = (text: string | undefined): string[] =>
  (text ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);

/** Dependencies as issue numbers: `12`, `#12` or the id of a task in the state. */
function resolveDeps(doc: FleetStateDoc, text: string | undefined, where: string, flag = "--deps"): number[] {
  return list(text).map((d) => {
    const m = /^(?:#|gh-)?(\d+)$/.exec(d);
    if (m && Number(m[1]) > 0) return Number(m[1]);
    const t = doc.tasks[d];
    if (!t) throw new UsageError(`${flag}: "${d}" is neither an issue number nor a task in ${where}.`);
    return t.issue;
  });
}

/**
 * Every dependency names an issue that exists: a task waiting for an issue that does not would wait
 * for ever. Local mode knows its issues; on GitHub each is read (a pull request is an issue too).
 */
async function checkDepsExist(target: Target, doc: FleetStateDoc, deps: readonly number[]): Promise<void> {
  const missing: number[] = [];
  for (const n of new Set(deps)) {
    if (target.kind === "local") {
      if (!localIssueExists(doc, n)) missing.push(n);
      continue;
    }
    try {
      await target.github.issues.get(target.repo, n);
    } catch (error) {
      const status = (error as { status?: number }).status;
      if (status !== 404 && status !== 410) throw error;
      missing.push(n);
    }
  }
  if (missing.length === 0) return;
  const names = missing.map((n) => `#${n}`).join(", ");
  throw new NotFoundError(
    `--deps: ${names} ${missing.length === 1 ? "is not an issue" : "are not issues"} in ${describeTarget(target)}; a task depending on ${missing.length === 1 ? "it" : "them"} would wait for ever. Create ${missing.length === 1 ? "it" : "them"} first (fleet bd create), or leave ${missing.length === 1 ? "it" : "them"} out.`,
  );
}

/**
 * The repository has a commit for tasks to start from: a task in an empty repository would be
 * accepted and fail when a worker takes it.
 */
async function checkHasCommit(target: Target): Promise<void> {
  if (target.kind === "local") {
    // Not a repository at all says so first.
    await localRepositoryAt(target.repoPath);
    const head = await execa("git", ["rev-parse", "--verify", "-q", "HEAD^{commit}"], {
      cwd: target.repoPath,
      reject: false,
    });
    if (head.exitCode !== 0)
      throw new CliError(
        `${target.repoPath} has no commit yet: a task starts from the repository's current branch. Commit a first commit (e.g. git commit --allow-empty -m "First commit"), then create the task.`,
      );
    return;
  }
  const data = await target.github.repos.get(target.repo);
  try {
    await target.github.repos.getBranch(target.repo, data.default_branch);
  } catch (error) {
    if ((error as { status?: number }).status !== 404) throw error;
    throw new CliError(
      `${target.full} has no commit on its default branch ${data.default_branch}: a task starts from it. Push a first commit, then create the task.`,
    );
  }
}

function checkCoder(config: FleetConfig, coder: string, model: string | undefined): string {
  const label = model === undefined ? `fleet:${coder}` : `fleet:${coder}:${model}`;
  const parsed = parseFleetLabel(label, knownCoders);
  if (parsed.kind === "error")
    throw new UsageError(parsed.message.replace(/Label /, "--coder/--model: label "));
  const c = config.coders[coder];
  if (!c?.enabled || !getAdapter(coder)) {
    const enabled = Object.keys(config.coders).filter((k) => config.coders[k]!.enabled && getAdapter(k));
    throw new UsageError(`Coder "${coder}" is not enabled here; use one of: ${enabled.join(", ")}.`);
  }
  if (model !== undefined && c.models && !c.models.includes(model))
    throw new UsageError(`Model "${model}" is not allowed for ${coder}; use one of: ${c.models.join(", ")}.`);
  return model ?? c.model;
}

/**
 * The coders and models asked for, paired by position (`--coder a --model x --coder b`), or from
 * `--ab a:x,b`; one coder with several models compares the models. Each side is checked; a side
 * asked for twice is an error, not a silent merge.
 */
function requestedSides(
  values: Values,
  config: FleetConfig,
): Array<{ coder: string; model: string; label: string }> {
  const coders = values.coder ?? [];
  const models = values.model ?? [];
  let asked: Array<{ coder: string; model?: string }>;
  if (values.ab !== undefined) {
    if (coders.length || models.length)
      throw new UsageError(
        "--ab names the coders and models itself: leave out --coder and --model.",
        BD_USAGE,
      );
    asked = list(values.ab).map((side) => {
      const [coder, ...rest] = side.split(":");
      return rest.length ? { coder: coder!, model: rest.join(":") } : { coder: coder! };
    });
    if (asked.length < 2)
      throw new UsageError(
        `--ab needs at least two sides, e.g. --ab claude:opus,codex; got "${values.ab}".`,
        BD_USAGE,
      );
  } else if (coders.length <= 1 && models.length > 1) {
    const coder = coders[0] ?? config.default_coder;
    asked = models.map((model) => ({ coder, model }));
  } else {
    const named = coders.length ? coders : [config.default_coder];
    if (models.length > named.length)
      throw new UsageError(
        `${models.length} --model for ${named.length} --coder: each --model pairs with the --coder at its position.`,
        BD_USAGE,
      );
    asked = named.map((coder, i) => (models[i] === undefined ? { coder } : { coder, model: models[i] }));
  }
  const sides = asked.map(({ coder, model }) => ({
    coder,
    model: checkCoder(config, coder, model),
    label: model === undefined ? `fleet:${coder}` : `fleet:${coder}:${model}`,
  }));
  const seen = new Set<string>();
  for (const s of sides) {
    const key = `${s.coder}:${s.model}`;
    if (seen.has(key))
      throw new UsageError(`${key} is asked for twice; each side of an A/B run must differ.`, BD_USAGE);
    seen.add(key);
  }
  return sides;
}

const issueBody = (description: string, deps: number[]): string =>
  [description.trim(), deps.map((n) => `Depends on #${n}`).join("\n")].filter(Boolean).join("\n\n");

async function scheduleLocal(target: Target, doc: FleetStateDoc): Promise<void> {
  const config = await target.config(doc);
  if (target.kind !== "local" && config.dispatch !== "local") return;
  await target.queue((await target.fileConfig()).config).schedule();
}

function beadOf(
  beads: string,
  ref: string,
  doc: FleetStateDoc,
  where: string,
): { bead?: BeadIssue; task?: Task } {
  const live = liveIssues(parseJsonl(beads));
  const byId = live.find((b) => b.id === ref);
  if (byId) return { bead: byId, task: doc.tasks[ref] };
  const task = findTaskRef(doc, ref, where);
  return {
    bead: live.find((b) => b.id === task.id) ?? live.find((b) => issueNumberOf(b) === task.issue),
    task,
  };
}

const beadRows = (beads: BeadIssue[], doc: FleetStateDoc) =>
  table(
    ["ID", "STATUS", "P", "ISSUE", "TASK", "TITLE"],
    beads.map((b) => [
      b.id,
      b.status ?? "open",
      `p${b.priority}`,
      b.external_ref ?? "-",
      doc.tasks[b.id]?.state ?? "-",
      b.title,
    ]),
  );

export async function bdCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, OPTIONS, BD_USAGE);
  const [sub, ref, ...extra] = positionals;
  if (!sub)
    throw new UsageError("fleet bd needs a command: create, list, ready, show, update or close.", BD_USAGE);
  const needsId = sub === "show" || sub === "update" || sub === "close";
  if (needsId && !ref)
    throw new UsageError(`fleet bd ${sub} needs a bead id or issue (e.g. fl-a3f or #12).`, BD_USAGE);
  if (
    (needsId ? extra.length : ref !== undefined) &&
    ["create", "list", "ready", "show", "update", "close"].includes(sub)
  )
    throw new UsageError(`Unexpected argument "${needsId ? extra[0] : ref}" for fleet bd ${sub}.`, BD_USAGE);

  switch (sub) {
    case "create":
      return create(values);
    case "list":
    case "ready": {
      const target = await resolveTarget(values);
      const { doc, beads } = await target.store.read();
      const live = liveIssues(parseJsonl(beads));
      const shown =
        sub === "ready"
          ? readyIssues(live, { now: new Date() })
          : live.filter((b) => values.all || (b.status ?? "open") !== "closed");
      shown.sort((a, b) => a.priority - b.priority || (a.created_at < b.created_at ? -1 : 1));
      if (values.json) json(shown);
      else out(shown.length ? beadRows(shown, doc) : sub === "ready" ? "Nothing is ready." : "No beads.");
      return 0;
    }
    case "show": {
      const target = await resolveTarget(values);
      const { doc, beads } = await target.store.read();
      const { bead, task } = beadOf(beads, ref!, doc, describeTarget(target));
      if (!bead && !task) throw new NotFoundError(`No bead "${ref}" in ${describeTarget(target)}.`);
      const repository = task && target.kind === "local" ? localRepositoryOf(doc, task) : undefined;
      if (values.json) json({ bead, task, ...(repository ? { repository } : {}) });
      else {
        if (bead)
          out(
            `${bead.id}: ${bead.title}\nstatus: ${bead.status ?? "open"}  priority: p${bead.priority}  ref: ${bead.external_ref ?? "-"}`,
          );
        if (bead?.dependencies?.length)
          out(`depends on: ${bead.dependencies.map((d) => `${d.depends_on_id} (${d.type})`).join(", ")}`);
        if (task)
          out(
            `task: ${task.state}  coder: ${task.coder}:${task.model}  attempts: ${task.attempts}${task.pr ? `  PR #${task.pr}` : ""}${task.branch ? `  branch: ${task.branch}` : ""}${task.reason ? `\nreason: ${task.reason}` : ""}`,
          );
        if (repository)
          out(`repository: ${repository.path}${repository.remote ? ` (${repository.remote})` : ""}`);
        if (bead?.description) out(`\n${bead.description}`);
      }
      return 0;
    }
    case "update":
      return update(ref!, values);
    case "close":
      return close(ref!, values);
    default:
      throw new UsageError(
        `Unknown bd command "${sub}": use create, list, ready, show, update or close.`,
        BD_USAGE,
      );
  }
}

type Values = ReturnType<typeof parse<typeof OPTIONS>>["values"];

async function create(values: Values): Promise<number> {
  if (!values.title?.trim()) throw new UsageError("fleet bd create needs --title.", BD_USAGE);
  if (values.description === undefined)
    throw new UsageError("fleet bd create needs --description (the task the agent gets).", BD_USAGE);
  const priority = parsePriority(values.priority);
  const target = await resolveTarget(values);
  const { doc } = await target.store.read();
  const config = await target.config(doc);
  const sides = requestedSides(values, config);
  const where = describeTarget(target);
  const deps = resolveDeps(doc, values.deps, where);
  await checkHasCommit(target);
  await checkDepsExist(target, doc, deps);
  const extraLabels = list(values.labels);
  const title = values.title.trim();
  const body = issueBody(values.description, deps);
  const labels = [
    ...sides.map((side) => side.label),
    ...(priority !== undefined ? [`fleet:p${priority}`] : []),
    ...extraLabels,
  ];

  if (target.kind === "github") {
    const data = await target.github.issues.create(target.repo, { title, body, labels });
    if (values.json) json({ issue: data.number, url: data.html_url, labels });
    else
      out(`created #${data.number} ${data.html_url}\nlabeled ${labels.join(", ")}: the Fleet app queues it.`);
    return 0;
  }

  const repository = await localRepositoryAt(target.repoPath);
  const base = await baseBranchAt(repository.path);
  const now = new Date().toISOString();
  let created: Task[] = [];
  let number = 0;
  // Issues and pull requests share one series of numbers: the pull requests read and the issue written
  // under the records lock a worker opening a pull request holds too, so the two never take one number.
  await withLocalRecords(target.home, async () => {
    const pulls = await readLocalPulls(target.home);
    await target.store.update(({ doc: d, beads }) => {
      const write = createLocalIssue(d, beads, {
        repo: `local/${localRepoName(repository.path)}`,
        title,
        body,
        labels,
        repository,
        base,
        sides: sides.map(({ coder, model }) => ({ coder, model })),
        priority: priority ?? 2,
        dependsOn: deps,
        requestedBy: process.env.USER ?? "cli",
        now,
        numberAbove: Math.max(0, ...pulls.map((p) => p.number)),
      });
      created = write.tasks;
      number = write.issue;
      return write;
    });
  });
  if (created.length === 0) throw new CliError(`Could not write the task to ${where}; try again.`);
  await scheduleLocal(target, (await target.store.read()).doc);
  const after = (await target.store.read()).doc;
  const tasks = created.map((t) => after.tasks[t.id] ?? t);
  const view = (t: Task) => ({
    id: t.id,
    issue: number,
    state: t.state,
    coder: t.coder,
    model: t.model,
    priority: t.priority,
    repository,
  });
  // One side: the task itself, as before; an A/B run: the issue and every side.
  if (values.json)
    json(tasks.length === 1 ? view(tasks[0]!) : { issue: number, repository, tasks: tasks.map(view) });
  else
    for (const t of tasks)
      out(`created ${t.id} (#${number}) for ${t.coder}:${t.model} in ${repository.path}, ${t.state}`);
  if (!values.json && tasks.length > 1)
    out(`A/B run of #${number}: \`fleet task ${tasks[0]!.id} compare\` once every side has finished.`);
  return 0;
}

async function update(ref: string, values: Values): Promise<number> {
  const priority = parsePriority(values.priority);
  const changesDeps = [values.deps, values["add-dep"], values["remove-dep"]].some((v) => v !== undefined);
  if (
    values.title === undefined &&
    values.description === undefined &&
    priority === undefined &&
    !changesDeps
  )
    throw new UsageError(
      "fleet bd update needs --title, --description, --priority, --deps, --add-dep or --remove-dep.",
      BD_USAGE,
    );
  if (values.coder || values.model || values.ab)
    throw new UsageError(
      "fleet bd update changes the title, description, priority and dependencies only; to switch coder, close and create again.",
    );
  if (values.deps !== undefined && (values["add-dep"] !== undefined || values["remove-dep"] !== undefined))
    throw new UsageError(
      "--deps replaces the dependencies: give it alone, or change them with --add-dep and --remove-dep.",
      BD_USAGE,
    );
  const target = await resolveTarget(values);
  const where = describeTarget(target);
  const { doc } = await target.store.read();
  const task = findTaskRef(doc, ref, where);
  const deps = changesDeps ? nextDeps(doc, task, values, where) : undefined;
  if (deps)
    await checkDepsExist(
      target,
      doc,
      deps.filter((n) => !task.dependsOn.includes(n)),
    );
  if (target.kind === "github") await updateOnGitHub(target, task, values, priority, deps);
  else {
    const now = new Date().toISOString();
    const edit = {
      repo: target.full,
      now,
      ...(values.title !== undefined ? { title: values.title } : {}),
      ...(priority !== undefined ? { priority } : {}),
      ...(values.description !== undefined
        ? { body: (t: Task) => issueBody(values.description ?? "", t.dependsOn) }
        : {}),
    };
    if (deps) {
      const body =
        values.description !== undefined
          ? issueBody(values.description, deps)
          : withDependencyLines(localIssuesOf(doc)[String(task.issue)]?.body ?? "", deps);
      checkBodyNames(body, deps, task, target.full);
    }
    await target.store.update(({ doc: d, beads }) => {
      const moved = deps
        ? setLocalIssueDependencies(d, beads, task.id, { repo: target.full, now, dependsOn: deps })
        : null;
      const edited =
        values.title !== undefined || priority !== undefined || values.description !== undefined
          ? editLocalIssue(moved?.doc ?? d, moved?.beads ?? beads, task.id, edit)
          : null;
      if (moved && edited) return { ...edited, message: `${moved.message}\n${edited.message}` };
      return edited ?? moved;
    });
    // A task that waits for other issues now is blocked again, or run when it waits for none.
    if (deps) await scheduleLocal(target, (await target.store.read()).doc);
  }
  const after = (await target.store.read()).doc.tasks[task.id];
  if (values.json) json(after ?? task);
  else {
    out(`updated ${task.id} (#${task.issue})${target.kind === "github" ? " on GitHub" : ""}`);
    if (deps) out(depsNote(deps, task, after, target.kind));
  }
  return 0;
}

/** What `fleet bd update` says of new dependencies: what the task does now. */
function depsNote(
  deps: readonly number[],
  before: Task,
  after: Task | undefined,
  kind: Target["kind"],
): string {
  const list = deps.length ? deps.map((n) => `#${n}`).join(", ") : "nothing";
  // A dispatched or running task is not taken back: its dependencies hold a later run.
  const started = [...SLOT_HOLDING_STATES, "awaiting-approval", "waiting", "pr-open"].includes(before.state);
  if (started)
    return `depends on ${list}; the task is already ${before.state}, so they hold only a later run of it`;
  if (kind === "github") return `depends on ${list} (the Fleet app reads it from the issue's text)`;
  return `depends on ${list}; task ${after?.state ?? before.state}`;
}

/** What the task depends on after --deps (replace; `none` clears), --add-dep and --remove-dep, checked. */
function nextDeps(doc: FleetStateDoc, task: Task, values: Values, where: string): number[] {
  const replaced =
    values.deps === undefined
      ? task.dependsOn
      : values.deps.trim().toLowerCase() === "none"
        ? []
        : resolveDeps(doc, values.deps, where);
  const added = resolveDeps(doc, values["add-dep"], where, "--add-dep");
  const removed = resolveDeps(doc, values["remove-dep"], where, "--remove-dep");
  const absent = removed.filter((n) => !task.dependsOn.includes(n));
  if (absent.length)
    throw new UsageError(
      `--remove-dep: #${task.issue} does not depend on ${absent.map((n) => `#${n}`).join(", ")}; it depends on ${task.dependsOn.length ? task.dependsOn.map((n) => `#${n}`).join(", ") : "nothing"}.`,
    );
  const deps = [...new Set([...replaced, ...added])]
    .filter((n) => !removed.includes(n))
    .sort((a, b) => a - b);
  if (deps.includes(task.issue))
    throw new UsageError(`#${task.issue} (${task.id}) cannot depend on itself; leave it out of --deps.`);
  const tasks = Object.values(doc.tasks).map((t) => (t.issue === task.issue ? { ...t, dependsOn: deps } : t));
  const cycle = dependencyCycles(tasks).get(task.issue);
  if (cycle)
    throw new UsageError(
      `These dependencies close a cycle (${[...cycle, cycle[0]].map((n) => `#${n}`).join(" -> ")}): its tasks would wait for each other for ever.`,
    );
  return deps;
}

/** The issue's text names exactly `deps`: one that names another in a sentence would keep it. */
function checkBodyNames(body: string, deps: readonly number[], task: Task, repo: string): void {
  const named = parseDependencies(body, repo);
  const extra = named.filter((n) => !deps.includes(n));
  if (extra.length === 0) return;
  throw new CliError(
    `The text of #${task.issue} names ${extra.map((n) => `#${n}`).join(", ")} as a dependency in a sentence, which --deps does not rewrite; change the text (--description) so that it names only what the task depends on.`,
  );
}

/**
 * The issue on GitHub changed: title, description, priority label, and its `Depends on` lines (the Fleet
 * app reads the new dependencies from the edited text, as it read them when the issue was labeled).
 */
async function updateOnGitHub(
  target: Extract<Target, { kind: "github" }>,
  task: Task,
  values: Values,
  priority: Priority | undefined,
  deps: number[] | undefined,
): Promise<void> {
  const patch: { title?: string; body?: string } = {};
  if (values.title !== undefined) patch.title = values.title;
  if (values.description !== undefined) patch.body = issueBody(values.description, deps ?? task.dependsOn);
  else if (deps) {
    const data = await target.github.issues.get(target.repo, task.issue);
    patch.body = withDependencyLines(data.body ?? "", deps);
  }
  if (deps && patch.body !== undefined) checkBodyNames(patch.body, deps, task, target.full);
  if (Object.keys(patch).length) await target.github.issues.update(target.repo, task.issue, patch);
  if (priority !== undefined) {
    const current = await target.github.issues.get(target.repo, task.issue);
    for (const l of current.labels) {
      const name = typeof l === "string" ? l : l.name;
      if (name && /^fleet:p\d$/i.test(name) && name !== `fleet:p${priority}`)
        await target.github.issues.removeLabel(target.repo, task.issue, name);
    }
    await target.github.issues.addLabels(target.repo, task.issue, [`fleet:p${priority}`]);
  }
}

async function close(ref: string, values: Values): Promise<number> {
  const target = await resolveTarget(values);
  const where = describeTarget(target);
  const task = findTaskRef((await target.store.read()).doc, ref, where);
  const reason = values.reason ?? "closed with fleet bd close";
  if (target.kind === "github") {
    await target.github.issues.update(target.repo, task.issue, {
      state: "closed",
      state_reason: task.state === "pr-open" ? "completed" : "not_planned",
    });
    if (values.json) json({ id: task.id, issue: task.issue, closed: true });
    else out(`closed #${task.issue} on GitHub; the Fleet app stops its task.`);
    return 0;
  }
  const now = new Date().toISOString();
  await target.store.update(({ doc, beads }) =>
    closeLocalIssue(doc, beads, task.id, { repo: target.full, now, reason }),
  );
  // Closed, not merged: the branch stays where it is, and its local pull request is closed.
  const unmerged = task.state === "pr-open" && task.branch ? task.branch : undefined;
  if (unmerged) await closeLocalPull(target.home, unmerged);
  await scheduleLocal(target, (await target.store.read()).doc);
  const after = (await target.store.read()).doc.tasks[task.id];
  if (values.json) json(after);
  else {
    out(`closed ${task.id} (#${task.issue}): task ${after?.state ?? task.state}`);
    if (unmerged)
      out(
        `${unmerged} was not merged (it is kept); \`fleet merge <id>\` merges a task's branch and closes it.`,
      );
  }
  return 0;
}
