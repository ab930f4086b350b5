import { z } from "zod";
import type { ConfigProblem } from "../core/config.ts";
import { boundText, boundTitle, neutraliseMentions } from "../core/published-text.ts";
import type { Priority } from "../core/task.ts";

// The plan a split run leaves: pure schema, validation and rendering (no I/O).

const KEY = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;
/** The most of a planned task's text its sub-issue quotes. */
const SUB_ISSUE_TEXT_MAX = 20_000;

export const PlannedTaskSchema = z.object({
  key: z.string().regex(KEY, 'a key uses letters, digits, "_", "." and "-"'),
  // An agent wrote these and they become issues: inert and bounded when read (GitHub's 256 for a
  // title, counted after the quoting added to it).
  title: z
    .string()
    .trim()
    .min(1, "a title is required")
    .max(256)
    .transform((t) => boundTitle(neutraliseMentions(t, { untrusted: true }))),
  body: z
    .string()
    .default("")
    .transform((b) => boundText(neutraliseMentions(b, { untrusted: true }), SUB_ISSUE_TEXT_MAX)),
  coder: z.string().optional(),
  model: z.string().optional(),
  priority: z.number().int().min(0).max(4).optional(),
  dependsOn: z.array(z.string()).default([]),
});

export const SplitPlanSchema = z.object({
  tasks: z.array(PlannedTaskSchema).min(1, "a plan has at least one task").max(50),
});

export type PlannedTask = z.infer<typeof PlannedTaskSchema> & { priority?: Priority };
export type SplitPlan = { tasks: PlannedTask[] };

/** A problem in the plan at its path (e.g. `tasks[2].dependsOn[0]`), shaped like a config problem. */
export type PlanProblem = ConfigProblem;

export type PlanValidation =
  | { ok: true; plan: SplitPlan; order: PlannedTask[] }
  | { ok: false; problems: PlanProblem[] };

const pathOf = (segments: ReadonlyArray<PropertyKey>): string =>
  segments.reduce<string>(
    (acc, s) => (typeof s === "number" ? `${acc}[${s}]` : acc ? `${acc}.${String(s)}` : String(s)),
    "",
  ) || "(root)";

/**
 * Checks a plan as the agent wrote it: its shape, unique keys, known coders, dependencies on
 * existing keys and no cycles. Every problem is reported with its path; `order` lists the tasks
 * so that each comes after the tasks it depends on.
 */
export function validateSplitPlan(raw: unknown, knownCoders: readonly string[]): PlanValidation {
  const parsed = SplitPlanSchema.safeParse(raw);
  if (!parsed.success) {
    return {
      ok: false,
      problems: parsed.error.issues.map((i) => ({ path: pathOf(i.path), message: i.message })),
    };
  }
  const plan = parsed.data as SplitPlan;
  const problems: PlanProblem[] = [];
  const firstIndex = new Map<string, number>();
  plan.tasks.forEach((t, i) => {
    const seen = firstIndex.get(t.key);
    if (seen !== undefined)
      problems.push({ path: `tasks[${i}].key`, message: `duplicate key "${t.key}" (also tasks[${seen}])` });
    else firstIndex.set(t.key, i);
    if (t.coder !== undefined && !knownCoders.includes(t.coder))
      problems.push({
        path: `tasks[${i}].coder`,
        message: `unknown coder "${t.coder}" (known: ${knownCoders.join(", ") || "none"})`,
      });
    t.dependsOn.forEach((dep, j) => {
      if (dep === t.key)
        problems.push({ path: `tasks[${i}].dependsOn[${j}]`, message: `a task cannot depend on itself` });
    });
  });
  for (const [i, t] of plan.tasks.entries()) {
    for (const [j, dep] of t.dependsOn.entries()) {
      if (!firstIndex.has(dep))
        problems.push({ path: `tasks[${i}].dependsOn[${j}]`, message: `unknown key "${dep}"` });
    }
  }
  if (problems.length > 0) return { ok: false, problems };
  for (const cycle of findKeyCycles(plan.tasks)) {
    const i = firstIndex.get(cycle[0]!)!;
    problems.push({
      path: `tasks[${i}].dependsOn`,
      message: `dependency cycle: ${[...cycle, cycle[0]].join(" -> ")}`,
    });
  }
  if (problems.length > 0) return { ok: false, problems };
  return { ok: true, plan, order: topologicalOrder(plan.tasks) };
}

/** Each dependency cycle once, as the keys along it. */
export function findKeyCycles(tasks: readonly PlannedTask[]): string[][] {
  const deps = new Map(tasks.map((t) => [t.key, t.dependsOn]));
  const color = new Map<string, 1 | 2>();
  const stack: string[] = [];
  const cycles: string[][] = [];
  const visit = (key: string) => {
    color.set(key, 1);
    stack.push(key);
    for (const d of deps.get(key) ?? []) {
      if (!deps.has(d)) continue;
      if (color.get(d) === 1) cycles.push(stack.slice(stack.indexOf(d)));
      else if (!color.has(d)) visit(d);
    }
    stack.pop();
    color.set(key, 2);
  };
  for (const t of tasks) if (!color.has(t.key)) visit(t.key);
  return cycles;
}

/** Dependencies first, otherwise in plan order. Assumes no cycles. */
export function topologicalOrder(tasks: readonly PlannedTask[]): PlannedTask[] {
  const byKey = new Map(tasks.map((t) => [t.key, t]));
  const done = new Set<string>();
  const out: PlannedTask[] = [];
  const visit = (t: PlannedTask) => {
    if (done.has(t.key)) return;
    done.add(t.key);
    for (const d of t.dependsOn) {
      const dep = byKey.get(d);
      if (dep) visit(dep);
    }
    out.push(t);
  };
  for (const t of tasks) visit(t);
  return out;
}

/**
 * The plan from a split run: RESULT.json when the agent wrote one (plan mode usually cannot), else
 * the last JSON object in its plan text (a fenced ```json block or the whole text).
 */
export function extractPlanJson(result: unknown, planText: string | undefined): unknown {
  if (result !== undefined && result !== null && typeof result === "object") return result;
  const text = planText ?? (typeof result === "string" ? result : "");
  const fences = [...text.matchAll(/```(?:json)?\s*\n([\s\S]*?)```/g)].map((m) => m[1]!);
  for (const candidate of [...fences.reverse(), text]) {
    try {
      return JSON.parse(candidate.trim());
    } catch {
      // not this one
    }
  }
  return undefined;
}
