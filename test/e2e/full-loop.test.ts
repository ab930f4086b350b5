import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { type ScriptServer, startAnthropicScriptServer } from "@fleet/model-servers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Task } from "../../src/core/task.ts";
import { waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";
import { startTestWorker, type TestWorker } from "../support/worker.ts";

const FLEET_YML =
  "dispatch: local\nmax_concurrent: 1\nplan_phase: false\ntimeouts: { run_minutes: 2, stall_minutes: 1 }\n";
const USAGE = {
  input_tokens: 1200,
  output_tokens: 80,
  cache_read_input_tokens: 300,
  cache_creation_input_tokens: 40,
};

/** Two model turns per task: a Bash call that writes a file, then a final answer. */
const taskTurns = (file: string) => [
  {
    toolUses: [
      { name: "Bash", input: { command: `echo "made by fleet" > ${file}`, description: "write file" } },
    ],
    usage: USAGE,
  },
  { text: `Wrote ${file}.`, usage: USAGE },
];

describe("label -> queue -> local worker runs the real Claude CLI -> PR -> merge -> next task", () => {
  let h: Harness;
  let model: ScriptServer;
  let worker: TestWorker;

  beforeAll(async () => {
    // The same house rules twice, under two names Claude reads: Fleet must flag the waste.
    const rules = `# House rules\n\n${"Run the tests before you finish. ".repeat(40)}\n`;
    h = await startHarness({
      files: { ".github/fleet.yml": FLEET_YML, "CLAUDE.md": rules, ".claude/CLAUDE.md": rules },
    });
    model = await startAnthropicScriptServer({
      turns: [...taskTurns("FIRST.md"), ...taskTurns("SECOND.md")],
    });
    worker = await startTestWorker(h, { modelBaseUrl: model.url });
  });

  afterAll(async () => {
    await worker?.stop();
    await model?.stop();
    await h?.stop();
  });

  const taskOf = async (issue: number): Promise<Task | undefined> =>
    (await h.tasks()).find((t) => t.issue === issue);

  it("runs the first task to a PR while its dependent waits, and starts the dependent when the PR merges", async () => {
    const first = await h.newIssue("Add FIRST.md", "Create FIRST.md.");
    const second = await h.newIssue("Add SECOND.md", `Create SECOND.md.\n\nDepends on #${first}`);
    await h.label(first, "fleet:claude");
    await h.label(second, "fleet:claude");

    const opened = await waitFor(
      "the first task's PR",
      async () => {
        const t = await taskOf(first);
        // The PR's webhook may move the task before the worker records its totals.
        return t?.state === "pr-open" && t.totals ? t : undefined;
      },
      120_000,
    );
    expect(opened.pr).toBeGreaterThan(0);
    expect((await taskOf(second))?.state).toBe("blocked");

    // The agent's work is in the PR, with the script's token figures on the task.
    const pr = h.gh.pulls(h.full).find((p) => p.number === opened.pr)!;
    expect(pr.head).toMatch(/^fleet\/\d+-add-first-md/);
    expect(pr.body).toContain(`Closes #${first}`);
    expect(opened.totals?.usage.input).toBe(2400);
    expect(opened.totals?.usage.output).toBe(160);
    expect(opened.totals?.usage.cacheRead).toBe(600);
    expect(opened.totals?.usage.cacheWrite).toBe(80);

    // The context the agent loaded, measured: the duplicate flagged, the first turn's real cost recorded.
    const context = JSON.parse(
      await readFile(join(worker.workDir, "tasks", opened.id, "context.json"), "utf8"),
    );
    expect(context.sources.find((s: { path: string }) => s.path === ".claude/CLAUDE.md")?.duplicateOf).toBe(
      "CLAUDE.md",
    );
    expect(context.duplicateTokens).toBeGreaterThan(250);
    expect(context.firstTurnTokens).toBe(
      USAGE.input_tokens + USAGE.cache_read_input_tokens + USAGE.cache_creation_input_tokens,
    );

    // The tracking comment is edited in place, throttled: it shows the new state shortly after the state has it.
    const tracking = await waitFor(
      "the tracking comment to show pr-open",
      async () =>
        h.botComments(first).find((c) => c.body.includes("fleet:tracking") && c.body.includes("pr-open")),
      30_000,
    );
    expect(tracking.body).toContain(`#${opened.pr}`);

    await h.mona.rest.pulls.merge({ owner: h.owner, repo: h.name, pull_number: opened.pr! });
    await h.settle();
    expect((await taskOf(first))?.state).toBe("done");

    const secondOpened = await waitFor(
      "the second task's PR",
      async () => {
        const t = await taskOf(second);
        return t?.state === "pr-open" ? t : undefined;
      },
      120_000,
    );
    const pr2 = h.gh.pulls(h.full).find((p) => p.number === secondOpened.pr)!;
    expect(pr2.head).toMatch(/^fleet\/\d+-add-second-md/);
  }, 300_000);
});
