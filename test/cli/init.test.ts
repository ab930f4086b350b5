import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { CODER_NAMES } from "../../src/core/coders.ts";
import { fleetYmlTemplate } from "../../src/core/config-template.ts";
import { fleetLabelDefinitions } from "../../src/core/labels.ts";
import { TASK_WORKFLOW_PATH, taskWorkflowFor } from "../../src/core/task-workflow.ts";
import { demoCoder } from "../../src/demo/coder-scripts.ts";
import { type ActionRun, type Dispatched, runActionBundle } from "../support/action-runner.ts";
import { type Harness, startHarness } from "../support/harness.ts";
import { workflowErrors } from "../support/workflow-check.ts";
import { cliEnv, fleet } from "./cli-helpers.ts";

const KEY = "sk-ant-init-test-credential-0000000000";

interface InitReport {
  dryRun: boolean;
  action: string;
  files: Array<{ path: string; action: string }>;
  labels: { created?: string[]; missing?: string[]; skipped?: string };
  left: string[];
}

describe("fleet init in a scratch clone, against the offline GitHub and the real app", () => {
  let h: Harness;
  let scratch: string;
  let clone: string;
  let env: Record<string, string>;
  const template = () => readFile(TASK_WORKFLOW_PATH, "utf8");
  const git = (...args: string[]) =>
    execa("git", ["-c", "user.name=Mona", "-c", "user.email=mona@example.com", ...args], { cwd: clone });
  const init = (...args: string[]) =>
    fleet(["init", "--repo", h.full, "--api-url", h.gh.url, ...args], { cwd: clone, env });
  const initJson = async (...args: string[]): Promise<InitReport> => {
    const r = await init(...args, "--json");
    expect(r.exitCode, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as InitReport;
  };
  const actions = (r: InitReport) => Object.fromEntries(r.files.map((f) => [f.path, f.action]));
  const repoLabels = async () =>
    (await h.mona.paginate(h.mona.rest.issues.listLabelsForRepo, { owner: h.owner, repo: h.name })).map(
      (l) => l.name,
    );

  beforeAll(async () => {
    h = await startHarness({ name: "gadgets" });
    scratch = await mkdtemp(join(tmpdir(), "fleet-init-"));
    clone = join(scratch, "gadgets");
    await execa("git", ["clone", "-q", h.cloneUrl, clone]);
    env = cliEnv({ FLEET_HOME: join(scratch, "home"), GITHUB_TOKEN: h.gh.userToken("mona") });
  }, 120_000);
  afterAll(async () => {
    await h?.stop();
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  it("writes the config and the workflow, creates the labels, says what is left; again, it changes nothing", async () => {
    const labelNames = fleetLabelDefinitions(CODER_NAMES).map((l) => l.name);
    // A dry run writes and creates nothing, and says what it would.
    const before = await repoLabels();
    const missing = labelNames.filter((n) => !before.includes(n));
    expect(missing).not.toEqual([]);
    const dry = await initJson("--dry-run");
    expect(actions(dry)).toEqual({ ".github/fleet.yml": "create", [TASK_WORKFLOW_PATH]: "create" });
    expect(dry.labels.missing).toEqual(missing);
    expect(existsSync(join(clone, ".github"))).toBe(false);
    expect(await repoLabels()).toEqual(before);

    const first = await initJson();
    expect(first.dryRun).toBe(false);
    expect(first.action).toBe("fleet-dev/fleet@v1");
    expect(actions(first)).toEqual({ ".github/fleet.yml": "create", [TASK_WORKFLOW_PATH]: "create" });
    expect(first.labels.created).toEqual(missing);
    expect((await repoLabels()).sort()).toEqual(expect.arrayContaining(labelNames));
    // The files: the config's defaults, and this repository's own workflow (one template, one owner).
    expect(await readFile(join(clone, ".github/fleet.yml"), "utf8")).toBe(fleetYmlTemplate());
    const written = await readFile(join(clone, TASK_WORKFLOW_PATH), "utf8");
    expect(written).toBe(await template());
    expect(await workflowErrors([{ name: TASK_WORKFLOW_PATH, content: written }])).toEqual([[]]);
    const w = parse(written) as { permissions: Record<string, string>; jobs: { task: { steps: unknown[] } } };
    expect(w.permissions).toEqual({ contents: "read", "id-token": "write" });
    expect(JSON.stringify(w.jobs.task.steps)).toContain('"uses":"fleet-dev/fleet@v1"');
    expect(first.left[0]).toMatch(/^Commit and push to the default branch: git add \.github\/fleet\.yml /);
    expect(first.left.join("\n")).toMatch(/Actions secrets .* ANTHROPIC_API_KEY \(claude, opencode\)/);
    expect(first.left.at(-1)).toMatch(/labels self-hosted, fleet/);

    // Again: nothing to write or create, nothing to push.
    const again = await initJson();
    expect(actions(again)).toEqual({ ".github/fleet.yml": "unchanged", [TASK_WORKFLOW_PATH]: "unchanged" });
    expect(again.labels.created).toEqual([]);
    expect(again.left.join("\n")).not.toMatch(/Commit and push/);

    // A file someone changed is kept, unless --force.
    const mine = `${fleetYmlTemplate()}max_concurrent: 5\n`;
    await writeFile(join(clone, ".github/fleet.yml"), mine);
    const kept = await init();
    expect(kept.exitCode).toBe(0);
    expect(kept.stdout).toMatch(
      /^ {2}\.github\/fleet\.yml: kept \(it differs from Fleet's; --force replaces it\)$/m,
    );
    expect(kept.stdout).toMatch(/^Left to do:\n {2}1\. /m);
    expect(await readFile(join(clone, ".github/fleet.yml"), "utf8")).toBe(mine);
    // Another owner's published action: the workflow differs, so it takes --force too.
    const acme = await initJson("--action-owner", "acme-corp", "--force");
    expect(actions(acme)).toEqual({ ".github/fleet.yml": "overwrite", [TASK_WORKFLOW_PATH]: "overwrite" });
    expect(await readFile(join(clone, TASK_WORKFLOW_PATH), "utf8")).toBe(
      taskWorkflowFor(await template(), "acme-corp"),
    );
    expect((await init("--action-owner", "not/me")).exitCode).toBe(2);
  }, 180_000);

  it("the workflow it writes is the one the app dispatches and the runner runs: the task's PR", async () => {
    await initJson("--force");
    await git("add", ".github");
    await git("commit", "-q", "-m", "Set up Fleet");
    await git("push", "-q", "origin", "HEAD:main");
    await h.settle();

    const coder = demoCoder("claude");
    const model = await coder.startModel();
    try {
      const finished = new Promise<{ run: Dispatched; result: ActionRun }>((resolveRun, reject) => {
        h.gh.onWorkflowDispatch((run) => {
          void (async () => {
            await h.gh.setWorkflowRunStatus(h.full, run.id, "in_progress");
            // The runner reads the step from the workflow init wrote; the credential is an Actions secret.
            const result = await runActionBundle({
              h,
              run,
              scratch,
              secrets: { ANTHROPIC_API_KEY: KEY },
              inputs: { "model-base-url": model.url, "agent-env": "CLAUDE_CODE_MAX_RETRIES=0" },
            });
            await h.gh.setWorkflowRunStatus(
              h.full,
              run.id,
              "completed",
              result.code === 0 ? "success" : "failure",
            );
            resolveRun({ run, result });
          })().catch(reject);
        });
      });
      const issue = await h.newIssue("Add a changelog", "We need a CHANGELOG.md with an Unreleased section.");
      await h.label(issue, "fleet:claude");
      const { run, result } = await finished;
      expect(run.workflowPath).toBe(TASK_WORKFLOW_PATH);
      expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0);
      expect(result.outputs.conclusion).toBe("pr-opened");
      expect(result.stdout).toContain(`::add-mask::${KEY}`);
      const pr = h.gh.pulls(h.full).find((p) => p.head.startsWith(`fleet/${issue}-`));
      expect(pr?.body).toContain(`Closes #${issue}`);
      expect(result.outputs["pr-number"]).toBe(String(pr?.number));
    } finally {
      await model.stop();
    }
  }, 240_000);
});
