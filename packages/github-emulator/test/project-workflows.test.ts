import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { type GitHubEmulator, startGitHubEmulator } from "../src/index.ts";
import { userOctokit } from "../src/test-helpers.ts";

/**
 * This repository's own workflows and action, read the way GitHub reads them (through the emulator):
 * CI on every push and pull request, the task workflow by dispatch only, and every JavaScript action
 * at a major that runs on Node 24.
 */
const CI = readFileSync(".github/workflows/ci.yml", "utf8");
const TASK = readFileSync(".github/workflows/fleet-task.yml", "utf8");

// The first majors whose runs.using is node24 (their release notes).
const NODE24_MAJORS: Record<string, number> = {
  "actions/checkout": 5,
  "actions/setup-node": 5,
  "actions/upload-artifact": 6,
};

let em: GitHubEmulator;
beforeAll(async () => {
  em = await startGitHubEmulator();
  await em.createRepo({
    owner: "fleet-dev",
    name: "fleet",
    files: {
      "README.md": "# fleet\n",
      ".github/workflows/ci.yml": CI,
      ".github/workflows/fleet-task.yml": TASK,
    },
  });
  em.addCollaborator("fleet-dev/fleet", "mona", "write");
});
afterAll(async () => {
  await em?.stop();
});

describe("the project's workflows", () => {
  it("CI runs on pushes to any branch and on pull requests; the task workflow only when dispatched", async () => {
    const mona = userOctokit(em, "mona");
    const repo = { owner: "fleet-dev", repo: "fleet" };
    const { data: main } = await mona.rest.git.getRef({ ...repo, ref: "heads/main" });
    await mona.rest.git.createRef({ ...repo, ref: "refs/heads/feature", sha: main.object.sha });
    await mona.rest.repos.createOrUpdateFileContents({
      ...repo,
      path: "x.txt",
      branch: "feature",
      message: "Add x",
      content: Buffer.from("x\n").toString("base64"),
    });
    await mona.rest.pulls.create({ ...repo, head: "feature", base: "main", title: "Add x" });
    const runs = em.workflowRuns("fleet-dev/fleet").map((r) => [r.name, r.event, r.headBranch]);
    expect(runs).toEqual([
      ["CI", "push", "feature"],
      ["CI", "push", "feature"],
      ["CI", "pull_request", "feature"],
    ]);
  });

  it("uses actions at majors that run on Node 24, and the action itself runs on node24", () => {
    for (const text of [CI, TASK]) {
      const doc = parse(text) as { jobs: Record<string, { steps: Array<{ uses?: string }> }> };
      for (const job of Object.values(doc.jobs)) {
        for (const step of job.steps) {
          const m = /^([^@]+)@v(\d+)$/.exec(step.uses ?? "");
          if (!m || !(m[1]! in NODE24_MAJORS)) continue;
          expect(Number(m[2]), step.uses).toBeGreaterThanOrEqual(NODE24_MAJORS[m[1]!]!);
        }
      }
    }
    const action = parse(readFileSync("action.yml", "utf8")) as {
      runs: { using: string };
      outputs: Record<string, unknown>;
    };
    expect(action.runs.using).toBe("node24");
    expect(Object.keys(action.outputs)).toContain("artifacts-dir");
    // The task workflow uploads that folder under the name the CLI looks for.
    const upload = (
      parse(TASK) as { jobs: { task: { steps: Array<{ uses?: string; with?: Record<string, unknown> }> } } }
    ).jobs.task.steps.find((s) => s.uses?.startsWith("actions/upload-artifact@"))!;
    // Actions expressions, built so they do not read as JS template placeholders.
    const expr = (e: string) => `$\{{ ${e} }}`;
    expect(upload.with).toMatchObject({
      name: `fleet-${expr("inputs.task_id")}`,
      path: expr("steps.fleet.outputs.artifacts-dir"),
    });
  });

  it("CI tests on Node 24 (and 22, which engines allows) with bubblewrap; .ci/run runs npm test on Node 24", () => {
    const doc = parse(CI) as {
      jobs: { test: { strategy: { matrix: { node: number[] } }; steps: Array<{ run?: string }> } };
    };
    expect(doc.jobs.test.strategy.matrix.node).toEqual([24, 22]);
    const runs = doc.jobs.test.steps.map((s) => s.run ?? "").join("\n");
    expect(runs).toMatch(/apt-get install[^\n]*bubblewrap/);
    expect(runs).toMatch(/^npm test$/m);
    const engines = (JSON.parse(readFileSync("package.json", "utf8")) as { engines: { node: string } })
      .engines.node;
    expect(engines).toBe(">=22.12");
    const ciRun = readFileSync(".ci/run", "utf8");
    expect(ciRun).toMatch(/npm install --prefix "\$prefix"[^\n]* node@24/);
    expect(ciRun).toMatch(/missing\+=\(bubblewrap\)/);
    expect(ciRun.trim().split("\n").at(-1)).toBe("npm test");
  });
});
