import { type ScriptServer, startAnthropicScriptServer } from "@fleet/model-servers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseJsonl } from "../../src/beads/parse.ts";
import { type FleetConfig, parseFleetConfig } from "../../src/core/config.ts";
import { JOINER } from "../../src/core/published-text.ts";
import type { Task } from "../../src/core/task.ts";
import type { GitHub } from "../../src/github/port.ts";
import { localDispatcher } from "../../src/queue/dispatcher.ts";
import { createRepoQueue, type RepoQueue } from "../../src/queue/repo-queue.ts";
import { createGitHubStateStore } from "../../src/state/github-store.ts";
import type { StateStore } from "../../src/state/store.ts";
import type { TaskOutcome } from "../../src/worker/3-attempt.ts";
import { fileDiscoveredWork } from "../../src/worker/runs/discovered-work.ts";
import { waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";
import { startTestWorker, type TestWorker } from "../support/worker.ts";

// What an agent writes in RESULT.json goes public through Fleet: as issues, in the PR body, in the
// run report. This checks that it goes out bounded, mentioning nobody, and queues at most one
// generation of work without a person.

const FLEET_YML =
  "dispatch: local\nmax_concurrent: 1\nplan_phase: false\nretries: { max: 0 }\ntimeouts: { run_minutes: 3, stall_minutes: 2 }\nmax_follow_ups: 4\n";
const USAGE = { input_tokens: 800, output_tokens: 40 };

/** An at-sign GitHub reads as a mention: outside code, right before a login's first character. */
const LIVE_AT = /(?:^|[^\w])@[A-Za-z0-9]/;
const J = JOINER;

const FOLLOW_UPS = [
  "Ask @octo-org/everyone and @carol about the parser",
  "Fixes #1 upstream too: see other-org/other#7",
  ...Array.from({ length: 118 }, (_, i) => `Tidy widget ${i}`),
];
const RESULT = {
  status: "done",
  summary: "Added PARSER.md for @mona. Fixes #1 and https://github.com/other-org/other/issues/9.",
  testsRun: ["npm test -- @carol"],
  followUps: FOLLOW_UPS,
};

const turns = [
  {
    toolUses: [
      {
        name: "Bash",
        input: {
          command: `echo done > PARSER.md && printf '%s' '${JSON.stringify(RESULT)}' > "$(ls -d ../.fleet-task-*)/RESULT.json"`,
          description: "write the file and the result",
        },
      },
    ],
    usage: USAGE,
  },
  { text: "Added PARSER.md.", usage: USAGE },
];

describe("what an agent writes goes out bounded and mentions nobody (real Claude CLI, scripted model)", () => {
  let h: Harness;
  let model: ScriptServer;
  let worker: TestWorker | undefined;
  let github: GitHub;
  const outcomes = new Map<string, TaskOutcome>();

  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": FLEET_YML } });
    model = await startAnthropicScriptServer({ turns });
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
      .filter((i) => (i.body ?? "").startsWith(`Discovered while working on #${issue}`))
      .sort((a, b) => a.number - b.number);
  const labelsOf = (i: { labels: Array<string | { name?: string }> }) =>
    i.labels.map((l) => (typeof l === "string" ? l : l.name));

  it("files max_follow_ups issues, quotes every mention and other repository, and says how many were left out", async () => {
    const issue = await h.newIssue("Widget parser", "Parse widgets.");
    await h.label(issue, "fleet:claude");
    const task = await waitFor(
      "the task's run to end",
      async () => {
        const t = await taskOf(issue);
        return t && outcomes.has(t.id) ? t : undefined;
      },
      240_000,
    );
    expect(outcomes.get(task.id)?.outcome).toBe("pr-opened");

    // Four issues (the file's max_follow_ups), titles and bodies quoting what the agent named.
    const found = await discoveredFrom(issue);
    expect(found.map((i) => i.title)).toEqual([
      `Ask \`@${J}octo-org/everyone\` and \`@${J}carol\` about the parser`,
      `Fixes \`#${J}1\` upstream too: see \`other-org/other#${J}7\``,
      "Tidy widget 0",
      "Tidy widget 1",
    ]);
    for (const i of found) {
      expect(i.title).not.toMatch(LIVE_AT);
      expect(i.body).not.toMatch(LIVE_AT);
      expect(i.body).not.toContain("other-org/other#7");
    }

    // The PR body: the agent's text quoted, the follow-ups listed (at most 30) with the count left out.
    const { data: pulls } = await h.mona.rest.pulls.list({ owner: h.owner, repo: h.name, state: "all" });
    const body = pulls.find((p) => p.number === task.pr)!.body ?? "";
    expect(body).toContain(`Closes #${issue}`);
    expect(body).toContain(`Added PARSER.md for \`@${J}mona\`. Fixes \`#${J}1\``);
    expect(body).not.toMatch(LIVE_AT);
    expect(body).not.toContain("https://github.com/other-org");
    expect(body).toContain(
      "Fleet files at most 4 follow-ups of a run as issues (`max_follow_ups`): 116 were left out.",
    );
    expect(body).toContain("- Tidy widget 27");
    expect(body).not.toContain("- Tidy widget 28");
    expect(body).toContain(`… and 90 more (\`fleet task ${task.id} result\`).`);

    // The run report in the tracking comment says it too, and quotes the summary (the log is fenced).
    const tracking = h.botComments(issue).find((c) => c.body.includes("fleet:tracking"))!.body;
    const report = tracking.slice(0, tracking.indexOf("<summary>Agent log</summary>"));
    expect(report).toContain("116 were left out");
    expect(report).toContain(`Added PARSER.md for \`@${J}mona\``);
    expect(report).not.toMatch(LIVE_AT);
  }, 300_000);

  describe("automatic chains stop after one generation", () => {
    let store: StateStore;
    let queue: RepoQueue;
    let config: FleetConfig;
    const outcome = (followUps: string[]): TaskOutcome => ({
      outcome: "no-changes",
      logPath: "",
      artifacts: { result: { status: "done", summary: "Looked around.", followUps } },
    });
    const file = (task: Task, followUps: string[]) =>
      fileDiscoveredWork(task, outcome(followUps), {
        github,
        repo: { owner: h.owner, repo: h.name },
        store,
        queue,
        config,
      });

    beforeAll(async () => {
      // No worker from here on: queued tasks stay queued, so the state shows what was queued.
      await worker?.stop();
      worker = undefined;
      const loaded = parseFleetConfig(`${FLEET_YML}auto_label_discovered: true\n`);
      if (!loaded.ok) throw new Error("fleet.yml in this test is invalid");
      config = loaded.config;
      store = createGitHubStateStore({ github, owner: h.owner, repo: h.name });
      queue = createRepoQueue({ repo: h.full, store, fileConfig: config, dispatcher: localDispatcher });
    });

    const enqueue = async (issue: number, extra: { epic?: number } = {}) => {
      await queue.enqueue({
        issue,
        title: "Work",
        body: "Do the work.",
        coder: "claude",
        model: "sonnet",
        priority: 2,
        dependsOn: [],
        requestedBy: "mona",
        ...extra,
      });
      return (await taskOf(issue))!;
    };

    it("a person's task's follow-up is labelled and queued; that follow-up's own follow-ups are not", async () => {
      const parent = await enqueue(await h.newIssue("Parent", "Asked for by a person."));
      const [child] = await file(parent, ["Child work"]);
      const childIssue = (await allIssues()).find((i) => i.number === child)!;
      expect(labelsOf(childIssue)).toEqual(["fleet:claude"]);
      const childTask = (await taskOf(child!))!;
      expect(childTask).toBeDefined();

      const [grandchild] = await file(childTask, ["Grandchild work", "Another one"]);
      const filed = await discoveredFrom(child!);
      expect(filed.map((i) => i.number)).toContain(grandchild);
      for (const i of filed) {
        expect(labelsOf(i)).toEqual([]);
        expect(i.body).toContain(
          `Fleet did not queue this one: #${child} is itself work an agent wrote (a follow-up or a split Fleet filed), and an agent's follow-ups are queued by themselves one generation deep only.`,
        );
        expect(await taskOf(i.number)).toBeUndefined();
      }
      // Still linked in beads, for a person to pick up.
      const beads = parseJsonl((await store.read()).beads).records.map((r) => r.issue);
      const linked = beads.filter((b) =>
        b.dependencies?.some((d) => d.type === "discovered-from" && d.depends_on_id === childTask.id),
      );
      expect(linked.map((b) => b.external_ref).sort()).toEqual(filed.map((i) => `gh-${i.number}`).sort());
    }, 120_000);

    it("a split's sub-issue is an agent's work too: its follow-ups are not queued", async () => {
      const epic = await h.newIssue("Epic", "Split me.");
      const sub = await enqueue(await h.newIssue("Sub-issue", "Part of the epic."), { epic });
      const [next] = await file(sub, ["After the sub-issue"]);
      const filed = (await allIssues()).find((i) => i.number === next)!;
      expect(labelsOf(filed)).toEqual([]);
      expect(await taskOf(next!)).toBeUndefined();
    }, 120_000);
  });
});
