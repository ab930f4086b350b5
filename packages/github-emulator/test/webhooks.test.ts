import { createServer, type Server } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { verify } from "@octokit/webhooks-methods";
import { Ajv } from "ajv";
import addFormatsModule from "ajv-formats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GitHubEmulator, startGitHubEmulator } from "../src/index.ts";
import { userOctokit } from "../src/test-helpers.ts";

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
const schema = createRequire(import.meta.url)("@octokit/webhooks-schemas/schema.json") as {
  definitions: Record<string, unknown>;
};

interface Received {
  headers: Record<string, string | string[] | undefined>;
  raw: string;
}

let em: GitHubEmulator;
let receiver: Server;
let status = 200;
const received: Received[] = [];

const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);
ajv.addSchema({ ...schema, $id: "webhooks" });
/** Validates a payload against one event+action definition of @octokit/webhooks-schemas. */
const check = (definition: string, payload: unknown) => {
  const validate = ajv.getSchema(`webhooks#/definitions/${definition}`)!;
  const ok = validate(payload);
  return ok
    ? []
    : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message} ${JSON.stringify(e.params)}`);
};

beforeAll(async () => {
  // Compile the validators up front: compiling them blocks the event loop for seconds.
  for (const d of [
    "issues$labeled",
    "issues$opened",
    "issue_comment$created",
    "pull_request$opened",
    "pull_request$closed",
    "push$event",
    "workflow_run$completed",
    "workflow_job$completed",
    "installation$created",
  ]) {
    ajv.getSchema(`webhooks#/definitions/${d}`);
  }
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      received.push({ headers: req.headers, raw: Buffer.concat(chunks).toString("utf8") });
      res.writeHead(status);
      res.end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", () => r()));
  em = await startGitHubEmulator({ webhookSecret: "s3cret" });
  em.setWebhookUrl(`http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`);
  await em.createRepo({
    owner: "acme",
    name: "hooks",
    files: {
      "README.md": "x\n",
      ".github/workflows/fleet.yml":
        "name: Fleet\non:\n  workflow_dispatch:\n    inputs:\n      task:\n        type: string\njobs: {}\n",
    },
  });
  em.addCollaborator("acme/hooks", "maria", "write");
});
afterAll(async () => {
  await em?.stop();
  await new Promise((r) => receiver?.close(r));
});

