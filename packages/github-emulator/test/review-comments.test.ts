import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Ajv } from "ajv";
import addFormatsModule from "ajv-formats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GitHubEmulator, startGitHubEmulator } from "../src/index.ts";
import { userOctokit } from "../src/test-helpers.ts";

const run = promisify(execFile);
const env = { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" };
const git = (cwd: string, ...args: string[]) =>
  run("git", ["-c", "user.name=Maria", "-c", "user.email=maria@example.invalid", ...args], { cwd, env });

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);
ajv.addSchema({
  ...createRequire(import.meta.url)("@octokit/webhooks-schemas/schema.json"),
  $id: "webhooks",
});
const check = (definition: string, payload: unknown) => {
  const validate = ajv.getSchema(`webhooks#/definitions/${definition}`)!;
  return validate(payload)
    ? []
    : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message} ${JSON.stringify(e.params)}`);
};

const BASE = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"].join("\n");
const HEAD = BASE.replace("five", "FIVE");

let em: GitHubEmulator;
let work: string;
let prNumber: number;
let headSha: string;
const owner = "acme";
const repo = "rc";

beforeAll(async () => {
  for (const d of ["pull_request_review_comment$created", "pull_request_review$submitted"])
    ajv.getSchema(`webhooks#/definitions/${d}`);
  em = await startGitHubEmulator();
  const { cloneUrl } = await em.createRepo({ owner, name: repo, files: { "lib.txt": `${BASE}\n` } });
  em.addCollaborator(`${owner}/${repo}`, "maria", "write");
  em.addCollaborator(`${owner}/${repo}`, "rev", "write");
  work = await mkdtemp(join(tmpdir(), "fleet-gh-rc-"));
  const dir = join(work, "c");
  await run("git", ["clone", "-q", cloneUrl, dir], { env });
  await git(dir, "checkout", "-q", "-b", "fleet/7-x");
  await writeFile(join(dir, "lib.txt"), `${HEAD}\n`);
  await git(dir, "commit", "-q", "-am", "five in capitals");
  await git(dir, "push", "-q", "origin", "fleet/7-x");
  const { data: pr } = await userOctokit(em, "maria").pulls.create({
    owner,
    repo,
    head: "fleet/7-x",
    base: "main",
    title: "Capitals",
  });
  prNumber = pr.number;
  headSha = pr.head.sha;
});
afterAll(async () => {
  await em?.stop();
  await rm(work, { recursive: true, force: true });
});

