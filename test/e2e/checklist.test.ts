// Live progress: the real Claude CLI's to-do calls (TaskCreate, TaskUpdate) against a scripted model
// server become a checklist in the task's tracking comment through the real app and worker on the
// emulator, ticked as the run goes (seen while the model holds a turn), and left ticked at the end.
import { type ScriptServer, startAnthropicScriptServer } from "@fleet/model-servers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";
import { startTestWorker, type TestWorker } from "../support/worker.ts";

const FLEET_YML =
  "dispatch: local\nmax_concurrent: 1\nplan_phase: false\nretries: { max: 0 }\ntimeouts: { run_minutes: 3, stall_minutes: 2 }\n";
const USAGE = { input_tokens: 800, output_tokens: 40 };

describe("the agent's checklist on the tracking comment", () => {
  let h: Harness;
  let model: ScriptServer;
  let worker: TestWorker;

  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": FLEET_YML } });
    model = await startAnthropicScriptServer({
      turns: [
        {
          toolUses: [
            { name: "TaskCreate", input: { subject: "Write the greeting", description: "HELLO.md" } },
            { name: "TaskCreate", input: { subject: "Say done", description: "the summary" } },
          ],
          usage: USAGE,
        },
        {
          toolUses: [
            { name: "TaskUpdate", input: { taskId: "1", status: "in_progress" } },
            { name: "Write", input: { file_path: "HELLO.md", content: "hello\n" } },
            { name: "TaskUpdate", input: { taskId: "1", status: "completed" } },
          ],
          usage: USAGE,
        },
        // Held: the comment is read while the agent waits on its model.
        {
          toolUses: [{ name: "TaskUpdate", input: { taskId: "2", status: "completed" } }],
          usage: USAGE,
          stallMs: 6_000,
        },
        { text: "Wrote HELLO.md.", usage: USAGE },
      ],
    });
    worker = await startTestWorker(h, { modelBaseUrl: model.url, concurrency: 1 });
  });

  afterAll(async () => {
    await worker?.stop();
    await model?.stop();
    await h?.stop();
  });

  const tracking = (issue: number) =>
    h.botComments(issue).find((c) => c.body.includes("fleet:tracking"))?.body ?? "";

  it("is ticked as the run goes and stays ticked at the end", async () => {
    const issue = await h.newIssue("Greeting", "Write HELLO.md.");
    await h.label(issue, "fleet:claude");
    const during = await waitFor(
      "the first item ticked while the agent runs",
      async () => (tracking(issue).includes("- [x] Write the greeting") ? tracking(issue) : undefined),
      180_000,
    );
    expect(during).toContain("**Progress** (1 of 2 done)");
    expect(during).toContain("- [ ] Say done");
    const task = await waitFor(
      "the PR",
      async () => (await h.tasks()).find((t) => t.issue === issue && t.state === "pr-open"),
      180_000,
    );
    expect(task.pr).toBeGreaterThan(0);
    // The state commit that opens the PR lands before the worker edits the tracking comment with its report.
    const end = await waitFor(
      "the run's report on the tracking comment",
      async () => (tracking(issue).includes("fleet:section report") ? tracking(issue) : undefined),
      60_000,
    );
    expect(end).toContain("**Progress** (2 of 2 done)");
    expect(end).toContain("- [x] Say done");
    // Between the state and the run's report.
    expect(end.indexOf("**Progress**")).toBeLessThan(end.indexOf("fleet:section report"));
  }, 400_000);
});
