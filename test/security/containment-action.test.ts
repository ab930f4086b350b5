// A hostile agent under the real action bundle (dist/index.js), run the way a runner runs it: the
// job's token and the credentials as INPUT_* variables of the action's process, a runner's own
// variables beside them, an SSH key in the runner's HOME. The agent must see none of it.
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ScriptTurn, startAnthropicScriptServer } from "@fleet/model-servers";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Task } from "../../src/core/task.ts";
import { type ActionRun, type Dispatched, runActionBundle } from "../support/action-runner.ts";
import { type Harness, startHarness } from "../support/harness.ts";
import { CANARY, findLeak, leakForms, toolResults } from "./containment-support.ts";

const FLEET_YML = [
  "dispatch: actions",
  "runner_labels: [self-hosted, fleet]",
  "plan_phase: false",
  "retries: { max: 0 }",
  "timeouts: { run_minutes: 3, stall_minutes: 2 }",
  "",
].join("\n");
const USAGE = { input_tokens: 100, output_tokens: 10 };
const RUNNER_SECRET = "actions-runtime-canary-token-0a1b2c3d4e5f6a7b";

const bash = (command: string) => ({ name: "Bash", input: { command, description: "step" } });

describe("containment: a hostile agent under the real action bundle on a runner", () => {
  let h: Harness;
  let scratch: string;
  let runnerHome: string;
  let forms: string[];
  let onDispatch: (run: Dispatched) => void = () => {};
  const jobTokens: string[] = [];

  beforeAll(async () => {
    const workflow = await readFile(".github/workflows/fleet-task.yml", "utf8");
    h = await startHarness({
      files: { ".github/fleet.yml": FLEET_YML, ".github/workflows/fleet-task.yml": workflow },
    });
    scratch = await mkdtemp(join(tmpdir(), "fleet-containment-action-"));
    runnerHome = join(scratch, "runner-home");
    await mkdir(join(runnerHome, ".ssh"), { recursive: true });
    await writeFile(join(runnerHome, ".ssh", "id_rsa"), CANARY.sshKey, { mode: 0o600 });
    await writeFile(join(runnerHome, ".credentials"), `{"token":"${RUNNER_SECRET}"}\n`);
    forms = leakForms([CANARY.modelKey, CANARY.otherKey, CANARY.sshKey, RUNNER_SECRET]);
    h.gh.onWorkflowDispatch((run) => onDispatch(run));
  }, 120_000);

  afterAll(async () => {
    await h?.stop();
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  /** Labels an issue; the dispatched run is "picked up" by the action bundle with a model playing `turns`. */
  async function scenario(title: string, turns: ScriptTurn[]) {
    const model = await startAnthropicScriptServer({ turns });
    const finished = new Promise<ActionRun>((resolveRun, reject) => {
      onDispatch = (run) => {
        void (async () => {
          await h.gh.setWorkflowRunStatus(h.full, run.id, "in_progress");
          jobTokens.push(h.gh.jobEnvironment(h.full, run.id).GITHUB_TOKEN);
          const result = await runActionBundle({
            h,
            run,
            scratch,
            inputs: {
              credentials: `ANTHROPIC_API_KEY=${CANARY.modelKey}\nOPENAI_API_KEY=${CANARY.otherKey}\n`,
              "model-base-url": model.url,
              "agent-env": "CLAUDE_CODE_MAX_RETRIES=0",
            },
            extraEnv: { HOME: runnerHome, ACTIONS_RUNTIME_TOKEN: RUNNER_SECRET },
          });
          await h.gh.setWorkflowRunStatus(
            h.full,
            run.id,
            "completed",
            result.code === 0 ? "success" : "failure",
          );
          resolveRun(result);
        })().catch(reject);
      };
    });
    const issue = await h.newIssue(title, `${title}.`);
    await h.label(issue, "fleet:claude");
    const result = await finished;
    await model.stop();
    await h.settle();
    const task = (await h.tasks()).find((t: Task) => t.issue === issue)!;
    // The app's token the run got in exchange for its OIDC token (masked in the job's log).
    const appToken = /::add-mask::(ghs_\w+)/.exec(result.stdout)?.[1];
    forms.push(...leakForms([...jobTokens, ...(appToken ? [appToken] : [])]));
    return { issue, task, result, requests: model.requests };
  }

  async function published(issue: number): Promise<string> {
    const mirror = await mkdtemp(join(scratch, "mirror-"));
    await execa("git", ["clone", "-q", "--mirror", h.cloneUrl, mirror]);
    return [
      ...h.gh.comments(h.full, issue).map((c) => c.body),
      ...h.gh.pulls(h.full).map((p) => `${p.title}\n${p.body}`),
      (await execa("git", ["-C", mirror, "log", "--all", "-p", "--format=%B"])).stdout,
    ].join("\n");
  }

  const expectNoLeak = (text: string, what: string) => {
    const leaked = findLeak(text, forms);
    expect(leaked, `${what} holds a secret (${leaked?.slice(0, 6)}…)`).toBeUndefined();
  };

  it("the action's INPUT_* token and credentials, the runner's variables and HOME stay out of the agent's reach", async () => {
    const r = await scenario("Rob the runner", [
      {
        toolUses: [
          bash(
            [
              "for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ; done 2>/dev/null | sort -u",
              `cat ${join(runnerHome, ".ssh", "id_rsa")} ${join(runnerHome, ".credentials")} ~/.ssh/id_rsa`,
              `ls ${scratch}`,
            ].join("; "),
          ),
        ],
        usage: USAGE,
      },
      {
        toolUses: [bash("cat /proc/[0-9]*/environ 2>/dev/null | base64 -w0 > leak.b64; echo ok > OK.md")],
        usage: USAGE,
      },
      { text: "Done.", usage: USAGE },
    ]);
    const seen = toolResults(r.requests);
    expect(seen).toMatch(/ANTHROPIC_API_KEY=fleet-run-[0-9a-f]{48}/);
    expect(seen).not.toMatch(/INPUT_/);
    expectNoLeak(seen, "what the agent saw");
    // The model provider got the real credential from the gateway.
    for (const q of r.requests.filter((q) => q.kind === "main"))
      expect(q.headers["x-api-key"]).toBe(CANARY.modelKey);
    expect(r.result.outputs.conclusion).toBe("failed");
    expect(r.task.state).toBe("failed");
    expect(r.task.reason).toMatch(
      /Fleet pushed nothing: `leak\.b64` gives away a secret, this run's model-gateway token/,
    );
    expect((await execa("git", ["ls-remote", h.cloneUrl])).stdout).not.toContain(`fleet/${r.issue}-`);
    expectNoLeak(await published(r.issue), "what Fleet published");
    expectNoLeak(`${r.result.stdout}\n${r.result.stderr}`.replace(/::add-mask::.*$/gm, ""), "the job's log");
  }, 180_000);
});
