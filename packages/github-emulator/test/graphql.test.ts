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
    expect(other.data.errors[0].message).toContain("supports only the pinIssue and unpinIssue mutations");
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