describe("pull request review comments", () => {
  it("a review with inline comments: listed with path and line, schema-valid webhooks, comments before the review", async () => {
    const rev = userOctokit(em, "rev");
    const mark = em.deliveries().length;
    const { data: review } = await rev.pulls.createReview({
      owner,
      repo,
      pull_number: prNumber,
      event: "COMMENT",
      body: "/fleet rename the helper",
      comments: [{ path: "lib.txt", line: 5, body: "Call this `five`." }],
    });
    await em.waitForDeliveries();

    const { data: listed } = await rev.pulls.listReviewComments({ owner, repo, pull_number: prNumber });
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({
      path: "lib.txt",
      line: 5,
      side: "RIGHT",
      body: "Call this `five`.",
      user: { login: "rev" },
      pull_request_review_id: review.id,
      commit_id: headSha,
      author_association: "COLLABORATOR",
    });
    // The hunk GitHub shows above the comment ends at the commented line.
    expect(listed[0]!.diff_hunk.split("\n").at(-1)).toBe("+FIVE");
    expect(listed[0]!.diff_hunk).toMatch(/^@@ -\d+,\d+ \+\d+,\d+ @@/);

    const events = em.deliveries().slice(mark);
    expect(events.map((d) => `${d.event}.${d.action}`)).toEqual([
      "pull_request_review_comment.created",
      "pull_request_review.submitted",
    ]);
    expect(check("pull_request_review_comment$created", events[0]!.payload)).toEqual([]);
    expect(check("pull_request_review$submitted", events[1]!.payload)).toEqual([]);
    // The review's state: upper case from the REST API, lower case in the event, as on GitHub.
    expect(review.state).toBe("COMMENTED");
    expect((events[1]!.payload as { review: { state: string } }).review.state).toBe("commented");
    const { data: reviews } = await rev.pulls.listReviews({ owner, repo, pull_number: prNumber });
    expect(reviews.map((r) => r.state)).toEqual(["COMMENTED"]);
    const payload = events[0]!.payload as { comment: { path: string; line: number; body: string } };
    expect(payload.comment).toMatchObject({ path: "lib.txt", line: 5, body: "Call this `five`." });
    const { data: pr } = await rev.pulls.get({ owner, repo, pull_number: prNumber });
    expect(pr.review_comments).toBe(1);
  });

  it("a lone comment becomes a one-comment review; replies keep the thread's file and line", async () => {
    const maria = userOctokit(em, "maria");
    const mark = em.deliveries().length;
    const { data: c } = await maria.pulls.createReviewComment({
      owner,
      repo,
      pull_number: prNumber,
      commit_id: headSha,
      path: "lib.txt",
      line: 6,
      body: "And six?",
    });
    expect(c).toMatchObject({ path: "lib.txt", line: 6, user: { login: "maria" } });
    const { data: reply } = await maria.request("POST /repos/{owner}/{repo}/pulls/{pull_number}/comments", {
      owner,
      repo,
      pull_number: prNumber,
      body: "Never mind.",
      in_reply_to: c.id,
      commit_id: headSha,
      path: "lib.txt",
    });
    expect(reply).toMatchObject({ path: "lib.txt", line: 6, in_reply_to_id: c.id });
    await em.waitForDeliveries();
    const events = em.deliveries().slice(mark);
    expect(events.map((d) => `${d.event}.${d.action}`)).toEqual([
      "pull_request_review_comment.created",
      "pull_request_review.submitted",
      "pull_request_review_comment.created",
      "pull_request_review.submitted",
    ]);
    for (const e of events)
      expect(
        check(
          e.event === "pull_request_review"
            ? "pull_request_review$submitted"
            : "pull_request_review_comment$created",
          e.payload,
        ),
      ).toEqual([]);
    const { data: reviews } = await maria.pulls.listReviews({ owner, repo, pull_number: prNumber });
    expect(reviews.find((r) => r.id === c.pull_request_review_id)?.state.toLowerCase()).toBe("commented");

    const { data: newestFirst } = await maria.pulls.listReviewComments({
      owner,
      repo,
      pull_number: prNumber,
      direction: "desc",
    });
    expect(newestFirst.map((x) => x.body)).toEqual(["Never mind.", "And six?", "Call this `five`."]);
  });

  it("refuses a file or line outside the diff, and stores nothing from a review with one bad comment", async () => {
    const rev = userOctokit(em, "rev");
    const before = (await rev.pulls.listReviewComments({ owner, repo, pull_number: prNumber })).data.length;
    const reviewsBefore = (await rev.pulls.listReviews({ owner, repo, pull_number: prNumber })).data.length;
    await expect(
      rev.pulls.createReviewComment({
        owner,
        repo,
        pull_number: prNumber,
        commit_id: headSha,
        path: "missing.txt",
        line: 1,
        body: "?",
      }),
    ).rejects.toMatchObject({ status: 422 });
    // Line 1 is not within three lines of the change on line 5.
    const far = await rev.pulls
      .createReviewComment({
        owner,
        repo,
        pull_number: prNumber,
        commit_id: headSha,
        path: "lib.txt",
        line: 1,
        body: "?",
      })
      .catch((e: { status: number; response: { data: { errors: Array<{ message: string }> } } }) => e);
    expect(far).toMatchObject({ status: 422 });
    expect(JSON.stringify((far as { response: { data: unknown } }).response.data)).toContain(
      "must be part of the diff",
    );
    // A review with one comment off the diff is refused whole, in GitHub's words for this endpoint.
    const offDiff = await rev.pulls
      .createReview({
        owner,
        repo,
        pull_number: prNumber,
        event: "COMMENT",
        body: "two comments",
        comments: [
          { path: "lib.txt", line: 4, body: "fine" },
          { path: "lib.txt", line: 99, body: "not in the diff" },
        ],
      })
      .catch((e: { status: number; response: { data: unknown } }) => e);
    expect(offDiff).toMatchObject({
      status: 422,
      response: { data: { message: "Unprocessable Entity", errors: ["Line could not be resolved"] } },
    });
    expect((await rev.pulls.listReviewComments({ owner, repo, pull_number: prNumber })).data).toHaveLength(
      before,
    );
    expect((await rev.pulls.listReviews({ owner, repo, pull_number: prNumber })).data).toHaveLength(
      reviewsBefore,
    );
  });
});
