import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GitHubEmulator, startGitHubEmulator } from "../src/index.ts";
import { userOctokit } from "../src/test-helpers.ts";

let em: GitHubEmulator;

beforeAll(async () => {
  em = await startGitHubEmulator();
  await em.createRepo({ owner: "acme", name: "widgets", files: { "README.md": "# widgets\n" } });
  em.addCollaborator("acme/widgets", "maria", "write");
});
afterAll(async () => {
  await em?.stop();
});

describe("issues and comments", () => {
  it("creates a comment and lists it back with its real text", async () => {
    const gh = userOctokit(em, "maria");
    const { data: issue } = await gh.issues.create({
      owner: "acme",
      repo: "widgets",
      title: "Add a flux capacitor",
      body: "please",
    });
    expect(issue.number).toBe(1);
    const { data: c } = await gh.issues.createComment({
      owner: "acme",
      repo: "widgets",
      issue_number: 1,
      body: "On it.",
    });
    const { data: list } = await gh.issues.listComments({ owner: "acme", repo: "widgets", issue_number: 1 });
    expect(list.map((x) => x.body)).toEqual(["On it."]);
    expect(list[0]!.id).toBe(c.id);
    expect(list[0]!.user?.login).toBe("maria");
    const { data: got } = await gh.issues.getComment({ owner: "acme", repo: "widgets", comment_id: c.id });
    expect(got.body).toBe("On it.");
    await gh.issues.updateComment({ owner: "acme", repo: "widgets", comment_id: c.id, body: "Done." });
    expect(em.comments("acme/widgets", 1).map((x) => x.body)).toEqual(["Done."]);
  });

  it("pages through more than 100 comments with Link headers", async () => {
    const gh = userOctokit(em, "maria");
    const { data: issue } = await gh.issues.create({ owner: "acme", repo: "widgets", title: "Chatty" });
    for (let i = 0; i < 130; i++) {
      await gh.issues.createComment({
        owner: "acme",
        repo: "widgets",
        issue_number: issue.number,
        body: `comment ${i}`,
      });
    }
    const first = await gh.issues.listComments({
      owner: "acme",
      repo: "widgets",
      issue_number: issue.number,
      per_page: 100,
    });
    expect(first.data).toHaveLength(100);
    expect(first.headers.link).toMatch(/rel="next"/);
    const all = await gh.paginate(gh.issues.listComments, {
      owner: "acme",
      repo: "widgets",
      issue_number: issue.number,
      per_page: 100,
    });
    expect(all).toHaveLength(130);
    expect(all.map((c) => c.body)).toEqual(Array.from({ length: 130 }, (_, i) => `comment ${i}`));
  });

  it("labels, closes and reopens an issue; sub-issues link", async () => {
    const gh = userOctokit(em, "maria");
    const { data: parent } = await gh.issues.create({ owner: "acme", repo: "widgets", title: "Epic" });
    const { data: child } = await gh.issues.create({ owner: "acme", repo: "widgets", title: "Part" });
    await gh.issues.createLabel({ owner: "acme", repo: "widgets", name: "fleet:claude", color: "5319e7" });
    await gh.issues.addLabels({
      owner: "acme",
      repo: "widgets",
      issue_number: parent.number,
      labels: ["fleet:claude", "fleet:p1"],
    });
    expect(em.issue("acme/widgets", parent.number)?.labels).toEqual(["fleet:claude", "fleet:p1"]);
    await gh.issues.removeLabel({
      owner: "acme",
      repo: "widgets",
      issue_number: parent.number,
      name: "fleet:p1",
    });
    await expect(
      gh.issues.removeLabel({
        owner: "acme",
        repo: "widgets",
        issue_number: parent.number,
        name: "fleet:p1",
      }),
    ).rejects.toMatchObject({ status: 404 });
    const { data: label } = await gh.issues.getLabel({
      owner: "acme",
      repo: "widgets",
      name: "fleet:claude",
    });
    expect(label.color).toBe("5319e7");
    await gh.issues.update({ owner: "acme", repo: "widgets", issue_number: parent.number, state: "closed" });
    expect(em.issue("acme/widgets", parent.number)?.state).toBe("closed");
    await gh.issues.update({ owner: "acme", repo: "widgets", issue_number: parent.number, state: "open" });
    await gh.request("POST /repos/{owner}/{repo}/issues/{issue_number}/sub_issues", {
      owner: "acme",
      repo: "widgets",
      issue_number: parent.number,
      sub_issue_id: child.id,
    });
    const subs = await gh.request("GET /repos/{owner}/{repo}/issues/{issue_number}/sub_issues", {
      owner: "acme",
      repo: "widgets",
      issue_number: parent.number,
    });
    expect(subs.data.map((s) => s.number)).toEqual([child.number]);
    const { data: perm } = await gh.repos.getCollaboratorPermissionLevel({
      owner: "acme",
      repo: "widgets",
      username: "maria",
    });
    expect(perm.permission).toBe("write");
    const { data: stranger } = await gh.repos.getCollaboratorPermissionLevel({
      owner: "acme",
      repo: "widgets",
      username: "acme",
    });
    expect(stranger.permission).toBe("admin");
  });

  it("answers 304 to a matching If-None-Match without charging the rate limit", async () => {
    const gh = userOctokit(em, "maria");
    const first = await gh.issues.get({ owner: "acme", repo: "widgets", issue_number: 1 });
    const etag = first.headers.etag!;
    const remaining = Number(first.headers["x-ratelimit-remaining"]);
    await expect(
      gh.issues.get({ owner: "acme", repo: "widgets", issue_number: 1, headers: { "if-none-match": etag } }),
    ).rejects.toMatchObject({ status: 304 });
    const again = await gh.rateLimit.get();
    expect(again.data.resources.core.remaining).toBe(remaining);
  });
});
