import { type ScriptServer, startAnthropicScriptServer } from "@fleet/model-servers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Task } from "../../src/core/task.ts";
import { totalTokens } from "../../src/core/usage.ts";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import { abComparisonMarker } from "../../src/render/ab-comparison.ts";
import { createGitHubStateStore } from "../../src/state/github-store.ts";
import { postAbComparisonIfDue } from "../../src/worker/runs/ab-comparison.ts";
import { botClient, waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";
import { startTestWorker, type TestWorker } from "../support/worker.ts";

/** One side's script: a Bash call that changes files and writes RESULT.json, then a final answer. */
const side = (command: string, result: object, usage: { input_tokens: number; output_tokens: number }) => [
  {
    toolUses: [
      {
        name: "Bash",
        input: {
          command: `${command} && for d in ../.fleet-task-*; do echo '${JSON.stringify(result)}' > "$d/RESULT.json"; done`,
          description: "change files and write the result",
        },
      },
    ],
    usage,
  },
  { text: "Finished.", usage },
];

describe("A/B runs: one issue, two coder labels, through the real app, worker and Claude CLI", () => {
  let h: Harness;
  let model: ScriptServer;
  let worker: TestWorker;

  beforeAll(async () => {
    h = await startHarness({
      files: {
        ".github/fleet.yml":
          "dispatch: local\nmax_concurrent: 1\nplan_phase: false\ntimeouts: { run_minutes: 2, stall_minutes: 1 }\n",
      },
    });
    // The sides run one after the other (one slot); whichever starts first plays the first script.
    model = await startAnthropicScriptServer({
      turns: [
        ...side(
          "echo one > ONE.md",
          { status: "done", summary: "one file", testsRun: ["npm test: ok", "lint: ok"], followUps: [] },
          { input_tokens: 1000, output_tokens: 100 },
        ),
        ...side(
          "printf 'two\\ntwo\\n' > TWO.md && echo three > THREE.md",
          {
            status: "partial",
            summary: "two files",
            testsRun: ["npm test: 1 failed, 3 passed"],
            followUps: [],
          },
          { input_tokens: 2000, output_tokens: 50 },
        ),
      ],
    });
    worker = await startTestWorker(h, {
      credentialFor: () => ({ name: "anthropic-ab", value: "sk-ant-ab-credential-0000000000" }),
      modelBaseUrl: model.url,
    });
  });

  afterAll(async () => {
    await worker?.stop();
    await model?.stop();
    await h?.stop();
  });

  it("runs both as separate tasks with separate PRs and posts one comparison when both have finished", async () => {
    const issue = await h.newIssue("Add the files", "Add the files the way you see fit.");
    await h.label(issue, "fleet:claude:opus", "fleet:claude:sonnet");
    const comparisons = () => h.botComments(issue).filter((c) => c.body.includes(abComparisonMarker(issue)));

    const comparison = await waitFor("the A/B comparison", async () => comparisons()[0], 240_000);
    const tasks = (await h.tasks()).filter((t) => t.issue === issue);
    expect(tasks.map((t) => t.model).sort()).toEqual(["opus", "sonnet"]);
    for (const t of tasks) {
      expect(t.state).toBe("pr-open");
      expect(t.result?.attempt).toBe(t.attempts);
    }
    // Separate branches and PRs, each closing the issue.
    const prs = tasks.map((t) => h.gh.pulls(h.full).find((p) => p.number === t.pr)!);
    expect(new Set(prs.map((p) => p.head)).size).toBe(2);
    for (const pr of prs) expect(pr.body).toContain(`Closes #${issue}`);

    // One column per side, with that side's own figures.
    const body = comparison.body;
    expect(body).toContain("`claude:opus`");
    expect(body).toContain("`claude:sonnet`");
    const row = (label: string) => body.split("\n").find((l) => l.startsWith(`| ${label} |`))!;
    const byOrder = [...tasks].sort(
      (a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id),
    );
    const cells = (label: string) =>
      row(label)
        .split(" | ")
        .slice(1)
        .map((c) => c.replace(/ \|$/, ""));
    expect(cells("Task")).toEqual(byOrder.map((t) => `\`${t.id}\``));
    expect(cells("Pull request")).toEqual(byOrder.map((t) => `#${t.pr}`));
    expect(cells("Tokens")).toEqual(byOrder.map((t) => totalTokens(t.totals!.usage).toLocaleString("en-US")));
    expect(cells("Turns")).toEqual(byOrder.map((t) => String(t.totals!.turns)));
    // Which side played which script depends on who started first; the figures follow the side.
    const sideOf = (t: Task) => (t.totals!.usage.input === 2000 ? "one" : "two");
    expect(byOrder.map((t) => t.totals!.usage.input).sort()).toEqual([2000, 4000]);
    expect(cells("Diff")).toEqual(
      byOrder.map((t) => (sideOf(t) === "one" ? "1 files, +1 −0" : "2 files, +3 −0")),
    );
    expect(cells("Tests passed / run")).toEqual(
      byOrder.map((t) => (sideOf(t) === "one" ? "2 / 2" : "0 / 1")),
    );
    expect(cells("Agent's verdict")).toEqual(byOrder.map((t) => (sideOf(t) === "one" ? "done" : "partial")));
    expect(cells("Cost").every((c) => /^\$\d+\.\d{4}$/.test(c))).toBe(true);

    // A redelivered label or a repeated call posts nothing new.
    await h.label(issue, "fleet:claude:sonnet");
    // Another worker of the repository, as a second process would be.
    const octokit = await botClient(h.gh, h.full);
    const store = createGitHubStateStore({
      github: githubOverOctokit(octokit),
      owner: h.owner,
      repo: h.name,
    });
    const repo = { owner: h.owner, repo: h.name };
    expect(await postAbComparisonIfDue({ store, github: githubOverOctokit(octokit), repo }, issue)).toBe(
      false,
    );
    expect(comparisons()).toHaveLength(1);
    expect(comparisons()[0]!.body).toBe(body);

    // A side run again (a new attempt recorded) edits the same comment in place.
    const rerun = byOrder[0]!;
    await store.update(({ doc }) => {
      const t = doc.tasks[rerun.id]!;
      const again = { ...t, attempts: t.attempts + 1, result: { attempt: t.attempts + 1, status: "done" } };
      return { doc: { ...doc, tasks: { ...doc.tasks, [rerun.id]: again } }, message: "rerun" };
    });
    expect(await postAbComparisonIfDue({ store, github: githubOverOctokit(octokit), repo }, issue)).toBe(
      true,
    );
    expect(comparisons()).toHaveLength(1);
    expect(comparisons()[0]!.id).toBe(comparison.id);
    expect(comparisons()[0]!.body).not.toBe(body);
  }, 300_000);
});
