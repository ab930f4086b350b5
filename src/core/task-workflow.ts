// Fleet's task workflow: one template (this repository's own .github/workflows/fleet-task.yml), whose
// one step `uses: <owner>/fleet@v1` is Fleet's published action. `fleet init` writes it into a target
// repository with the action's owner filled in; nothing else of it changes.

/** The published action's repository name and major tag (moved by the release workflow). */
export const ACTION_NAME = "fleet";
export const ACTION_MAJOR = "v1";
/** The action's owner when Fleet's package.json names no repository. */
export const DEFAULT_ACTION_OWNER = "fleet-dev";
/** Where the template lives in Fleet's repository, and where `fleet init` writes it by default. */
export const TASK_WORKFLOW_PATH = ".github/workflows/fleet-task.yml";

/** A GitHub account name: letters, digits and single hyphens, at most 39 characters. */
const OWNER = /^[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}$/;
const USES = /^(\s*(?:-\s+)?uses:\s*)([A-Za-z0-9-]+)\/fleet@v1(\s*(?:#.*)?)$/gm;

export const isAccountName = (name: string): boolean => OWNER.test(name);

/** `<owner>/fleet@v1`. */
export const actionRef = (owner: string): string => `${owner}/${ACTION_NAME}@${ACTION_MAJOR}`;

/** Whether a step's `uses:` is Fleet's published action (any owner). */
export const isFleetAction = (uses: string): boolean =>
  new RegExp(`^[A-Za-z0-9-]+/${ACTION_NAME}@${ACTION_MAJOR}$`).test(uses.trim());

/**
 * The owner in a package.json `repository` field (`github:owner/name`, `owner/name`, a GitHub URL,
 * or `{ url }`), or undefined when it names none on GitHub.
 */
export function ownerFromRepositoryField(field: unknown): string | undefined {
  const text =
    typeof field === "string"
      ? field
      : typeof field === "object" && field !== null && typeof (field as { url?: unknown }).url === "string"
        ? (field as { url: string }).url
        : undefined;
  if (!text) return undefined;
  const m =
    /^(?:github:)?([A-Za-z0-9-]+)\/[A-Za-z0-9._-]+$/.exec(text.trim()) ??
    /^(?:git\+)?(?:https?|ssh|git):\/\/(?:git@)?github\.com[/:]([A-Za-z0-9-]+)\/[A-Za-z0-9._-]+?(?:\.git)?\/?$/.exec(
      text.trim(),
    ) ??
    /^git@github\.com:([A-Za-z0-9-]+)\/[A-Za-z0-9._-]+?(?:\.git)?$/.exec(text.trim());
  return m && isAccountName(m[1]!) ? m[1] : undefined;
}

/** The action's owner `fleet init` writes by default: package.json's repository, else DEFAULT_ACTION_OWNER. */
export const defaultActionOwner = (packageJson: { repository?: unknown }): string =>
  ownerFromRepositoryField(packageJson.repository) ?? DEFAULT_ACTION_OWNER;

/** The owner the template's one `uses: <owner>/fleet@v1` names; throws when there is not exactly one. */
export function templateActionOwner(template: string): string {
  const found = [...template.matchAll(USES)];
  if (found.length !== 1)
    throw new Error(
      `The task workflow template must have exactly one step \`uses: <owner>/${ACTION_NAME}@${ACTION_MAJOR}\`; it has ${found.length}.`,
    );
  return found[0]![2]!;
}

/** The task workflow for a repository: the template with the action's owner set to `owner`. */
export function taskWorkflowFor(template: string, owner: string): string {
  if (!isAccountName(owner))
    throw new Error(`"${owner}" is not a GitHub account name (letters, digits and single hyphens).`);
  templateActionOwner(template);
  return template.replace(
    USES,
    (_, before: string, _owner: string, after: string) => `${before}${owner}/fleet@v1${after}`,
  );
}

/**
 * The secrets the workflow hands the action (`NAME=${{ secrets.NAME }}` lines of its `credentials`
 * input): a coder credential named in .github/fleet.yml but not here never reaches a run.
 */
export function workflowCredentialNames(workflow: string): string[] {
  return [...workflow.matchAll(/^\s*([A-Z_][A-Z0-9_]*)=\$\{\{\s*secrets\.([A-Z_][A-Z0-9_]*)\s*\}\}\s*$/gm)]
    .filter((m) => m[1] === m[2])
    .map((m) => m[1]!);
}

/**
 * The task a run of the task workflow was dispatched for: by the run id Fleet recorded, else by its
 * run-name (`run-name: fleet <task> <task>.<attempt>.<hex>` in the template), which a run carries from
 * its start. A run can end before Fleet records its id (its job failed at once, or the action's claim
 * landed first), and without this its task would wait for its lease to expire. Only a task in the
 * run's dispatch (isDispatchNamed) and that has no other run recorded is matched, and only by a run Fleet itself
 * dispatched (isFleetDispatchOf: a writer's copy of the run-name, dispatched by hand, ends nothing).
 */
export function taskOfRun<
  T extends { id: string; attempts: number; runId?: string; lease?: { acquiredAt: string } },
>(
  tasks: Record<string, T>,
  run: FleetRunFacts & { id: number | string },
  /** The app's slug; without it a run is found by its recorded id only. */
  appSlug?: string,
): T | undefined {
  const runId = String(run.id);
  const recorded = Object.values(tasks).find((t) => t.runId === runId);
  if (recorded) return recorded;
  const named = dispatchNamedBy(run.display_title);
  if (!named || !Object.hasOwn(tasks, named.taskId)) return undefined;
  const task = tasks[named.taskId]!;
  if (task.runId !== undefined || !appSlug) return undefined;
  return isFleetDispatchOf(task, run, appSlug) ? task : undefined;
}

/** What a workflow run says of who started it and for what (GitHub's workflow run object). */
interface FleetRunFacts {
  event?: string;
  triggering_actor?: { login: string } | null;
  display_title?: string | null;
}

/** Which dispatch of a task a run is for: its attempt, and (from Fleet versions that name it) the dispatch's time. */
export interface DispatchNamed {
  attempt: number;
  /** The dispatch's lease's `acquiredAt` (epoch ms); absent in the older form. */
  dispatchedAt?: number;
}

/**
 * The dispatch of `taskId` a run was for, read from its `correlation_id` input (newCorrelationId):
 * `<task>.<attempt>.<hex>`, whose hex of 20 digits ends with the dispatch's time (12 digits of
 * milliseconds); an id of an earlier version's 8 digits names the attempt alone. Undefined when it is
 * not that form for this task.
 */
export function dispatchOf(taskId: string, correlationId: unknown): DispatchNamed | undefined {
  if (typeof correlationId !== "string" || !correlationId.startsWith(`${taskId}.`)) return undefined;
  const m = /^(\d{1,9})\.([0-9a-f]+)$/.exec(correlationId.slice(taskId.length + 1));
  if (!m) return undefined;
  const hex = m[2]!;
  return {
    attempt: Number(m[1]),
    ...(hex.length === 20 ? { dispatchedAt: Number.parseInt(hex.slice(8), 16) } : {}),
  };
}

/**
 * Whether `task` is in the dispatch a run names: the same attempt, and the same dispatch where the run
 * names its time and the task has a lease (a later dispatch of the same attempt number is another's).
 */
export function isDispatchNamed(
  task: { attempts: number; lease?: { acquiredAt: string } },
  named: DispatchNamed,
): boolean {
  if (task.attempts !== named.attempt) return false;
  if (named.dispatchedAt === undefined || !task.lease) return true;
  return Date.parse(task.lease.acquiredAt) === named.dispatchedAt;
}

/** The task and dispatch a run's name gives (`fleet <task> <correlation id>`, the template's run-name). */
function dispatchNamedBy(title: string | null | undefined): (DispatchNamed & { taskId: string }) | undefined {
  const named = /^fleet (\S+) (\S+)$/.exec(title ?? "");
  if (!named) return undefined;
  const dispatch = dispatchOf(named[1]!, named[2]);
  return dispatch === undefined ? undefined : { taskId: named[1]!, ...dispatch };
}

/**
 * Whether `run` is the one Fleet dispatched for the task's current attempt, told from the run itself
 * (https://docs.github.com/en/rest/actions/workflow-runs#get-a-workflow-run): a `workflow_dispatch`
 * whose run-name names the task and this dispatch of it, started by the app's own bot (`<slug>[bot]`). Only
 * Fleet (the app, or a run holding the app's token) dispatches as the bot: a writer's dispatch by hand,
 * even one copying the run-name, is the writer's, and so is a re-run of Fleet's run (`triggering_actor`
 * is who started the run's latest attempt).
 */
export function isFleetDispatchOf(
  task: { id: string; attempts: number; lease?: { acquiredAt: string } },
  run: FleetRunFacts,
  appSlug: string,
): boolean {
  if (run.event !== "workflow_dispatch" || !appSlug) return false;
  if (run.triggering_actor?.login.toLowerCase() !== `${appSlug}[bot]`.toLowerCase()) return false;
  const named = dispatchNamedBy(run.display_title);
  return named?.taskId === task.id && isDispatchNamed(task, named);
}
