import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { type ScriptServer, startAnthropicScriptServer } from "@fleet/model-servers";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Task } from "../../src/core/task.ts";
import { waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";
import { startTestWorker, type TestWorker } from "../support/worker.ts";

// network: host: the last agent plays "someone else" by calling a server of the test's on the host's
// loopback, which the default network (a namespace of its own, other hosts only through the proxy) refuses.
// coders.claude.options: the coder's options reach a rebase's conflict resolution as they reach a task's run.
const FLEET_YML =
  "dispatch: local\nmax_concurrent: 1\nplan_phase: false\nnetwork: host\ntimeouts: { run_minutes: 3, stall_minutes: 2 }\n" +
  "coders:\n  claude:\n    options:\n      append_system_prompt: FLEET-OPTIONS-MARKER\n";
const USAGE = { input_tokens: 900, output_tokens: 60 };
const config = (limit: string) =>
  `export const name = "widgets";\nexport const limit = ${limit};\nexport const mode = "fast";\n`;

/** One Bash call that writes src/config.ts with `content`, then a final answer. */
const writeConfig = (content: string, final: string) => [
  {
    toolUses: [
      {
        name: "Bash",
        input: { command: `printf '%s' '${content}' > src/config.ts`, description: "write src/config.ts" },
      },
    ],
    usage: USAGE,
  },
  { text: final, usage: USAGE },
];

/** "Someone else" on loopback: GET /move?ref=refs/heads/x points that branch of the remote at main. */
async function startBranchMover(gitDir: string) {
  const server = createServer((req, res) => {
    const ref = new URL(req.url ?? "/", "http://x").searchParams.get("ref") ?? "";
    void (async () => {
      if (!/^refs\/heads\/fleet\/[\w./-]+$/.test(ref)) throw new Error(`not a fleet branch: ${ref}`);
      const main = (await execa("git", ["--git-dir", gitDir, "rev-parse", "refs/heads/main"])).stdout;
      await execa("git", ["--git-dir", gitDir, "update-ref", ref, main]);
      res.end(`moved ${ref}`);
    })().catch((e: Error) => {
      res.statusCode = 400;
      res.end(e.message);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stop: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe("a merge makes other Fleet PRs conflict: Fleet rebases them (real git, real Claude CLI, scripted model)", () => {
  let h: Harness;
  let model: ScriptServer;
  let worker: TestWorker;
  let gitDir: string;
  let mover: Awaited<ReturnType<typeof startBranchMover>>;

  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": FLEET_YML, "src/config.ts": config("10") } });
    gitDir = fileURLToPath(h.cloneUrl);
    mover = await startBranchMover(gitDir);
    model = await startAnthropicScriptServer({
      turns: [
        // Three tasks change the same line, one after the other (one slot; priorities fix the order).
        ...writeConfig(config("20"), "Limit raised to 20."),
        ...writeConfig(config("30"), "Limit raised to 30."),
        ...writeConfig(config("40"), "Limit raised to 40."),
        // A fourth task on another file: its PR still merges cleanly after the merge.
        {
          toolUses: [
            {
              name: "Bash",
              input: {
                command: "printf '# widgets\\n\\nDocs.\\n' > README.md",
                description: "write README.md",
              },
            },
          ],
          usage: USAGE,
        },
        { text: "README updated.", usage: USAGE },
        // Rebase of the second task's PR: the agent resolves the conflict (keeps 30, notes the base's 20).
        ...writeConfig(
          `${config("30")}// main raised the limit to 20 meanwhile; this change keeps 30.\n`,
          "Resolved.",
        ),
        // Rebase of the third task's PR: the agent gives up and leaves the markers.
        {
          text: "Both sides set a different limit; I cannot tell which one is meant, so I left the markers.",
          usage: USAGE,
        },
        // `fleet:rebase` on the third task's issue: the agent gives up again.
        { text: "Still two different limits; markers left.", usage: USAGE },
        // `fleet:rebase` on the third task's PR: the agent resolves, but someone moves the branch meanwhile.
        {
          toolUses: [
            {
              name: "Bash",
              input: {
                // The agent cannot reach the remote's files from its sandbox: it asks the test to play
                // "someone else" and move the branch on the remote, and waits until that is done.
                command: `printf '%s' '${config("40")}' > src/config.ts && b=$(cat "$(git rev-parse --git-path rebase-merge/head-name)") && node -e 'fetch(process.argv[1]).then((r) => r.text()).then(console.log)' "${mover.url}/move?ref=$b"`,
                description: "resolve, while someone else moves the branch on the remote",
              },
            },
          ],
          usage: USAGE,
        },
        { text: "Resolved.", usage: USAGE },
      ],
    });
    worker = await startTestWorker(h, {
      modelBaseUrl: model.url,
    });
  });

  afterAll(async () => {
    await mover?.stop();
    await worker?.stop();
    await model?.stop();
    await h?.stop();
  });

  const taskOf = async (issue: number): Promise<Task | undefined> =>
    (await h.tasks()).find((t) => t.issue === issue);
  const gitOut = async (...args: string[]) => (await execa("git", ["--git-dir", gitDir, ...args])).stdout;
  const isAncestor = async (a: string, b: string) =>
    (await execa("git", ["--git-dir", gitDir, "merge-base", "--is-ancestor", a, b], { reject: false }))
      .exitCode === 0;
  const prOpen = (issue: number, extra: (t: Task) => boolean = () => true) =>
    waitFor(
      `gh-${issue} pr-open`,
      async () => {
        const t = await taskOf(issue);
        return t?.state === "pr-open" && t.totals && !t.rebase && extra(t) ? t : undefined;
      },
      240_000,
    );
  const pull = async (n: number) =>
    (await h.mona.rest.pulls.get({ owner: h.owner, repo: h.name, pull_number: n })).data;
  const prComments = (n: number) => h.gh.comments(h.full, n).map((c) => c.body);

  it("rebases the PR the agent can resolve, and tells the other PR which files conflict", async () => {
    const first = await h.newIssue("Limit 20", "Set `limit` in `src/config.ts` to 20.");
    const second = await h.newIssue("Limit 30", "Set `limit` in `src/config.ts` to 30.");
    const third = await h.newIssue("Limit 40", "Set `limit` in `src/config.ts` to 40.");
    await h.label(first, "fleet:claude");
    await h.label(second, "fleet:p1", "fleet:claude");
    await h.label(third, "fleet:p3", "fleet:claude");
    const fourth = await h.newIssue("Docs", "Rewrite `README.md`.");
    await h.label(fourth, "fleet:p4", "fleet:claude");

    const a = await prOpen(first);
    const b = await prOpen(second);
    const c = await prOpen(third);
    const d = await prOpen(fourth);
    const dBefore = await pull(d.pr!);
    const bBefore = await pull(b.pr!);
    const cBefore = await pull(c.pr!);
    expect(bBefore.mergeable).toBe(true);
    expect(cBefore.mergeable).toBe(true);

    await h.mona.rest.pulls.merge({ owner: h.owner, repo: h.name, pull_number: a.pr! });
    await h.settle();
    const main = await gitOut("rev-parse", "refs/heads/main");
    expect((await taskOf(first))?.state).toBe("done");

    // The second PR: rebased onto the merge, the agent's resolution pushed, nothing left to resolve.
    const rebased = await waitFor(
      "the second PR rebased",
      async () => {
        const body = prComments(b.pr!).find((t) => t.includes("Fleet rebased this pull request"));
        return body && (await taskOf(second))?.state === "pr-open" ? body : undefined;
      },
      300_000,
    );
    expect(rebased).toContain(`#${a.pr} was merged into \`main\``);
    expect(rebased).toContain("- `src/config.ts`");
    const bAfter = await pull(b.pr!);
    expect(bAfter.head.sha).not.toBe(bBefore.head.sha);
    expect(await isAncestor(main, bAfter.head.sha)).toBe(true);
    const resolved = await gitOut("show", `${bAfter.head.sha}:src/config.ts`);
    expect(resolved).not.toMatch(/^(<{7}|={7}|>{7})/m);
    expect(resolved).toContain("export const limit = 30;");
    expect(bAfter.mergeable).toBe(true);
    const bTask = await taskOf(second);
    expect(bTask?.rebase).toBeUndefined();
    expect(bTask?.pr).toBe(b.pr);

    // The third PR: the agent left the markers, so the branch is unchanged and the PR says what to do.
    const failed = await waitFor(
      "the third PR's rebase comment",
      async () => prComments(c.pr!).find((t) => t.includes("Fleet could not rebase this pull request")),
      300_000,
    );
    expect(failed).toContain("conflicts with `main` in these files:");
    expect(failed).toContain("- `src/config.ts`");
    expect(failed).toContain("left conflict markers");
    expect(failed).toContain("git rebase origin/main");
    const cTask = await prOpen(third);
    expect(cTask.rebase).toBeUndefined();
    const cAfter = await pull(c.pr!);
    expect(cAfter.head.sha).toBe(cBefore.head.sha);
    expect(cAfter.mergeable).toBe(false);
    // The PR on another file was left alone: no rebase run, same head.
    const dTask = await taskOf(fourth);
    expect(dTask?.attempts).toBe(d.attempts);
    expect(dTask?.state).toBe("pr-open");
    expect((await pull(d.pr!)).head.sha).toBe(dBefore.head.sha);
    // The two rebases ran the agent (three turns), nothing else did.
    expect(model.played).toBe(11);
    // Every model request, the rebases' too, carried the coder's options.
    const asked = model.requests.filter((q) => q.kind === "main");
    expect(asked.length).toBeGreaterThanOrEqual(11);
    for (const q of asked) expect(JSON.stringify(q.body.system)).toContain("FLEET-OPTIONS-MARKER");
  }, 900_000);

  it("`fleet:rebase` on a Fleet PR runs a rebase on demand and takes the label off again", async () => {
    const tasks = await h.tasks();
    const second = tasks.find((t) => t.state === "pr-open" && t.title === "Limit 30")!;
    const attempts = second.attempts;
    await h.mona.rest.issues.addLabels({
      owner: h.owner,
      repo: h.name,
      issue_number: second.pr!,
      labels: ["fleet:rebase"],
    });
    await h.settle();
    const after = await prOpen(second.issue, (t) => t.attempts > attempts);
    expect(after.rebase).toBeUndefined();
    const labels = (await pull(second.pr!)).labels.map((l) => l.name);
    expect(labels).not.toContain("fleet:rebase");
    // Nothing was needed: no agent ran, and the PR says so.
    expect(model.played).toBe(11);
    expect(prComments(second.pr!).some((t) => t.includes("already contains `main`; nothing to rebase"))).toBe(
      true,
    );
  }, 300_000);

  it("`fleet:rebase` on an issue rebases its task's PR; an issue without a Fleet PR is told so", async () => {
    const stray = await h.newIssue("Just a question", "No task here.");
    await h.label(stray, "fleet:rebase");
    expect(
      h
        .botComments(stray)
        .map((c) => c.body)
        .join("\n"),
    ).toContain("found no Fleet pull request here");

    const third = (await h.tasks()).find((t) => t.title === "Limit 40")!;
    const failuresBefore = prComments(third.pr!).filter((t) => t.includes("could not rebase")).length;
    await h.label(third.issue, "fleet:rebase");
    await waitFor(
      "a second rebase attempt on the third PR",
      async () => prComments(third.pr!).filter((t) => t.includes("could not rebase")).length > failuresBefore,
      300_000,
    );
    expect(model.played).toBe(12);
    const issueLabels = (
      await h.mona.rest.issues.get({ owner: h.owner, repo: h.name, issue_number: third.issue })
    ).data.labels;
    expect(issueLabels.map((l) => (typeof l === "string" ? l : l.name))).not.toContain("fleet:rebase");
    expect((await prOpen(third.issue)).rebase).toBeUndefined();
  }, 300_000);

  it("never overwrites a push made to the branch while Fleet rebased it (force-with-lease)", async () => {
    const third = (await h.tasks()).find((t) => t.title === "Limit 40")!;
    const main = await gitOut("rev-parse", "refs/heads/main");
    const before = (await pull(third.pr!)).head.sha;
    expect(before).not.toBe(main);
    const refused = () => prComments(third.pr!).find((t) => t.includes("The push was refused"));
    expect(refused()).toBeUndefined();
    await h.label(third.pr!, "fleet:rebase");
    const comment = await waitFor("the refused push's comment", async () => refused(), 300_000);
    expect(comment).toContain(`\`${third.branch}\` changed on GitHub while Fleet rebased it`);
    expect(model.played).toBe(14);
    // The branch is where the other push put it, not Fleet's rebased commit.
    expect(await gitOut("rev-parse", `refs/heads/${third.branch}`)).toBe(main);
    expect((await prOpen(third.issue)).state).toBe("pr-open");
  }, 300_000);
});
