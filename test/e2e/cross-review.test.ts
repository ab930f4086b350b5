// `cross_review: codex` through the real app on the emulator and a real local worker: the real Claude
// Code CLI opens the task's pull request, then the real Codex CLI reviews it (read-only) and posts ONE
// GitHub review with an inline comment on the line Claude wrote, before people are asked.
import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { type ScriptServer, startAnthropicScriptServer, startOpenAIScriptServer } from "@fleet/model-servers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Task } from "../../src/core/task.ts";
import { waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";
import { startTestWorker, TEST_CREDENTIAL, type TestWorker } from "../support/worker.ts";

const FLEET_YML =
  "dispatch: local\nmax_concurrent: 1\nplan_phase: false\nretries: { max: 0 }\ntimeouts: { run_minutes: 3, stall_minutes: 2 }\n" +
  "cross_review: codex\ncoders:\n  codex: { model: o4-mini }\n";
const USAGE = { input_tokens: 900, output_tokens: 60 };
const GREETING = "# Greeting\n\nHello, wrold.\n";
const REVIEW = {
  summary: "One typo in the new file.",
  comments: [{ path: "GREETING.md", line: 3, body: "`wrold` is a typo for `world`." }],
};

/**
 * One model URL for the worker, two scripted APIs behind it: Claude's requests (they carry
 * `anthropic-version`) go to the Anthropic server, the rest (Codex's Responses API) to the OpenAI one.
 */
async function startModelRouter(anthropic: ScriptServer, openai: ScriptServer) {
  const server = createServer((req, res) => {
    const to = new URL(req.headers["anthropic-version"] ? anthropic.url : openai.url);
    const upstream = request(
      { host: to.hostname, port: to.port, path: req.url, method: req.method, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on("error", () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stop: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

describe("cross_review: another coder reviews Fleet's pull request (real Claude and Codex CLIs)", () => {
  let h: Harness;
  let claude: ScriptServer;
  let codex: ScriptServer;
  let router: Awaited<ReturnType<typeof startModelRouter>>;
  let worker: TestWorker;

  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": FLEET_YML } });
    claude = await startAnthropicScriptServer({
      turns: [
        {
          toolUses: [{ name: "Write", input: { file_path: "GREETING.md", content: GREETING } }],
          usage: USAGE,
        },
        { text: "Wrote GREETING.md.", usage: USAGE },
      ],
    });
    codex = await startOpenAIScriptServer({
      turns: [{ text: `Reviewed.\n\n\`\`\`json\n${JSON.stringify(REVIEW)}\n\`\`\``, usage: USAGE }],
    });
    router = await startModelRouter(claude, codex);
    worker = await startTestWorker(h, {
      modelBaseUrl: router.url,
      concurrency: 1,
      credentialFor: (coder) =>
        coder === "codex" ? { name: "OPENAI_API_KEY", value: "sk-openai-demo-000000" } : TEST_CREDENTIAL,
    });
  });

  afterAll(async () => {
    await worker?.stop();
    await router?.stop();
    await codex?.stop();
    await claude?.stop();
    await h?.stop();
  });

  it("claude's PR opens, then codex posts one review with an inline comment on claude's line", async () => {
    const issue = await h.newIssue("Greeting", "Write GREETING.md.");
    await h.label(issue, "fleet:claude");
    const task = await waitFor(
      "claude's PR",
      async () => (await h.tasks()).find((t: Task) => t.issue === issue && t.state === "pr-open"),
      240_000,
    );
    const pr = task.pr!;
    const review = await waitFor(
      "codex's review task to end",
      async () => {
        const t = (await h.tasks()).find((x: Task) => x.review?.pr === pr);
        return t && (t.state === "done" || t.state === "failed") ? t : undefined;
      },
      240_000,
    );
    expect(review.reason).toBeUndefined();
    expect(review).toMatchObject({ state: "done", coder: "codex", model: "o4-mini", issue: pr });
    expect(review.runs?.map((r) => r.kind)).toEqual(["pr-review"]);
    // Each CLI played its own script: claude's two turns, codex's one.
    expect(claude.played).toBe(2);
    expect(codex.played).toBe(1);

    const ref = { owner: h.owner, repo: h.name, pull_number: pr };
    const reviews = (await h.mona.rest.pulls.listReviews(ref)).data;
    expect(reviews).toHaveLength(1);
    expect(reviews[0]).toMatchObject({ state: "COMMENTED", user: { type: "Bot" } });
    expect(reviews[0]!.body).toContain("by `codex`");
    expect(reviews[0]!.body).toContain("One typo in the new file.");
    const inline = (await h.mona.rest.pulls.listReviewComments(ref)).data;
    expect(inline.map((c) => [c.path, c.line, c.body])).toEqual([
      ["GREETING.md", 3, "`wrold` is a typo for `world`."],
    ]);
    // The task's own PR is untouched and still waits for people.
    expect((await h.tasks()).find((t: Task) => t.id === task.id)?.state).toBe("pr-open");
  }, 600_000);
});
