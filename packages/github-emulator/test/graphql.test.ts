import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GitHubEmulator, startGitHubEmulator } from "../src/index.ts";
import { userOctokit } from "../src/test-helpers.ts";

let em: GitHubEmulator;

beforeAll(async () => {
  em = await startGitHubEmulator();
  await em.createRepo({ owner: "acme", name: "pins", files: { "README.md": "x\n" } });
  em.addCollaborator("acme/pins", "maria", "write");
  em.addCollaborator("acme/pins", "rita", "read");
});
afterAll(async () => {
  await em?.stop();
});

const PIN = "mutation($id: ID!) { pinIssue(input: { issueId: $id }) { issue { number } } }";
const UNPIN = "mutation($id: ID!) { unpinIssue(input: { issueId: $id }) { issue { number } } }";

describe("GraphQL pinIssue / unpinIssue", () => {
  it("pins by node id for a writer, at most three per repository, and unpins", async () => {
    const gh = userOctokit(em, "maria");
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const { data } = await gh.issues.create({ owner: "acme", repo: "pins", title: `t${i}` });
      ids.push(data.node_id);
    }
    const pin = (id: string, query = PIN) => gh.request("POST /graphql", { query, variables: { id } });
    const first = await pin(ids[0]!);
    expect(first.data).toEqual({ data: { pinIssue: { issue: { number: 1 } } } });
    expect(em.issue("acme/pins", 1)?.pinned).toBe(true);
    await pin(ids[1]!);
    await pin(ids[2]!);
    const fourth = await pin(ids[3]!);
    expect(fourth.data.errors[0].message).toBe("You can't pin more than 3 issues in a repository.");
    expect(em.issue("acme/pins", 4)?.pinned).toBe(false);
    await pin(ids[0]!, UNPIN);
    expect(em.issue("acme/pins", 1)?.pinned).toBe(false);
    expect((await pin(ids[3]!)).data.data.pinIssue.issue.number).toBe(4);
  });

  it("refuses a reader, an unknown node and anything but the pin mutations, saying why", async () => {
    const writer = userOctokit(em, "maria");
    const { data } = await writer.issues.create({ owner: "acme", repo: "pins", title: "r" });
    const reader = userOctokit(em, "rita");
    const denied = await reader.request("POST /graphql", { query: PIN, variables: { id: data.node_id } });
    expect(denied.data.errors[0].type).toBe("FORBIDDEN");
    const unknown = await writer.request("POST /graphql", { query: PIN, variables: { id: "nope" } });
    expect(unknown.data.errors[0].type).toBe("NOT_FOUND");
    const other = await writer.request("POST /graphql", { query: "{ viewer { login } }" });
    expect(other.data.errors[0].message).toContain(
      "supports only the pinIssue, unpinIssue and markPullRequestReadyForReview mutations",
    );
  });
});

describe("GitHub Enterprise Server's paths", () => {
  it("serves the REST API under /api/v3 and GraphQL at /api/graphql, as GHES does", async () => {
    const token = em.userToken("maria");
    const headers = { authorization: `token ${token}`, "content-type": "application/json" };
    const issue = await fetch(`${em.url}/api/v3/repos/acme/pins/issues`, {
      method: "POST",
      headers,
      body: JSON.stringify({ title: "via GHES paths" }),
    });
    expect(issue.status).toBe(201);
    const { number, node_id } = (await issue.json()) as { number: number; node_id: string };
    const pinned = await fetch(`${em.url}/api/graphql`, {
      method: "POST",
      headers,
      body: JSON.stringify({ query: UNPIN, variables: { id: node_id } }),
    });
    expect(((await pinned.json()) as { data: unknown }).data).toEqual({ unpinIssue: { issue: { number } } });
  });
});

const READY =
  "mutation($id: ID!) { markPullRequestReadyForReview(input: { pullRequestId: $id }) { pullRequest { number } } }";

describe("GraphQL markPullRequestReadyForReview", () => {
  it("makes a draft ready for a writer, with a ready_for_review webhook; a reader is refused", async () => {
    const gh = userOctokit(em, "maria");
    const repo = { owner: "acme", repo: "pins" };
    const main = await gh.git.getRef({ ...repo, ref: "heads/main" });
    await gh.git.createRef({ ...repo, ref: "refs/heads/feature", sha: main.data.object.sha });
    await gh.repos.createOrUpdateFileContents({
      ...repo,
      path: "NEW.md",
      branch: "feature",
      message: "new",
      content: Buffer.from("new\n").toString("base64"),
    });
    const { data: pr } = await gh.pulls.create({
      ...repo,
      head: "feature",
      base: "main",
      title: "t",
      draft: true,
    });
    expect(pr.draft).toBe(true);
    const refused = await userOctokit(em, "rita").request("POST /graphql", {
      query: READY,
      variables: { id: pr.node_id },
    });
    expect(refused.data.errors[0].type).toBe("FORBIDDEN");
    expect((await gh.pulls.get({ ...repo, pull_number: pr.number })).data.draft).toBe(true);
    const ready = await gh.request("POST /graphql", { query: READY, variables: { id: pr.node_id } });
    expect(ready.data).toEqual({
      data: { markPullRequestReadyForReview: { pullRequest: { number: pr.number, isDraft: false } } },
    });
    expect((await gh.pulls.get({ ...repo, pull_number: pr.number })).data.draft).toBe(false);
    const actions = em
      .deliveries()
      .filter((d) => d.event === "pull_request" && (d.payload as { number: number }).number === pr.number)
      .map((d) => d.action);
    expect(actions).toContain("ready_for_review");
    // An issue's node id is not a pull request's.
    const { data: issue } = await gh.issues.create({ ...repo, title: "not a PR" });
    const wrong = await gh.request("POST /graphql", { query: READY, variables: { id: issue.node_id } });
    expect(wrong.data.errors[0].type).toBe("NOT_FOUND");
  });
});
