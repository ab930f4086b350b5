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
const env = {
  ...process.env,
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_CONFIG_NOSYSTEM: "1",
  GH_EMULATOR_LOGIN: "maria",
};
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

let em: GitHubEmulator;
let work: string;
let cloneUrl: string;

beforeAll(async () => {
  for (const d of ["pull_request$synchronize", "pull_request_review$submitted", "issues$closed"])
    ajv.getSchema(`webhooks#/definitions/${d}`);
  em = await startGitHubEmulator();
  ({ cloneUrl } = await em.createRepo({ owner: "acme", name: "prs", files: { "a.txt": "one\n" } }));
  em.addCollaborator("acme/prs", "maria", "write");
  em.addCollaborator("acme/prs", "rev", "write");
  work = await mkdtemp(join(tmpdir(), "fleet-gh-prs-"));
});
afterAll(async () => {
  await em?.stop();
  await rm(work, { recursive: true, force: true });
});

describe("pull requests", () => {
  it("emits pull_request.synchronize when a git push moves the head; reviews; 409 on a stale merge sha; 405 on conflict", async () => {
    const dir = join(work, "c");
    await run("git", ["clone", "-q", cloneUrl, dir], { env });
    await git(dir, "checkout", "-q", "-b", "fleet/3-x");
    await writeFile(join(dir, "a.txt"), "two\n");
    await git(dir, "commit", "-q", "-am", "two");
    await git(dir, "push", "-q", "origin", "fleet/3-x");
    const gh = userOctokit(em, "maria");
    const { data: pr } = await gh.pulls.create({
      owner: "acme",
      repo: "prs",
      head: "acme:fleet/3-x",
      base: "main",
      title: "X",
    });
    const firstHead = pr.head.sha;

    await writeFile(join(dir, "a.txt"), "three\n");
    await git(dir, "commit", "-q", "-am", "three");
    await git(dir, "push", "-q", "origin", "fleet/3-x");
    await em.waitForDeliveries();
    // The post-receive hook reports asynchronously; poll the delivery log briefly.
    let sync: { payload: unknown } | undefined;
    for (let i = 0; i < 100 && !sync; i++) {
      sync = em.deliveries().find((d) => d.event === "pull_request" && d.action === "synchronize");
      if (!sync) await new Promise((r) => setTimeout(r, 50));
    }
    expect(sync).toBeDefined();
    const p = sync!.payload as { before: string; after: string; sender: { login: string } };
    expect(p.before).toBe(firstHead);
    expect(p.sender.login).toBe("maria");
    expect(check("pull_request$synchronize", sync!.payload)).toEqual([]);
    const pushEvent = em
      .deliveries()
      .filter((d) => d.event === "push")
      .at(-1)!.payload as { ref: string; commits: Array<{ message: string }> };
    expect(pushEvent.ref).toBe("refs/heads/fleet/3-x");
    expect(pushEvent.commits.map((c) => c.message)).toEqual(["three"]);

    const reviewer = userOctokit(em, "rev");
    await reviewer.pulls.createReview({
      owner: "acme",
      repo: "prs",
      pull_number: pr.number,
      event: "APPROVE",
    });
    await em.waitForDeliveries();
    const review = em.deliveries().find((d) => d.event === "pull_request_review")!;
    expect(check("pull_request_review$submitted", review.payload)).toEqual([]);

    await expect(
      gh.pulls.merge({ owner: "acme", repo: "prs", pull_number: pr.number, sha: firstHead }),
    ).rejects.toMatchObject({ status: 409 });

    // Make main conflict with the PR branch.
    const { data: cur } = await gh.repos.getContent({ owner: "acme", repo: "prs", path: "a.txt" });
    await gh.repos.createOrUpdateFileContents({
      owner: "acme",
      repo: "prs",
      path: "a.txt",
      message: "conflict",
      content: Buffer.from("main side\n").toString("base64"),
      sha: (cur as { sha: string }).sha,
    });
    const { data: now } = await gh.pulls.get({ owner: "acme", repo: "prs", pull_number: pr.number });
    expect(now.mergeable).toBe(false);
    await expect(
      gh.pulls.merge({ owner: "acme", repo: "prs", pull_number: pr.number }),
    ).rejects.toMatchObject({ status: 405 });

    await gh.pulls.update({ owner: "acme", repo: "prs", pull_number: pr.number, state: "closed" });
    expect(em.pulls("acme/prs")[0]).toMatchObject({ state: "closed", merged: false });
    const { data: listed } = await gh.pulls.list({
      owner: "acme",
      repo: "prs",
      state: "all",
      head: "acme:fleet/3-x",
    });
    expect(listed.map((x) => x.number)).toEqual([pr.number]);
  });

  it("emits issues.closed with a schema-valid payload", async () => {
    const gh = userOctokit(em, "maria");
    const { data: issue } = await gh.issues.create({ owner: "acme", repo: "prs", title: "close me" });
    await gh.issues.update({
      owner: "acme",
      repo: "prs",
      issue_number: issue.number,
      state: "closed",
      state_reason: "not_planned",
    });
    await em.waitForDeliveries();
    const closed = em.deliveries().find((d) => d.event === "issues" && d.action === "closed")!;
    expect(check("issues$closed", closed.payload)).toEqual([]);
    expect(em.issue("acme/prs", issue.number)).toMatchObject({ state: "closed", stateReason: "not_planned" });
  });
});
