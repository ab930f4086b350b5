import { type ScriptServer, startAnthropicScriptServer } from "@fleet/model-servers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Task } from "../../src/core/task.ts";
import { waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";
import { startTestWorker, type TestWorker } from "../support/worker.ts";

const FLEET_YML =
  "dispatch: local\nmax_concurrent: 2\nplan_phase: false\nretries: { max: 0 }\ntimeouts: { run_minutes: 2, stall_minutes: 1 }\n";
const USAGE = { input_tokens: 900, output_tokens: 60 };

const planText = (plan: unknown) =>
  `Here is the split.\n\n\`\`\`json\n${JSON.stringify(plan, null, 2)}\n\`\`\`\n`;

const INVALID = {
  tasks: [
    { key: "db", title: "Add the table", dependsOn: [] },
    { key: "db", title: "Again", dependsOn: ["nowhere"] },
    { key: "ui", title: "Show it", coder: "gpt-9", dependsOn: [] },
  ],
};
const VALID = {
  tasks: [
    { key: "ui", title: "Show widgets in the UI", body: "Render them.", dependsOn: ["api"] },
    { key: "db", title: "Add the widgets table", body: "Create DB.md.", priority: 1, dependsOn: [] },
    { key: "api", title: "Expose widgets in the API", body: "Create API.md.", dependsOn: ["db"] },
  ],
};

describe("fleet:split: a planning run becomes dependent sub-issues (real Claude CLI, scripted model)", () => {
  let h: Harness;
  let model: ScriptServer;
  let worker: TestWorker;

  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": FLEET_YML } });
    model = await startAnthropicScriptServer({
      turns: [
        { text: planText(INVALID), usage: USAGE },
        { text: planText(VALID), usage: USAGE },
        // The first sub-task (db): one file, then a final answer.
        {
          toolUses: [{ name: "Bash", input: { command: "echo table > DB.md", description: "write file" } }],
          usage: USAGE,
        },
        { text: "Wrote DB.md.", usage: USAGE },
      ],
    });
    worker = await startTestWorker(h, {
      modelBaseUrl: model.url,
      concurrency: 1,
    });
  });

  afterAll(async () => {
    await worker?.stop();
    await model?.stop();
    await h?.stop();
  });

  const taskOf = async (issue: number): Promise<Task | undefined> =>
    (await h.tasks()).find((t) => t.issue === issue);

  it("rejects an invalid plan with every reason and creates nothing", async () => {
    const countIssues = async () =>
      (await h.mona.paginate(h.mona.rest.issues.listForRepo, { owner: h.owner, repo: h.name, state: "all" }))
        .length;
    const before = await countIssues();
    const epic = await h.newIssue("Widgets, roughly", "Do everything about widgets.");
    await h.label(epic, "fleet:split");
    const failed = await waitFor(
      "the split task to fail",
      async () => {
        const t = await taskOf(epic);
        return t?.state === "failed" ? t : undefined;
      },
      120_000,
    );
    expect(failed.reason).toContain("split plan is invalid");
    const notice = h.botComments(epic).find((c) => c.body.includes("fleet:split-plan"));
    expect(notice?.body).toContain("Nothing was created");
    expect(notice?.body).toContain('`tasks[1].key`: duplicate key "db" (also tasks[0])');
    expect(notice?.body).toContain('`tasks[1].dependsOn[0]`: unknown key "nowhere"');
    expect(notice?.body).toContain('`tasks[2].coder`: unknown coder "gpt-9"');
    expect(await countIssues()).toBe(before + 1);
  }, 180_000);

  // Each step's wait is long enough for a loaded machine; the whole case takes seconds when idle.
  it("creates three linked, labeled sub-issues queued in dependency order, and posts the graph", async () => {
    const epic = await h.newIssue("Widgets", "Add widgets end to end.");
    await h.label(epic, "fleet:split");
    const splitDone = await waitFor(
      "the split task to finish",
      async () => {
        const t = await taskOf(epic);
        return t?.state === "done" || t?.state === "failed" ? t : undefined;
      },
      120_000,
    );
    expect(splitDone.state).toBe("done");

    const { data: subs } = await h.mona.request(
      "GET /repos/{owner}/{repo}/issues/{issue_number}/sub_issues",
      {
        owner: h.owner,
        repo: h.name,
        issue_number: epic,
      },
    );
    const byTitle = new Map(
      (subs as Array<{ number: number; title: string; body: string; labels: Array<{ name: string }> }>).map(
        (s) => [s.title, s],
      ),
    );
    const db = byTitle.get("Add the widgets table")!;
    const api = byTitle.get("Expose widgets in the API")!;
    const ui = byTitle.get("Show widgets in the UI")!;
    expect(subs).toHaveLength(3);
    // Created dependencies first, so each "Depends on" names a real issue.
    expect(db.number).toBeLessThan(api.number);
    expect(api.number).toBeLessThan(ui.number);
    expect(api.body).toContain(`Depends on #${db.number}`);
    expect(ui.body).toContain(`Depends on #${api.number}`);
    expect(ui.body).toContain(`Part of #${epic}`);
    expect(db.labels.map((l) => l.name).sort()).toEqual(["fleet:claude", "fleet:p1"]);
    expect(api.labels.map((l) => l.name).sort()).toEqual(["fleet:claude", "fleet:p2"]);

    const graph = h.botComments(epic).find((c) => c.body.includes("fleet:split-plan"))!;
    expect(graph.body).toContain("```mermaid");
    expect(graph.body).toContain(`#${db.number} Add the widgets table`);
    expect(graph.body).toMatch(/t1 --> t2/);

    // The first runs; the others wait for it.
    expect((await taskOf(api.number))?.state).toBe("blocked");
    expect((await taskOf(ui.number))?.state).toBe("blocked");
    const first = await waitFor(
      "the first sub-task's PR",
      async () => {
        const t = await taskOf(db.number);
        return t?.state === "pr-open" ? t : undefined;
      },
      120_000,
    );
    expect((await taskOf(api.number))?.state).toBe("blocked");
    expect((await taskOf(ui.number))?.state).toBe("blocked");

    await h.mona.rest.pulls.merge({ owner: h.owner, repo: h.name, pull_number: first.pr! });
    await h.settle();
    expect((await taskOf(db.number))?.state).toBe("done");
    await waitFor("the second sub-task to leave blocked", async () => {
      const s = (await taskOf(api.number))?.state;
      return s !== undefined && s !== "blocked" ? s : undefined;
    });
    expect((await taskOf(ui.number))?.state).toBe("blocked");
    // The epic stays open while sub-issues remain.
    expect(h.gh.issue(h.full, epic)?.state).toBe("open");
  }, 300_000);
});
