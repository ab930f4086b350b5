import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  agentNotesDir,
  keepArtifacts,
  prepareNotesDir,
  readArtifacts,
  safeSegment,
  taskArtifactsDir,
} from "../../src/worker/workspace/artifacts.ts";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "fleet-artifacts-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("artifacts", () => {
  it("places notes next to the worktree and artifacts under tasks/<id>", () => {
    expect(agentNotesDir("/w/worktrees/t1/repo", "t1")).toBe("/w/worktrees/t1/.fleet-task-t1");
    expect(taskArtifactsDir("/w", "fl-a3f")).toBe("/w/tasks/fl-a3f");
    expect(safeSegment("../../etc")).toBe(".._.._etc");
    expect(() => safeSegment("..")).toThrow(/task id/);
  });

  it("reads a valid RESULT.json and fills defaults", async () => {
    await writeFile(join(dir, "RESULT.json"), JSON.stringify({ status: "done", summary: "ok" }));
    await writeFile(join(dir, "PLAN.md"), "1. x");
    const a = await readArtifacts(dir);
    expect(a.result).toEqual({ status: "done", summary: "ok", testsRun: [], followUps: [] });
    expect(a.plan).toBe("1. x");
    expect(a.resultProblem).toBeUndefined();
  });

  it("reports malformed or missing RESULT.json instead of throwing", async () => {
    expect((await readArtifacts(dir)).resultProblem).toMatch(/no RESULT.json/);
    await writeFile(join(dir, "RESULT.json"), "{not json");
    expect((await readArtifacts(dir)).resultProblem).toMatch(/not valid JSON/);
    await writeFile(join(dir, "RESULT.json"), JSON.stringify({ status: "great", summary: 3 }));
    const a = await readArtifacts(dir);
    expect(a.result).toBeUndefined();
    expect(a.resultProblem).toMatch(/status/);
    expect(a.rawResult).toEqual({ status: "great", summary: 3 });
  });

  it("clears stale notes and keeps copies", async () => {
    await writeFile(join(dir, "RESULT.json"), "{}");
    await prepareNotesDir(dir);
    expect((await readArtifacts(dir)).rawResult).toBeUndefined();
    await writeFile(join(dir, "KNOWLEDGE.md"), "k");
    await keepArtifacts(dir, join(dir, "kept"));
    expect(await readFile(join(dir, "kept", "KNOWLEDGE.md"), "utf8")).toBe("k");
  });
});

describe("RESULT.json's text, as Fleet publishes it", () => {
  it("is quoted when read: no mention, no reference to another repository, no closing reference", async () => {
    const raw = {
      status: "done",
      summary: "Done for @mona. Fixes #3, see other/repo#4",
      testsRun: ["npm test -- @carol"],
      followUps: ["<details>\n@octo-org/everyone\n</details>"],
    };
    await writeFile(join(dir, "RESULT.json"), JSON.stringify(raw));
    const a = await readArtifacts(dir);
    const J = "\u200d";
    expect(a.result).toEqual({
      status: "done",
      summary: `Done for \`@${J}mona\`. Fixes \`#${J}3\`, see \`other/repo#${J}4\``,
      testsRun: [`npm test -- \`@${J}carol\``],
      followUps: [`<details>\n\`@${J}octo-org/everyone\`\n</details>`],
    });
    // As the agent wrote it, for `fleet task <id> result` and the secret scan.
    expect(a.rawResult).toEqual(raw);
  });
});