describe("webhooks", () => {
  it("signs deliveries and shapes issues.labeled / issue_comment.created like GitHub", async () => {
    const gh = userOctokit(em, "maria");
    await gh.issues.create({ owner: "acme", repo: "hooks", title: "Do it" });
    await gh.issues.addLabels({ owner: "acme", repo: "hooks", issue_number: 1, labels: ["fleet:claude"] });
    await gh.issues.createComment({ owner: "acme", repo: "hooks", issue_number: 1, body: "/fleet plan" });
    await em.waitForDeliveries();

    const labeled = received.find(
      (r) => r.headers["x-github-event"] === "issues" && JSON.parse(r.raw).action === "labeled",
    )!;
    expect(labeled).toBeDefined();
    expect(await verify("s3cret", labeled.raw, String(labeled.headers["x-hub-signature-256"]))).toBe(true);
    expect(await verify("wrong", labeled.raw, String(labeled.headers["x-hub-signature-256"]))).toBe(false);
    expect(labeled.headers["content-type"]).toBe("application/json");
    expect(labeled.headers["x-github-hook-installation-target-id"]).toBe(String(em.appId));
    expect(labeled.headers["x-github-delivery"]).toMatch(/^[0-9a-f-]{36}$/);
    const payload = JSON.parse(labeled.raw);
    expect(check("issues$labeled", payload)).toEqual([]);
    expect(payload.label.name).toBe("fleet:claude");
    expect(payload.sender.login).toBe("maria");
    expect(payload.installation).toEqual({
      id: em.installationId("acme/hooks"),
      node_id: expect.any(String),
    });

    const comment = received.find((r) => r.headers["x-github-event"] === "issue_comment")!;
    expect(check("issue_comment$created", JSON.parse(comment.raw))).toEqual([]);
    expect(JSON.parse(comment.raw).comment.body).toBe("/fleet plan");

    const opened = received.find(
      (r) => r.headers["x-github-event"] === "issues" && JSON.parse(r.raw).action === "opened",
    )!;
    expect(check("issues$opened", JSON.parse(opened.raw))).toEqual([]);
  });

  it("shapes pull_request.opened/closed (merged) and push", async () => {
    const gh = userOctokit(em, "acme");
    const { data: main } = await gh.git.getRef({ owner: "acme", repo: "hooks", ref: "heads/main" });
    const { data: c } = await gh.git.getCommit({ owner: "acme", repo: "hooks", commit_sha: main.object.sha });
    const { data: tree } = await gh.git.createTree({
      owner: "acme",
      repo: "hooks",
      base_tree: c.tree.sha,
      tree: [{ path: "f.txt", mode: "100644", type: "blob", content: "f" }],
    });
    const { data: commit } = await gh.git.createCommit({
      owner: "acme",
      repo: "hooks",
      message: "f",
      tree: tree.sha,
      parents: [c.sha],
    });
    await gh.git.createRef({ owner: "acme", repo: "hooks", ref: "refs/heads/fleet/2-f", sha: commit.sha });
    const { data: pr } = await gh.pulls.create({
      owner: "acme",
      repo: "hooks",
      head: "fleet/2-f",
      base: "main",
      title: "F",
    });
    await gh.pulls.merge({ owner: "acme", repo: "hooks", pull_number: pr.number });
    await em.waitForDeliveries();
    const byKey = (event: string, action?: string) =>
      em.deliveries().filter((d) => d.event === event && (action === undefined || d.action === action));
    expect(check("pull_request$opened", byKey("pull_request", "opened")[0]!.payload)).toEqual([]);
    const closed = byKey("pull_request", "closed")[0]!.payload as { pull_request: { merged: boolean } };
    expect(check("pull_request$closed", closed)).toEqual([]);
    expect(closed.pull_request.merged).toBe(true);
    const pushes = byKey("push");
    expect(pushes.length).toBeGreaterThanOrEqual(2);
    expect(check("push$event", pushes[0]!.payload)).toEqual([]);
  });

  it("dispatches a workflow and moves its run: workflow_run requested -> in_progress -> completed", async () => {
    const gh = userOctokit(em, "maria");
    const dispatched: number[] = [];
    em.onWorkflowDispatch((run) => dispatched.push(run.id));
    await gh.actions.createWorkflowDispatch({
      owner: "acme",
      repo: "hooks",
      workflow_id: "fleet.yml",
      ref: "main",
      inputs: { task: "bd-1" },
    });
    const [run] = em.workflowRuns("acme/hooks");
    expect(run).toMatchObject({ status: "queued", inputs: { task: "bd-1" }, name: "Fleet" });
    expect(dispatched).toEqual([run!.id]);
    await em.setWorkflowRunStatus("acme/hooks", run!.id, "in_progress");
    const { data: got } = await gh.actions.getWorkflowRun({ owner: "acme", repo: "hooks", run_id: run!.id });
    expect(got.status).toBe("in_progress");
    await em.setWorkflowRunStatus("acme/hooks", run!.id, "completed", "success");
    const { data: list } = await gh.actions.listWorkflowRunsForRepo({ owner: "acme", repo: "hooks" });
    expect(list.workflow_runs.map((r) => [r.id, r.status, r.conclusion])).toEqual([
      [run!.id, "completed", "success"],
    ]);
    await em.waitForDeliveries();
    const runs = em.deliveries().filter((d) => d.event === "workflow_run");
    expect(runs.map((d) => d.action)).toEqual(["requested", "in_progress", "completed"]);
    expect(check("workflow_run$completed", runs[2]!.payload)).toEqual([]);
    const jobs = em.deliveries().filter((d) => d.event === "workflow_job");
    expect(check("workflow_job$completed", jobs[jobs.length - 1]!.payload)).toEqual([]);

    await gh.actions.createWorkflowDispatch({
      owner: "acme",
      repo: "hooks",
      workflow_id: "fleet.yml",
      ref: "main",
    });
    const second = em.workflowRuns("acme/hooks")[1]!;
    await gh.actions.cancelWorkflowRun({ owner: "acme", repo: "hooks", run_id: second.id });
    expect(em.workflowRuns("acme/hooks")[1]).toMatchObject({ status: "completed", conclusion: "cancelled" });
    await expect(
      gh.actions.createWorkflowDispatch({
        owner: "acme",
        repo: "hooks",
        workflow_id: "missing.yml",
        ref: "main",
      }),
    ).rejects.toMatchObject({ status: 404 });
  });

  it("records failed deliveries, redelivers with the same id, drops on request, emits installation.created", async () => {
    const gh = userOctokit(em, "maria");
    status = 500;
    await gh.issues.update({ owner: "acme", repo: "hooks", issue_number: 1, title: "Do it now" });
    await em.waitForDeliveries();
    const failed = em.deliveries().at(-1)!;
    expect(failed).toMatchObject({ event: "issues", action: "edited", status: 500 });
    status = 200;
    const before = received.length;
    expect(await em.redeliver(failed.id)).toBe(200);
    expect(received[before]!.headers["x-github-delivery"]).toBe(failed.id);
    expect(em.deliveries().at(-1)).toMatchObject({ id: failed.id, status: 200, redelivery: true });

    em.faults.inject({
      route: "POST /repos/{owner}/{repo}/issues/{issue_number}/comments",
      dropDelivery: true,
      times: 1,
    });
    const n = received.length;
    await gh.issues.createComment({ owner: "acme", repo: "hooks", issue_number: 1, body: "lost" });
    await em.waitForDeliveries();
    expect(received.length).toBe(n);
    expect(em.deliveries().at(-1)).toMatchObject({ event: "issue_comment", status: "dropped" });

    em.emitInstallation("acme/hooks");
    await em.waitForDeliveries();
    const inst = em.deliveries().at(-1)!;
    expect(inst).toMatchObject({ event: "installation", action: "created", status: 200 });
    expect(check("installation$created", inst.payload)).toEqual([]);
  });
});
