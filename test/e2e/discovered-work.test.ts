import { type ScriptServer, startAnthropicScriptServer } from "@fleet/model-servers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseJsonl } from "../../src/beads/parse.ts";
import { parseFleetConfig } from "../../src/core/config.ts";
import type { Task } from "../../src/core/task.ts";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import type { GitHub } from "../../src/github/port.ts";
import { localDispatcher } from "../../src/queue/dispatcher.ts";
import { createRepoQueue } from "../../src/queue/repo-queue.ts";
import { createGitHubStateStore } from "../../src/state/github-store.ts";
import type { TaskOutcome } from "../../src/worker/3-attempt.ts";
import { fileDiscoveredWork } from "../../src/worker/runs/discovered-work.ts";
import { waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";
import { startTestWorker, type TestWorker } from "../support/worker.ts";

const FLEET_YML =
  "dispatch: local\nmax_concurrent: 1\nplan_phase: false\nretries: { max: 0 }\ntimeouts: { run_minutes: 3, stall_minutes: 2 }\n";
const USAGE = { input_tokens: 800, output_tokens: 40 };

/** One run: a file in the repository and a RESULT.json with these follow-ups in the notes folder. */
const runTurns = (file: string, followUps: string[]) => {
  const result = JSON.stringify({ status: "done", summary: `Added ${file}.`, testsRun: [], followUps });
  return [
    {
      toolUses: [
        {
          name: "Bash",
          input: {
            // The notes folder sits next to the worktree (its path is in the prompt).
            command: `echo done > ${file} && printf '%s' '${result}' > "$(ls -d ../.fleet-task-*)/RESULT.json"`,
            description: "write the file and the result",
          },
        },
      ],
      usage: USAGE,
    },
    { text: `Added ${file}.`, usage: USAGE },
  ];
};

describe("discovered work: RESULT.json follow-ups become linked issues (real Claude CLI, scripted model)", () => {
  let h: Harness;
  let model: ScriptServer;
  let worker: TestWorker;
  let github: GitHub;
  const outcomes = new Map<string, TaskOutcome>();

  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": FLEET_YML } });
    model = await startAnthropicScriptServer({
      turns: [
        ...runTurns("PARSER.md", [
          "Add tests for the widget parser",
          "Document the `--dry-run` flag",
          "Rotate the demo key in the docs",
        ]),
        ...runTurns("CACHE.md", ["Evict stale widgets from the cache"]),
      ],
    });
    worker = await startTestWorker(h, {
      modelBaseUrl: model.url,
      concurrency: 1,
      onOutcome: (id, o) => outcomes.set(id, o),
    });
    github = worker.github;
  });

  afterAll(async () => {
    await worker?.stop();
    await model?.stop();
    await h?.stop();
  });

  const taskOf = async (issue: number): Promise<Task | undefined> =>
    (await h.tasks()).find((t) => t.issue === issue);
  const allIssues = async () =>
    (
      await h.mona.paginate(h.mona.rest.issues.listForRepo, { owner: h.owner, repo: h.name, state: "all" })
    ).filter((i) => !i.pull_request);
  const discoveredFrom = async (issue: number) =>
    (await allIssues())
      .filter((i) => (i.body ?? "").startsWith(`Discovered while working on #${issue} `))
      .sort((a, b) => a.number - b.number);
  const beads = async () =>
    parseJsonl(
      (
        await createGitHubStateStore({
          github: githubOverOctokit(h.mona),
          owner: h.owner,
          repo: h.name,
        }).read()
      ).beads,
    ).records.map((r) => r.issue);

  it("files each follow-up as an unlabeled issue that names the task's issue and PR, linked discovered-from in beads, once", async () => {
    const issue = await h.newIssue("Widget parser", "Parse widgets.");
    await h.label(issue, "fleet:claude");
    const task = await waitFor(
      "the task's PR",
      async () => {
        const t = await taskOf(issue);
        return t?.state === "pr-open" && t.pr ? t : undefined;
      },
      240_000,
    );
    // The run has ended (its follow-ups are filed before the worker records its outcome).
    const outcome = await waitFor("the run's outcome", async () => outcomes.get(task.id), 120_000);
    const found = await discoveredFrom(issue);
    expect(found.map((i) => i.title)).toEqual([
      "Add tests for the widget parser",
      "Document the `--dry-run` flag",
      "Rotate the demo key in the docs",
    ]);
    for (const i of found) {
      expect(i.body).toContain(`Discovered while working on #${issue} (pull request #${task.pr}).`);
      expect(i.labels).toEqual([]);
      // Not queued: nobody asked a coder to work on it.
      expect(await taskOf(i.number)).toBeUndefined();
    }
    const linked = (await beads()).filter((b) =>
      b.dependencies?.some((d) => d.type === "discovered-from" && d.depends_on_id === task.id),
    );
    expect(linked.map((b) => b.external_ref).sort()).toEqual(found.map((i) => `gh-${i.number}`).sort());
    expect(linked.every((b) => b.status === "open")).toBe(true);

    // The same run's report processed again (a redelivery, a restarted worker): nothing new.
    const issuesBefore = (await allIssues()).length;
    const beadsBefore = JSON.stringify(await beads());
    const store = createGitHubStateStore({
      github,
      owner: h.owner,
      repo: h.name,
    });
    const loaded = parseFleetConfig(FLEET_YML);
    if (!loaded.ok) throw new Error("fleet.yml in this test is invalid");
    const again = await fileDiscoveredWork(task, outcome, {
      github,
      repo: { owner: h.owner, repo: h.name },
      store,
      queue: createRepoQueue({
        repo: h.full,
        store,
        fileConfig: loaded.config,
        dispatcher: localDispatcher,
      }),
      config: loaded.config,
    });
    expect(again.sort()).toEqual(found.map((i) => i.number));
    expect((await allIssues()).length).toBe(issuesBefore);
    expect(JSON.stringify(await beads())).toBe(beadsBefore);
  }, 300_000);

  it("with auto_label_discovered the issue gets the task's coder label and is queued", async () => {
    // auto_label_discovered lets an agent's follow-ups queue runs: it is file-only, refused by config set.
    const cmdIssue = await h.newIssue("Settings", "");
    await h.comment(cmdIssue, "/fleet config set auto_label_discovered=true");
    expect(h.botComments(cmdIssue).at(-1)?.body).toContain("auto_label_discovered is file-only");
    // So a maintainer sets it in the file, on the default branch; a fresh worker reads it at once.
    await worker.stop();
    const { data: current } = await h.mona.rest.repos.getContent({
      owner: h.owner,
      repo: h.name,
      path: ".github/fleet.yml",
    });
    await h.mona.rest.repos.createOrUpdateFileContents({
      owner: h.owner,
      repo: h.name,
      path: ".github/fleet.yml",
      message: "fleet: queue discovered work",
      content: Buffer.from(`${FLEET_YML}auto_label_discovered: true\n`).toString("base64"),
      sha: (current as { sha: string }).sha,
    });
    await h.settle();
    worker = await startTestWorker(h, {
      modelBaseUrl: model.url,
      concurrency: 1,
      onOutcome: (id, o) => outcomes.set(id, o),
    });
    const issue = await h.newIssue("Widget cache", "Cache widgets.");
    await h.label(issue, "fleet:claude");
    const parent = await waitFor(
      "the second task's run to end",
      async () => {
        const t = await taskOf(issue);
        return t && outcomes.has(t.id) ? t : undefined;
      },
      240_000,
    );
    const [found] = await discoveredFrom(issue);
    expect(found!.title).toBe("Evict stale widgets from the cache");
    expect(found!.labels.map((l) => (typeof l === "string" ? l : l.name))).toEqual(["fleet:claude"]);
    const queued = (await taskOf(found!.number))!;
    expect(queued.coder).toBe("claude");
    // One bead for the issue: the task's, carrying the discovered-from link.
    const forIssue = (await beads()).filter((b) => b.external_ref === `gh-${found!.number}`);
    expect(forIssue).toHaveLength(1);
    expect(forIssue[0]!.id).toBe(queued.id);
    expect(forIssue[0]!.dependencies?.map((d) => [d.type, d.depends_on_id])).toContainEqual([
      "discovered-from",
      parent.id,
    ]);
  }, 300_000);
});
