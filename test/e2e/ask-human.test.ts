// The agent's ask_human question loop in GitHub mode, through the real app on the emulator, a real
// local worker and the real Claude CLI against a scripted model server: the run ends `waiting`, the
// requester is notified with the question quoted inert, an outsider's reply changes nothing, the
// maintainer's plain reply queues the task again, and the next run resumes the agent's session with
// the answer and the change it had made before asking.
import { type ScriptServer, type ScriptTurn, startAnthropicScriptServer } from "@fleet/model-servers";
import { Octokit } from "@octokit/rest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JOINER } from "../../src/core/published-text.ts";
import type { Task } from "../../src/core/task.ts";
import { waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";
import { startTestWorker, type TestWorker } from "../support/worker.ts";

const FLEET_YML =
  "dispatch: local\nmax_concurrent: 1\nplan_phase: false\nretries: { max: 0 }\ntimeouts: { run_minutes: 3, stall_minutes: 2 }\n";
const USAGE = { input_tokens: 800, output_tokens: 40 };
const QUESTION = "@octocat should it be blue or red?";
const ANSWER = "Blue, please.";

/** `markdown` without its fenced code blocks (where GitHub reads no mention). */
const outsideFences = (markdown: string) => markdown.replace(/^(`{3,})[^\n]*\n[\s\S]*?^\1[ \t]*$/gm, "");

const turn = (over: Partial<ScriptTurn>): ScriptTurn => ({ usage: USAGE, ...over });

describe("ask_human on GitHub", () => {
  let h: Harness;
  let model: ScriptServer;
  let worker: TestWorker;

  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": FLEET_YML } });
    model = await startAnthropicScriptServer({
      turns: [
        turn({
          toolUses: [{ name: "Bash", input: { command: "echo draft > BANNER.md", description: "start" } }],
        }),
        turn({ toolUses: [{ name: "mcp__fleet__ask_human", input: { question: QUESTION } }] }),
        turn({ text: "I asked which colour; stopping until someone answers." }),
        // The run with the answer.
        turn({
          toolUses: [{ name: "Bash", input: { command: "echo blue >> BANNER.md", description: "finish" } }],
        }),
        turn({ text: "The banner is blue." }),
      ],
    });
    worker = await startTestWorker(h, { modelBaseUrl: model.url, concurrency: 1 });
  });

  afterAll(async () => {
    await worker?.stop();
    await model?.stop();
    await h?.stop();
  });

  const taskOf = async (issue: number): Promise<Task | undefined> =>
    (await h.tasks()).find((t) => t.issue === issue);
  const tracking = (issue: number) =>
    h.botComments(issue).find((c) => c.body.includes("fleet:tracking"))?.body ?? "";
  const mainRequests = () => model.requests.filter((r) => r.kind === "main");

  it("waits with the question, ignores an outsider, and resumes with the maintainer's reply", async () => {
    const issue = await h.newIssue("Add a banner", "Add BANNER.md.");
    await h.label(issue, "fleet:claude");

    // 1. The run ends waiting, the question on the task.
    const waiting = await waitFor(
      "the task to wait for an answer",
      async () => {
        const t = await taskOf(issue);
        return t?.state === "waiting" ? t : undefined;
      },
      180_000,
    );
    expect(model.played).toBe(3);
    expect(waiting.requestedBy).toBe("mona");
    expect(waiting.question).toEqual({ text: QUESTION, askedAt: expect.any(String) });
    // The tool call reached Fleet's server in the sandbox, whose answer went back to the model.
    expect(JSON.stringify(mainRequests()[2]!.body)).toContain(
      "Your question is posted for a person to answer",
    );

    // 2. The requester is notified in a comment of its own; the agent's mention is quoted inert.
    // Posted once the task is recorded waiting, so a reply that comes at once finds it waiting.
    const notice = await waitFor(
      "the question's comment",
      async () => h.botComments(issue).find((c) => c.body.includes("has a question:")),
      60_000,
    );
    expect(notice!.body).toContain(
      `@mona, the agent working on this issue (Fleet task \`${waiting.id}\`) has a question:`,
    );
    expect(notice!.body).toContain(`> \`@${JOINER}octocat\` should it be blue or red?`);
    expect(notice!.body).not.toContain("@octocat");
    // The tracking comment shows the state and the question, inert there too.
    const shown = await waitFor(
      "the tracking comment to show the question",
      async () => {
        const body = tracking(issue);
        return body.includes("**The agent asks:**") ? body : undefined;
      },
      60_000,
    );
    expect(shown).toContain("❓");
    expect(shown).toContain(
      "waiting for an answer: reply on this issue, or comment `/fleet answer <answer>`",
    );
    expect(shown).toContain(`\`@${JOINER}octocat\` should it be blue or red?`);
    // Only the agent log, a fenced code block GitHub reads no mention in, has the tool call as it was.
    expect(outsideFences(shown)).not.toContain("@octocat");
    expect(shown).toContain("<summary>Agent log</summary>");

    // 3. A reply from someone without write access answers nothing.
    h.gh.addCollaborator(h.full, "visitor", "read");
    const visitor = new Octokit({ baseUrl: h.gh.url, auth: h.gh.userToken("visitor") });
    const botCount = h.botComments(issue).length;
    await h.comment(issue, "Red!", visitor);
    const stillWaiting = await taskOf(issue);
    expect(stillWaiting?.state).toBe("waiting");
    expect(stillWaiting?.question?.answer).toBeUndefined();
    expect(h.botComments(issue)).toHaveLength(botCount);
    expect(model.played).toBe(3);

    // 4. The maintainer's plain reply is the answer: the task is queued again with it.
    await h.comment(issue, ANSWER);
    const answered = await taskOf(issue);
    expect(["queued", "dispatched", "running"]).toContain(answered?.state);
    expect(answered?.question?.answer).toEqual({ text: ANSWER, by: "mona", at: expect.any(String) });

    const done = await waitFor(
      "the answered run's PR",
      async () => {
        const t = await taskOf(issue);
        return t?.state === "pr-open" && t.pr ? t : undefined;
      },
      180_000,
    );
    expect(model.played).toBe(5);
    expect(done.runs?.map((r) => r.kind)).toEqual(["work", "work"]);
    // Resumed: the second run's first request carries the first run's conversation and the answer.
    const resumed = JSON.stringify(mainRequests()[3]!.body);
    expect(resumed).toContain("echo draft > BANNER.md");
    expect(resumed).toContain(ANSWER);
    expect(resumed).toContain("@mona answered:");
    expect(resumed).toContain("The files you changed before asking are as you left them.");
    // The change before the question and the one after it are both on the PR's branch.
    const { data: pr } = await h.mona.rest.pulls.get({ owner: h.owner, repo: h.name, pull_number: done.pr! });
    expect(pr.head.ref).toBe(done.branch);
    const { data: file } = await h.mona.rest.repos.getContent({
      owner: h.owner,
      repo: h.name,
      path: "BANNER.md",
      ref: pr.head.ref,
    });
    expect("content" in file && Buffer.from(file.content, "base64").toString("utf8")).toBe("draft\nblue\n");

    // 5. Nothing waits any more: `/fleet answer` says so.
    await h.comment(issue, "/fleet answer Red after all.");
    expect(h.botComments(issue).at(-1)?.body).toContain("Nothing to answer");
    expect((await taskOf(issue))?.state).toBe("pr-open");
  }, 400_000);
});
