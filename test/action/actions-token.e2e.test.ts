// The app's token exchange for runners (POST /fleet/actions-token) against the emulator's OIDC
// issuer: who gets a token and who does not; and why it exists: with its own GITHUB_TOKEN, a run
// cannot open the task's pull request under GitHub's default settings.
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Task } from "../../src/core/task.ts";
import { type ScriptServer, startAnthropicScriptServer } from "../../src/offline/models/anthropic-server.ts";
import { type ActionRun, type Dispatched, runActionBundle } from "../support/action-runner.ts";
import { waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";

const FLEET_YML =
  "dispatch: actions\nplan_phase: false\nretries: { max: 0 }\ntimeouts: { run_minutes: 2, stall_minutes: 1 }\n";
const USAGE = { input_tokens: 100, output_tokens: 10 };

describe("the runner's token exchange", () => {
  let h: Harness;
  let scratch: string;
  let model: ScriptServer;
  const dispatched: Dispatched[] = [];

  beforeAll(async () => {
    const workflow = await readFile(".github/workflows/fleet-task.yml", "utf8");
    h = await startHarness({
      files: { ".github/fleet.yml": FLEET_YML, ".github/workflows/fleet-task.yml": workflow },
    });
    scratch = await mkdtemp(join(tmpdir(), "fleet-actions-token-"));
    model = await startAnthropicScriptServer({
      turns: [
        {
          toolUses: [{ name: "Bash", input: { command: "echo x > X.md", description: "write" } }],
          usage: USAGE,
        },
        { text: "Done.", usage: USAGE },
      ],
    });
    h.gh.onWorkflowDispatch((run) => {
      dispatched.push(run);
      void h.gh.setWorkflowRunStatus(h.full, run.id, "in_progress");
    });
  }, 120_000);
  afterAll(async () => {
    await model?.stop();
    await h?.stop();
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  /** A labeled issue's task once its run is dispatched and recorded. */
  async function liveTask(title: string): Promise<{ task: Task; run: Dispatched }> {
    const issue = await h.newIssue(title, `${title}.`);
    await h.label(issue, "fleet:claude");
    const task = await waitFor("the run to be recorded", async () => {
      const t = (await h.tasks()).find((x) => x.issue === issue);
      return t?.runId ? t : undefined;
    });
    return { task, run: dispatched.find((r) => String(r.id) === task.runId)! };
  }

  /** The job's OIDC token, fetched as @actions/core's getIDToken does. */
  async function oidcToken(runId: number, audience = "fleet"): Promise<string> {
    const env = h.gh.jobEnvironment(h.full, runId);
    const res = await fetch(`${env.ACTIONS_ID_TOKEN_REQUEST_URL}&audience=${audience}`, {
      headers: { authorization: `Bearer ${env.ACTIONS_ID_TOKEN_REQUEST_TOKEN}` },
    });
    return ((await res.json()) as { value: string }).value;
  }

  const exchange = async (bearer: string | undefined, taskId: string) => {
    const res = await fetch(`${h.app.url}/fleet/actions-token`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(bearer ? { authorization: `Bearer ${bearer}` } : {}),
      },
      body: JSON.stringify({ task_id: taskId }),
    });
    return { status: res.status, body: (await res.json()) as { token?: string; message?: string } };
  };

  it("gives the dispatched run of a live task a token for that repository only", async () => {
    const { task, run } = await liveTask("Exchange");
    const ok = await exchange(await oidcToken(run.id), task.id);
    expect(ok.status).toBe(201);
    const token = ok.body.token!;
    const as = (path: string) =>
      fetch(`${h.gh.url}${path}`, { headers: { authorization: `token ${token}` } }).then((r) => r.status);
    expect(await as(`/repos/${h.full}`)).toBe(200);
    const other = await h.gh.createRepo({ owner: h.owner, name: "other", files: { "README.md": "x\n" } });
    expect(await as(`/repos/${other.fullName}`)).toBe(404);
  });

  it("refuses a missing or foreign token, a wrong audience, another run, and an unknown task", async () => {
    const { task, run } = await liveTask("Refusals");
    expect((await exchange(undefined, task.id)).status).toBe(401);
    expect((await exchange("not-a-jwt", task.id)).status).toBe(401);
    const wrongAudience = await exchange(await oidcToken(run.id, "https://github.com/octo-org"), task.id);
    expect(wrongAudience.status).toBe(401);
    expect(wrongAudience.body.message).toMatch(/not accepted/);
    // Someone starts Fleet's workflow by hand, naming a live task: its run is not the task's.
    const { data: manual } = await h.mona.request(
      "POST /repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches",
      {
        owner: h.owner,
        repo: h.name,
        workflow_id: "fleet-task.yml",
        ref: "main",
        inputs: { task_id: task.id },
        return_run_details: true,
      },
    );
    const manualRun = (manual as { workflow_run_id: number }).workflow_run_id;
    const foreign = await exchange(await oidcToken(manualRun), task.id);
    expect(foreign.status).toBe(403);
    expect(foreign.body.message).toMatch(new RegExp(`dispatched as run ${task.runId}, not run ${manualRun}`));
    expect((await exchange(await oidcToken(run.id), "fl-nope")).status).toBe(404);
  });

  it("with only the job's own GITHUB_TOKEN the run cannot open the PR (GitHub's default setting)", async () => {
    const { task, run } = await liveTask("Job token only");
    const result: ActionRun = await runActionBundle({
      h,
      run,
      scratch,
      inputs: {
        "fleet-url": "",
        "github-token": h.gh.jobEnvironment(h.full, run.id).GITHUB_TOKEN,
        credentials: "ANTHROPIC_API_KEY=sk-ant-job-token-test-0000000000",
        "model-base-url": model.url,
        "agent-env": "CLAUDE_CODE_MAX_RETRIES=0",
      },
    });
    expect(result.outputs.conclusion).toBe("failed");
    const after = (await h.tasks()).find((t) => t.id === task.id)!;
    expect(after.reason).toMatch(/GitHub Actions is not permitted to create or approve pull requests/);
    expect(h.gh.pulls(h.full).some((p) => p.head.startsWith(`fleet/${task.issue}-`))).toBe(false);
  }, 120_000);
});
