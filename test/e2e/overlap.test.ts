import { afterEach, describe, expect, it } from "vitest";
import type { Task } from "../../src/core/task.ts";
import { type Harness, startHarness } from "../support/harness.ts";

// No worker runs here: dispatched tasks stay dispatched, so what the real app decided stays visible.
const fleetYml = (serialize: boolean) =>
  `dispatch: local\nmax_concurrent: 3\nplan_phase: false\nserialize_overlapping: ${serialize}\n`;

describe("serialize_overlapping through the real app", () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.stop();
    h = undefined;
  });

  const byIssue = async (issue: number): Promise<Task> => (await h!.tasks()).find((t) => t.issue === issue)!;

  it("holds the later of two tasks whose issues name the same file, and says why on its issue", async () => {
    h = await startHarness({
      files: { ".github/fleet.yml": fleetYml(true), "src/a.ts": "export const a = 1;\n" },
    });
    const first = await h.newIssue("Make a two", "Change `src/a.ts` so that `a` is 2.");
    const second = await h.newIssue("Make a three", "In src/a.ts set a to 3, and add `src/b.ts`.");
    const third = await h.newIssue("Docs", "Update `README.md`.");
    await h.label(first, "fleet:claude");
    await h.label(second, "fleet:claude");
    await h.label(third, "fleet:claude");

    expect((await byIssue(first)).files).toEqual(["src/a.ts"]);
    expect((await byIssue(second)).files).toEqual(["src/a.ts", "src/b.ts"]);
    expect((await byIssue(first)).state).toBe("dispatched");
    const held = await byIssue(second);
    expect(held.state).toBe("queued");
    expect(held.reason).toBe(`waits for gh-${first}: both touch src/a.ts`);
    // A task on other files takes the free slot meanwhile.
    expect((await byIssue(third)).state).toBe("dispatched");
    const tracking = h.botComments(second).find((c) => c.body.includes("fleet:tracking"));
    expect(tracking?.body).toContain(`waits for gh-${first}: both touch src/a.ts`);

    // Once the first task is cancelled its slot and its files are free: the held task starts.
    await h.comment(first, "/fleet cancel");
    expect((await byIssue(first)).state).toBe("cancelled");
    expect((await byIssue(second)).state).toBe("dispatched");
  }, 120_000);

  it("runs the same two tasks together when serialize_overlapping is off", async () => {
    h = await startHarness({
      files: { ".github/fleet.yml": fleetYml(false), "src/a.ts": "export const a = 1;\n" },
    });
    const first = await h.newIssue("Make a two", "Change `src/a.ts` so that `a` is 2.");
    const second = await h.newIssue("Make a three", "In src/a.ts set a to 3.");
    await h.label(first, "fleet:claude");
    await h.label(second, "fleet:claude");
    expect((await byIssue(first)).state).toBe("dispatched");
    const other = await byIssue(second);
    expect(other.state).toBe("dispatched");
    expect(other.reason).toBeUndefined();
  }, 120_000);
});
