import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { dispatchOf, isDispatchNamed, isFleetDispatchOf, taskOfRun } from "../../src/core/task-workflow.ts";
import { newCorrelationId } from "../../src/queue/actions-dispatcher.ts";

const task = (id: string, attempts: number, runId?: string) => ({
  id,
  attempts,
  ...(runId ? { runId } : {}),
});
/** The run-name the template gives a dispatch (`run-name: fleet ${{ inputs.task_id }} ${{ inputs.correlation_id }}`). */
const runName = (t: { id: string; attempts: number }) => `fleet ${t.id} ${newCorrelationId(t as never)}`;

describe("the task a finished run of the task workflow belongs to", () => {
  it("is the template's run-name that the match reads", () => {
    expect(readFileSync(".github/workflows/fleet-task.yml", "utf8")).toContain(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: GitHub's expression syntax in the workflow
      "run-name: fleet ${{ inputs.task_id }} ${{ inputs.correlation_id }}",
    );
  });

  it("the task with the run's recorded id, whatever the run is called", () => {
    const tasks = { "fl-a": task("fl-a", 1, "71"), "fl-b": task("fl-b", 1) };
    expect(taskOfRun(tasks, { id: 71, display_title: "anything" })?.id).toBe("fl-a");
  });

  /** A run as GitHub describes it, dispatched by `by` (Fleet's: the app's bot). */
  const ran = (id: number, display_title?: string, by = "fleet[bot]") => ({
    id,
    event: "workflow_dispatch",
    triggering_actor: { login: by },
    ...(display_title === undefined ? {} : { display_title }),
  });

  it("a run that ended before its id was recorded: the task and attempt its run-name names, when Fleet dispatched it", () => {
    const tasks = { "fl-a": task("fl-a", 2), "fl-b": task("fl-b", 1, "70") };
    expect(taskOfRun(tasks, ran(72, runName(tasks["fl-a"])), "fleet")?.id).toBe("fl-a");
    // A writer's dispatch by hand copying the run-name ends nothing; nor is a run found by name without the slug.
    expect(taskOfRun(tasks, ran(72, runName(tasks["fl-a"]), "mona"), "fleet")).toBeUndefined();
    expect(taskOfRun(tasks, ran(72, runName(tasks["fl-a"])))).toBeUndefined();
  });

  it("never an earlier attempt's run, a task with another run recorded, or a run not named by Fleet", () => {
    const tasks = { "fl-a": task("fl-a", 3), "fl-b": task("fl-b", 1, "70") };
    const found = (run: ReturnType<typeof ran>) => taskOfRun(tasks, run, "fleet");
    expect(found(ran(72, runName({ id: "fl-a", attempts: 2 })))).toBeUndefined();
    expect(found(ran(73, runName(tasks["fl-b"])))).toBeUndefined();
    expect(found(ran(74, "CI"))).toBeUndefined();
    expect(found(ran(75, "fleet fl-a fl-b.3.0a1b2c3d"))).toBeUndefined();
    expect(found(ran(76, "fleet toString toString.3.0a1b2c3d"))).toBeUndefined();
    expect(found(ran(77))).toBeUndefined();
  });
});

describe("whether a run is Fleet's dispatch of a task's attempt (its id not recorded yet)", () => {
  const fleets = (t: { id: string; attempts: number }, over: object = {}) => ({
    event: "workflow_dispatch",
    triggering_actor: { login: "Fleet[bot]" },
    display_title: runName(t),
    ...over,
  });
  const t = task("fl-a", 2);

  it("is: a dispatch by the app's bot whose run-name names this task and attempt", () => {
    expect(isFleetDispatchOf(t, fleets(t), "fleet")).toBe(true);
  });

  it("is not: someone else's dispatch or re-run, another event, another attempt or task, no slug", () => {
    expect(isFleetDispatchOf(t, fleets(t, { triggering_actor: { login: "mona" } }), "fleet")).toBe(false);
    expect(isFleetDispatchOf(t, fleets(t, { triggering_actor: null }), "fleet")).toBe(false);
    expect(isFleetDispatchOf(t, fleets(t, { event: "push" }), "fleet")).toBe(false);
    expect(isFleetDispatchOf(t, fleets({ id: "fl-a", attempts: 1 }), "fleet")).toBe(false);
    expect(isFleetDispatchOf(t, fleets({ id: "fl-b", attempts: 2 }), "fleet")).toBe(false);
    expect(isFleetDispatchOf(t, fleets(t, { display_title: "fleet-task" }), "fleet")).toBe(false);
    expect(isFleetDispatchOf(t, fleets(t), "other-app")).toBe(false);
    expect(isFleetDispatchOf(t, fleets(t), "")).toBe(false);
  });
});

