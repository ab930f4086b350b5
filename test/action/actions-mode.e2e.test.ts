import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ScriptServer, startAnthropicScriptServer } from "@fleet/model-servers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Task } from "../../src/core/task.ts";
import { type ActionRun, type Dispatched, runActionBundle } from "../support/action-runner.ts";
import { waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";

const FLEET_YML = [
  "dispatch: actions",
  "runner_labels: [self-hosted, fleet, test]",
  "max_concurrent: 2",
  "plan_phase: false",
  // A short backoff: the retry after a lost runner starts by the wake-up timer, with no event.
  "retries: { max: 1, backoff_seconds: 1 }",
  "timeouts: { run_minutes: 2, stall_minutes: 1 }",
  "",
].join("\n");
const USAGE = {
  input_tokens: 1200,
  output_tokens: 80,
  cache_read_input_tokens: 300,
  cache_creation_input_tokens: 40,
};
const CREDENTIAL = "sk-ant-action-credential-0000000000";
const UNRELATED = "sk-openai-unrelated-credential-1111111111";

describe("dispatch: actions — the app dispatches the workflow, the runner runs dist/index.js", () => {
  let h: Harness;
  let model: ScriptServer;
  let scratch: string;
  /** What the test's "runner" does with each dispatch. */
  let onDispatch: (run: Dispatched) => void = () => {};

  beforeAll(async () => {
    const workflow = await readFile(".github/workflows/fleet-task.yml", "utf8");
    h = await startHarness({
      files: {
        ".github/fleet.yml": FLEET_YML,
        ".github/workflows/fleet-task.yml": workflow,
        // The repository's own CI: it must run on Fleet's PR.
        ".github/workflows/ci.yml":
          "name: CI\non: [pull_request]\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ok\n",
      },
    });
    model = await startAnthropicScriptServer({
      turns: [
        {
          toolUses: [
            {
              name: "Bash",
              input: { command: 'echo "made on a runner" > RUNNER.md', description: "write file" },
            },
          ],
          usage: USAGE,
        },
        { text: "Wrote RUNNER.md.", usage: USAGE },
      ],
    });
    scratch = await mkdtemp(join(tmpdir(), "fleet-action-e2e-"));
    h.gh.onWorkflowDispatch((run) => onDispatch(run));
  }, 120_000);

  afterAll(async () => {
    await model?.stop();
    await h?.stop();
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  const taskOf = async (issue: number): Promise<Task | undefined> =>
    (await h.tasks()).find((t) => t.issue === issue);
  const runOf = (id: number | string) => h.gh.workflowRuns(h.full).find((r) => r.id === Number(id));

  /** Runs the bundled action the way a runner does: INPUT_* variables and the GITHUB_* files. */
  const runAction = (run: Dispatched): Promise<ActionRun> =>
    runActionBundle({
      h,
      run,
      scratch,
      inputs: {
        credentials: `ANTHROPIC_API_KEY=${CREDENTIAL}\nOPENAI_API_KEY=${UNRELATED}\n`,
        "model-base-url": model.url,
        "agent-env": "CLAUDE_CODE_MAX_RETRIES=0",
      },
    });

  it("runs the task on the 'runner': PR, outputs, job summary, then follows the run to done", async () => {
    const finished = new Promise<{ run: Dispatched; result: ActionRun }>((resolveRun, reject) => {
      onDispatch = (run) => {
        void (async () => {
          await h.gh.setWorkflowRunStatus(h.full, run.id, "in_progress");
          const result = await runAction(run);
          await h.gh.setWorkflowRunStatus(
            h.full,
            run.id,
            "completed",
            result.code === 0 ? "success" : "failure",
          );
          resolveRun({ run, result });
        })().catch(reject);
      };
    });
    const issue = await h.newIssue("Add RUNNER.md", "Create RUNNER.md.");
    await h.label(issue, "fleet:claude");

    const { run, result } = await finished;
    expect(run.inputs.task_id).toBe((await taskOf(issue))?.id);
    expect(JSON.parse(String(run.inputs.runner_labels))).toEqual(["self-hosted", "fleet", "test"]);
    expect(String(run.inputs.correlation_id)).toContain(String(run.inputs.task_id));
    expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0);

    // The PR on the emulator, and the action's outputs and summary.
    const pr = h.gh.pulls(h.full).find((p) => p.head.startsWith(`fleet/${issue}-`));
    expect(pr?.body).toContain(`Closes #${issue}`);
    expect(result.outputs.conclusion).toBe("pr-opened");
    expect(result.outputs["pr-number"]).toBe(String(pr?.number));
    expect(result.outputs["tokens-input"]).toBe("2400");
    expect(result.outputs["tokens-output"]).toBe("160");
    expect(result.outputs["tokens-cache-read"]).toBe("600");
    expect(result.outputs["tokens-cache-write"]).toBe("80");
    expect(result.outputs["log-path"]).toMatch(/agent\.log$/);
    expect(await readFile(result.outputs["log-path"]!, "utf8")).not.toHaveLength(0);
    expect(result.summary).toContain("| Input tokens | 2,400 |");
    expect(result.summary).toContain("| Credential | `ANTHROPIC_API_KEY` |");
    // Secrets are masked in the log and appear in nothing posted.
    expect(result.stdout).toContain(`::add-mask::${CREDENTIAL}`);
    const posted = h.gh.comments(h.full, issue).map((c) => c.body);
    expect(posted.join("\n")).not.toContain(CREDENTIAL);
    // The app's token the run got in exchange for its OIDC token: masked, and never posted.
    const appToken = /::add-mask::(ghs_\w+)/.exec(result.stdout)?.[1];
    expect(appToken).toBeDefined();
    expect(posted.join("\n")).not.toContain(appToken!);
    // The PR is the app's, so the repository's CI ran on it (a job token's PR would start none).
    const ci = h.gh.workflowRuns(h.full).filter((r) => r.workflowPath === ".github/workflows/ci.yml");
    expect(ci.map((r) => [r.event, r.headBranch, r.actor.login])).toEqual([
      ["pull_request", pr!.head, h.gh.botLogin],
    ]);

    // The app followed the run: the task holds it, its run link is on the tracking comment.
    await h.settle();
    const task = await taskOf(issue);
    expect(task?.state).toBe("pr-open");
    expect(task?.runId).toBe(String(run.id));
    expect(runOf(run.id)).toMatchObject({ status: "completed", conclusion: "success" });
    const tracking = h.botComments(issue).find((c) => c.body.includes("fleet:tracking"));
    expect(tracking?.body).toContain(`/actions/runs/${run.id}`);

    await h.mona.rest.pulls.merge({ owner: h.owner, repo: h.name, pull_number: pr!.number });
    await h.settle();
    expect((await taskOf(issue))?.state).toBe("done");
  }, 120_000);

  /**
   * A task whose first run, never taken by a runner, ends without a report (cancelled): the task is
   * retried, back in the queue and dispatched again as a new run. Its runs and both task states.
   */
  const retriedOnce = async (title: string, body: string) => {
    const dispatched: Dispatched[] = [];
    onDispatch = (run) => {
      dispatched.push(run);
      void h.gh.setWorkflowRunStatus(h.full, run.id, "in_progress");
    };
    const issue = await h.newIssue(title, body);
    await h.label(issue, "fleet:claude");
    const first = await waitFor("the first run to be recorded", async () => {
      const t = await taskOf(issue);
      return t?.runId ? t : undefined;
    });
    await h.gh.setWorkflowRunStatus(h.full, Number(first.runId), "completed", "cancelled");
    await h.settle();
    const second = await waitFor("the retry's run", async () => {
      const t = await taskOf(issue);
      return t?.attempts === 2 && t.runId && t.runId !== first.runId ? t : undefined;
    });
    return { issue, dispatched, first, second };
  };

  it("notices a runner lost mid-run (the run ends without a report): retries, then fails with the reason", async () => {
    const { issue, dispatched, first, second } = await retriedOnce(
      "Lost runner",
      "A runner that never reports.",
    );
    expect(first).toMatchObject({ state: "dispatched", attempts: 1, runId: String(dispatched[0]?.id) });
    expect(second.state).toBe("dispatched");
    expect(dispatched).toHaveLength(2);

    await h.gh.setWorkflowRunStatus(h.full, Number(second.runId), "completed", "failure");
    await h.settle();
    const failed = await waitFor("the task to fail", async () => {
      const t = await taskOf(issue);
      return t?.state === "failed" ? t : undefined;
    });
    expect(failed.reason).toContain(
      `the Actions run ${second.runId} ended with conclusion \`failure\` before the task reported`,
    );
    expect(failed.lease).toBeUndefined();
  }, 120_000);

  it("a cancel on the issue cancels the task's run", async () => {
    onDispatch = (run) => void h.gh.setWorkflowRunStatus(h.full, run.id, "in_progress");
    const issue = await h.newIssue("Cancelled", "Will be cancelled.");
    await h.label(issue, "fleet:claude");
    const task = await waitFor("the run to be recorded", async () => {
      const t = await taskOf(issue);
      return t?.runId ? t : undefined;
    });
    expect(runOf(task.runId!)?.status).toBe("in_progress");

    await h.unlabel(issue, "fleet:claude");
    await waitFor("the run to be cancelled", async () => runOf(task.runId!)?.conclusion === "cancelled");
    expect(runOf(task.runId!)).toMatchObject({ status: "completed", conclusion: "cancelled" });
    await h.settle();
    expect((await taskOf(issue))?.state).toBe("cancelled");
  }, 120_000);

  // With a token of its own (`github-token`), no exchange stands between a run and the task: the run
  // claims only the attempt it was dispatched for, read from its dispatch's correlation_id input.
  it("a run started after its task was dispatched again does not claim the new attempt", async () => {
    const { issue, dispatched, second } = await retriedOnce(
      "Late runner",
      "Its first run starts after the retry's dispatch.",
    );
    expect(dispatched[0]?.inputs.correlation_id).toMatch(new RegExp(`^${second.id}\\.1\\.`));

    const late = await runActionBundle({
      h,
      run: dispatched[0]!,
      scratch,
      inputs: { "github-token": h.gh.userToken("mona"), "model-base-url": model.url },
    });
    expect(late.outputs.conclusion).toBe("not-claimed");
    expect(late.code).toBe(0);
    const after = await taskOf(issue);
    expect(after).toMatchObject({ state: "dispatched", attempts: 2, runId: second.runId });
    expect(after?.lease?.holder).toBe(second.lease?.holder);

    await h.unlabel(issue, "fleet:claude");
  }, 120_000);

  // A run that ends before its agent (its runner lacks the coder's credential) gives its attempt back, so
  // the task's next dispatch counts the same attempt number again. A later run of the first dispatch (a
  // re-run of it, a runner that took it late) must not take the second: the dispatch's time tells them apart.
  it("a run of a dispatch does not claim a later dispatch of the same attempt number", async () => {
    const dispatched: Dispatched[] = [];
    onDispatch = (run) => {
      dispatched.push(run);
      void h.gh.setWorkflowRunStatus(h.full, run.id, "in_progress");
    };
    const issue = await h.newIssue("Given back", "Its first runner has no credential.");
    await h.label(issue, "fleet:claude");
    await waitFor("the first dispatch", async () => dispatched[0]);
    const inputs = { "github-token": h.gh.userToken("mona"), "model-base-url": model.url };
    const bare = await runActionBundle({
      h,
      run: dispatched[0]!,
      scratch,
      inputs: { ...inputs, credentials: "" },
    });
    expect(bare.stdout).toContain('No credential for coder "claude"');
    await h.settle();
    expect(await taskOf(issue)).toMatchObject({ state: "failed", attempts: 0 });

    await h.comment(issue, "/fleet retry");
    const again = await waitFor("the retry's dispatch", async () => {
      const t = await taskOf(issue);
      return t?.state === "dispatched" && dispatched.length === 2 ? t : undefined;
    });
    expect(again.attempts).toBe(1);
    expect(String(dispatched[1]!.inputs.correlation_id).split(".")[1]).toBe(
      String(dispatched[0]!.inputs.correlation_id).split(".")[1],
    );

    const late = await runActionBundle({
      h,
      run: dispatched[0]!,
      scratch,
      inputs: { ...inputs, credentials: `ANTHROPIC_API_KEY=${CREDENTIAL}\n` },
    });
    expect(late.outputs.conclusion).toBe("not-claimed");
    expect(late.code).toBe(0);
    const after = await taskOf(issue);
    expect(after).toMatchObject({ state: "dispatched", attempts: 1 });
    expect(after?.lease?.holder).toBe(again.lease?.holder);

    await h.unlabel(issue, "fleet:claude");
  }, 120_000);
});
