import { parse } from "yaml";
import type { TokenPermission } from "../state.ts";

/** A workflow's step that uses an action, as a runner would run it for one dispatched run. */
export interface WorkflowActionStep {
  /** The job the step is in. */
  job: string;
  /** The action, as the step names it (`owner/name@ref`, `./path`). */
  uses: string;
  /** The step's `with:`, expressions evaluated; then the action's own defaults for inputs it leaves out. */
  inputs: Record<string, string>;
  /** The job token's permissions (`permissions:` of the job, else of the workflow), `id-token` aside. */
  permissions?: Record<string, TokenPermission>;
  /** Whether the job may request an OIDC token (`id-token: write`). */
  idToken: boolean;
}

/** The contexts an expression may read (`inputs.task_id`, `secrets.NAME`, `github.api_url`). */
export type ExpressionContexts = Record<string, Record<string, unknown>>;

type Mapping = Record<string, unknown>;
const isMapping = (v: unknown): v is Mapping => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * `${{ <context>.<name> }}` in `text`, each replaced by its value ("" for a missing one, as Actions
 * does). Only property reads are evaluated: anything else (functions, operators) is refused by name,
 * so a workflow the emulated runner cannot follow fails loudly instead of running with a wrong value.
 */
export function evaluateExpressions(text: string, contexts: ExpressionContexts): string {
  return text.replace(/\$\{\{\s*(.*?)\s*\}\}/g, (_, expr: string) => {
    const m = /^([A-Za-z_][\w-]*)\.([A-Za-z_][\w-]*)$/.exec(expr);
    if (!m)
      throw new Error(
        `The emulated runner evaluates context properties only (e.g. inputs.task_id); got \`${expr}\`.`,
      );
    const context = contexts[m[1]!];
    if (!context) throw new Error(`The emulated runner has no \`${m[1]}\` context (in \`${expr}\`).`);
    const value = context[m[2]!];
    return value === undefined || value === null ? "" : String(value);
  });
}

/** A `permissions:` block as a job token's permissions, and whether it grants `id-token: write`. */
function permissionsOf(block: unknown): { permissions?: Record<string, TokenPermission>; idToken: boolean } {
  if (block === undefined) return { idToken: false };
  if (!isMapping(block))
    throw new Error(
      `The emulated runner takes a mapping of permissions, not \`permissions: ${String(block)}\`.`,
    );
  const permissions: Record<string, TokenPermission> = {};
  for (const [name, level] of Object.entries(block))
    if (name !== "id-token" && level !== "none") permissions[name] = level as TokenPermission;
  return { permissions, idToken: block["id-token"] === "write" };
}

/** The `workflow_dispatch` inputs' defaults, under the run's own inputs (GitHub fills in what a dispatch leaves out). */
function dispatchInputs(workflow: Mapping, given: Record<string, unknown>): Record<string, unknown> {
  const on = workflow.on;
  const dispatch = isMapping(on) && isMapping(on.workflow_dispatch) ? on.workflow_dispatch : undefined;
  const declared = dispatch && isMapping(dispatch.inputs) ? dispatch.inputs : {};
  const defaults = Object.fromEntries(
    Object.entries(declared).flatMap(([k, v]) =>
      isMapping(v) && v.default !== undefined ? [[k, v.default]] : [],
    ),
  );
  return { ...defaults, ...given };
}

/**
 * The step of `workflow` (YAML text) that uses an action `match` accepts, with its inputs as a runner
 * computes them for a run: `with:` evaluated against the run's inputs (their declared defaults filled
 * in), `secrets` and `github`, then the action's own input defaults (`actionYml`, its metadata file)
 * for the inputs the step leaves out. Throws when no step (or more than one) matches.
 */
export function workflowActionStep(o: {
  workflow: string;
  match: (uses: string) => boolean;
  runInputs: Record<string, unknown>;
  secrets?: Record<string, string>;
  github?: Record<string, string>;
  actionYml?: string;
}): WorkflowActionStep {
  const workflow = parse(o.workflow) as unknown;
  if (!isMapping(workflow) || !isMapping(workflow.jobs)) throw new Error("The workflow has no jobs.");
  const found: Array<{ job: string; jobDef: Mapping; step: Mapping }> = [];
  for (const [job, jobDef] of Object.entries(workflow.jobs)) {
    if (!isMapping(jobDef) || !Array.isArray(jobDef.steps)) continue;
    for (const step of jobDef.steps)
      if (isMapping(step) && typeof step.uses === "string" && o.match(step.uses))
        found.push({ job, jobDef, step });
  }
  if (found.length !== 1)
    throw new Error(
      `The workflow has ${found.length} steps using the action the runner was asked for; it needs one.`,
    );
  const { job, jobDef, step } = found[0]!;
  const contexts: ExpressionContexts = {
    inputs: dispatchInputs(workflow, o.runInputs),
    secrets: o.secrets ?? {},
    github: o.github ?? {},
  };
  const inputs: Record<string, string> = {};
  for (const [name, value] of Object.entries(isMapping(step.with) ? step.with : {}))
    inputs[name] = evaluateExpressions(String(value ?? ""), contexts);
  const action = o.actionYml ? (parse(o.actionYml) as unknown) : undefined;
  const declared = isMapping(action) && isMapping(action.inputs) ? action.inputs : {};
  for (const [name, spec] of Object.entries(declared))
    if (!(name in inputs) && isMapping(spec) && spec.default !== undefined)
      inputs[name] = evaluateExpressions(String(spec.default), contexts);
  return {
    job,
    uses: step.uses as string,
    inputs,
    ...permissionsOf(jobDef.permissions ?? workflow.permissions),
  };
}

/** The entry file of a JavaScript action from its metadata (`runs.main` of action.yml). */
export function actionMain(actionYml: string): string {
  const action = parse(actionYml) as unknown;
  const runs = isMapping(action) ? action.runs : undefined;
  if (!isMapping(runs) || typeof runs.main !== "string" || !/^node\d+$/.test(String(runs.using)))
    throw new Error("The action is not a JavaScript action (runs.using: node<N> with runs.main).");
  return runs.main;
}