describe("the dispatch a run is for, from its correlation_id input", () => {
  const AT = "2026-12-06T10:00:00.123Z";
  const dispatched = (id: string, attempts: number, acquiredAt = AT) => ({
    ...task(id, attempts),
    lease: { holder: "fleet", slot: 1, acquiredAt, heartbeatAt: acquiredAt, expiresAt: acquiredAt },
  });

  it("reads Fleet's own correlation ids (attempt and the dispatch's time), task ids with dots included", () => {
    expect(dispatchOf("fl-a1b2", newCorrelationId(dispatched("fl-a1b2", 3) as never))).toEqual({
      attempt: 3,
      dispatchedAt: Date.parse(AT),
    });
    expect(dispatchOf("bd-a3f8.1", newCorrelationId(dispatched("bd-a3f8.1", 12) as never))).toEqual({
      attempt: 12,
      dispatchedAt: Date.parse(AT),
    });
    // The form before the dispatch's time was named (a run dispatched by an older Fleet): the attempt alone.
    expect(dispatchOf("fl-a1b2", "fl-a1b2.3.0a1b2c3d")).toEqual({ attempt: 3 });
    // The time rides in the hex, so an earlier version's reading (`<attempt>.<hex>`) still finds the attempt.
    const id = newCorrelationId(dispatched("fl-a1b2", 3) as never);
    expect(id).toMatch(/^fl-a1b2\.3\.[0-9a-f]{20}$/);
    expect(/^(\d+)\.[0-9a-f]+$/.exec(id.slice("fl-a1b2.".length))?.[1]).toBe("3");
    expect(dispatchOf("fl-a1b2", newCorrelationId(task("fl-a1b2", 3) as never))).toEqual({ attempt: 3 });
  });

  it("is undefined for another task's id, a malformed one, or none", () => {
    expect(dispatchOf("fl-a1", newCorrelationId(dispatched("fl-a1b2", 3) as never))).toBeUndefined();
    expect(dispatchOf("fl-a1b2", "fl-a1b2.3")).toBeUndefined();
    expect(dispatchOf("fl-a1b2", "fl-a1b2.x.00ff")).toBeUndefined();
    expect(dispatchOf("fl-a1b2", "fl-a1b2.3.zz")).toBeUndefined();
    expect(dispatchOf("fl-a1b2", "fl-a1b2.3.00ff.")).toBeUndefined();
    expect(dispatchOf("fl-a1b2", "fl-a1b2.3.00ff.12")).toBeUndefined();
    // Hex of another length than 8 or 20: the attempt, no time.
    expect(dispatchOf("fl-a1b2", "fl-a1b2.3.0a1b2c3d00")).toEqual({ attempt: 3 });
    expect(dispatchOf("fl-a1b2", undefined)).toBeUndefined();
    expect(dispatchOf("fl-a1b2", 3)).toBeUndefined();
  });

  // An attempt given back (a run that failed before its agent, a hand-off) is counted again by the next
  // dispatch: the number repeats, the dispatch's time does not. A run of the earlier dispatch (a re-run
  // of it, a runner that picked it up late) must not take the later one.
  it("tells a later dispatch of the same attempt number from the one a run was started for", () => {
    const first = dispatched("fl-a", 2);
    const named = dispatchOf("fl-a", newCorrelationId(first as never))!;
    expect(isDispatchNamed(first, named)).toBe(true);
    const again = dispatched("fl-a", 2, "2026-12-06T10:05:00.000Z");
    expect(isDispatchNamed(again, named)).toBe(false);
    expect(isDispatchNamed(dispatched("fl-a", 3), named)).toBe(false);
    // A run of an older Fleet's dispatch names the attempt only; a task with no lease is judged by it too.
    expect(isDispatchNamed(again, { attempt: 2 })).toBe(true);
    expect(isDispatchNamed(task("fl-a", 2), named)).toBe(true);
    // The app's match of a finished run (its id not recorded) holds to the dispatch as well.
    const run = {
      event: "workflow_dispatch",
      triggering_actor: { login: "fleet[bot]" },
      display_title: `fleet fl-a ${newCorrelationId(first as never)}`,
    };
    expect(isFleetDispatchOf(first, run, "fleet")).toBe(true);
    expect(isFleetDispatchOf(again, run, "fleet")).toBe(false);
    expect(taskOfRun({ "fl-a": again }, { ...run, id: 90 }, "fleet")).toBeUndefined();
    expect(taskOfRun({ "fl-a": first }, { ...run, id: 90 }, "fleet")?.id).toBe("fl-a");
  });
});
