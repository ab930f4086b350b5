// The app's token exchange for runners (POST /fleet/actions-token) against the emulator's OIDC
// issuer: who gets a token and who does not, that each OIDC token buys one token at most, what the
// token it buys cannot do; and why it exists: with its own GITHUB_TOKEN, a run cannot open the
// task's pull request under GitHub's default settings.

import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GIT_RECEIVE_PACK_ROUTE, type GitHubEmulator, startGitHubEmulator } from "@fleet/github-emulator";
import { gitAs } from "@fleet/github-emulator/test-helpers";
import { type ScriptServer, startAnthropicScriptServer } from "@fleet/model-servers";
import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FleetServer } from "../../src/app/server.ts";
import type { Task } from "../../src/core/task.ts";
import { type ActionRun, type Dispatched, runActionBundle } from "../support/action-runner.ts";
import { waitFor } from "../support/bot-client.ts";
import { FLEET_APP } from "../support/fleet-app.ts";
import { type Harness, startAppInstance, startHarness } from "../support/harness.ts";

const FLEET_YML =
  "dispatch: actions\nmax_concurrent: 10\nplan_phase: false\nretries: { max: 0 }\ntimeouts: { run_minutes: 2, stall_minutes: 1 }\n";
const USAGE = { input_tokens: 100, output_tokens: 10 };

describe("the runner's token exchange", () => {
  let h: Harness;
  let scratch: string;
  let model: ScriptServer;
  const dispatched: Dispatched[] = [];
  /** Called with each dispatched run before the app has recorded its id. */
  let onDispatch: (run: Dispatched) => void = () => {};
  /** Releases of the state writes held back by unrecordedRun, all released before the app stops. */
  const holds: Array<() => void> = [];

  beforeAll(async () => {
    const workflow = await readFile(".github/workflows/fleet-task.yml", "utf8");
    h = await startHarness({
      files: { ".github/fleet.yml": FLEET_YML, ".github/workflows/fleet-task.yml": workflow },
    });
    scratch = await mkdtemp(join(tmpdir(), "fleet-actions-token-"));
    model = await startAnthropicScriptServer({
      turns: [
        {
          toolUses: [{ name: "Bash", input: { command: "echo x > X.md", description: "write" } }],
          usage: USAGE,
        },
        { text: "Done.", usage: USAGE },
      ],
    });
    h.gh.onWorkflowDispatch((run) => {
      dispatched.push(run);
      onDispatch(run);
      void h.gh.setWorkflowRunStatus(h.full, run.id, "in_progress");
    });
  }, 120_000);
  afterAll(async () => {
    for (const release of holds) release();
    await model?.stop();
    await h?.stop();
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  /** A labeled issue's task once its run is dispatched and recorded. */
  async function liveTask(title: string): Promise<{ task: Task; run: Dispatched }> {
    const issue = await h.newIssue(title, `${title}.`);
    await h.label(issue, "fleet:claude");
    const task = await waitFor("the run to be recorded", async () => {
      const t = (await h.tasks()).find((x) => x.issue === issue);
      return t?.runId ? t : undefined;
    });
    return { task, run: dispatched.find((r) => String(r.id) === task.runId)! };
  }

  /**
   * A labeled issue's run, dispatched but its id's record held back (the next state write waits until
   * `release` is called), and a second replica of the app to ask, whose reads do not queue behind the
   * first one's write.
   */
  async function unrecordedRun(
    title: string,
  ): Promise<{ run: Dispatched; replica: FleetServer; release: () => void }> {
    const replica = await startAppInstance(h.gh);
    h.gh.setWebhookUrl(h.app.webhookUrl);
    let release = () => {};
    const hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    holds.push(release);
    const seen = new Promise<Dispatched>((resolve) => {
      onDispatch = (run) => {
        onDispatch = () => {};
        h.gh.faults.inject({ route: GIT_RECEIVE_PACK_ROUTE, holdUntil: hold, times: 1 });
        resolve(run);
      };
    });
    const issue = await h.newIssue(title, `${title}.`);
    await h.mona.rest.issues.addLabels({
      owner: h.owner,
      repo: h.name,
      issue_number: issue,
      labels: ["fleet:claude"],
    });
    return { run: await seen, replica, release };
  }

  /** Fleet's workflow started by hand by a writer (mona) with `inputs`: the run's id. */
  async function dispatchByHand(inputs: Record<string, string>): Promise<number> {
    const { data } = await h.mona.request(
      "POST /repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches",
      {
        owner: h.owner,
        repo: h.name,
        workflow_id: "fleet-task.yml",
        ref: "main",
        inputs,
        return_run_details: true,
      },
    );
    return (data as { workflow_run_id: number }).workflow_run_id;
  }

  /** The job's OIDC token, fetched as @actions/core's getIDToken does. */
  async function oidcToken(runId: number, audience = "fleet"): Promise<string> {
    const env = h.gh.jobEnvironment(h.full, runId);
    const res = await fetch(`${env.ACTIONS_ID_TOKEN_REQUEST_URL}&audience=${audience}`, {
      headers: { authorization: `Bearer ${env.ACTIONS_ID_TOKEN_REQUEST_TOKEN}` },
    });
    return ((await res.json()) as { value: string }).value;
  }

  const exchange = (bearer: string | undefined, taskId: string) => exchangeAt(h.app, bearer, taskId);

  it("gives the dispatched run of a live task a token for that repository only", async () => {
    const { task, run } = await liveTask("Exchange");
    const mark = h.gh.requests.mark();
    const ok = await exchange(await oidcToken(run.id), task.id);
    expect(ok.status).toBe(201);
    // The app works on this repository already (the label came from it): its installation is known,
    // so the exchange asks GitHub only for the token.
    const { byRoute } = h.gh.counts({ since: mark });
    expect(byRoute["GET /repos/{owner}/{repo}/installation"] ?? 0).toBe(0);
    expect(byRoute["POST /app/installations/{installation_id}/access_tokens"]).toBe(1);
    const token = ok.body.token!;
    const as = (path: string) =>
      fetch(`${h.gh.url}${path}`, { headers: { authorization: `token ${token}` } }).then((r) => r.status);
    expect(await as(`/repos/${h.full}`)).toBe(200);
    const other = await h.gh.createRepo({ owner: h.owner, name: "other", files: { "README.md": "x\n" } });
    expect(await as(`/repos/${other.fullName}`)).toBe(404);
  });

  it("refuses a missing or foreign token, a wrong audience, another run, and an unknown task", async () => {
    const { task, run } = await liveTask("Refusals");
    expect((await exchange(undefined, task.id)).status).toBe(401);
    expect((await exchange("not-a-jwt", task.id)).status).toBe(401);
    const wrongAudience = await exchange(await oidcToken(run.id, "https://github.com/octo-org"), task.id);
    expect(wrongAudience.status).toBe(401);
    expect(wrongAudience.body.message).toMatch(/not accepted/);
    // Someone starts Fleet's workflow by hand, naming a live task: its run is not the task's.
    const manualRun = await dispatchByHand({ task_id: task.id });
    const foreign = await exchange(await oidcToken(manualRun), task.id);
    expect(foreign.status).toBe(403);
    expect(foreign.body.message).toMatch(new RegExp(`dispatched as run ${task.runId}, not run ${manualRun}`));
    expect((await exchange(await oidcToken(run.id), "fl-nope")).status).toBe(404);
  });

  it("accepts each OIDC token once: a second exchange of the same token is refused", async () => {
    const { task, run } = await liveTask("Once");
    const oidc = await oidcToken(run.id);
    const first = await exchange(oidc, task.id);
    expect(first.status).toBe(201);
    for (let i = 0; i < 2; i++) {
      const again = await exchange(oidc, task.id);
      expect(again.status).toBe(401);
      expect(again.body.token).toBeUndefined();
      expect(again.body.message).toMatch(/already been exchanged/);
    }
    // The action asks for a new OIDC token each try: that one is a new exchange.
    expect((await exchange(await oidcToken(run.id), task.id)).status).toBe(201);
  });

  it("uses a token up only once a token was minted for it: after a 409, a refusal or a failed mint it still works", async () => {
    // The run asks before its id is recorded.
    const { run, replica, release } = await unrecordedRun("Early run");
    const oidc = await oidcToken(run.id);
    const taskId = String(run.inputs.task_id);
    const atReplica = (id: string) => exchangeAt(replica, oidc, id);
    // Before the record, the run itself could say it is Fleet's dispatch; GitHub does not answer that now.
    h.gh.faults.inject({ route: "GET /repos/{owner}/{repo}/actions/runs/{run_id}", status: 502, times: 1 });
    const early = await atReplica(taskId);
    expect(early.status).toBe(409);
    expect(early.body.message).toMatch(/not recorded yet/);
    release();
    await waitFor("the run to be recorded", async () =>
      (await h.tasks()).find((t) => t.id === taskId && t.runId === String(run.id)),
    );
    // Refused for another reason, then the mint fails: neither uses the token up.
    expect((await atReplica("fl-nope")).status).toBe(404);
    h.gh.faults.inject({
      route: "POST /app/installations/{installation_id}/access_tokens",
      status: 500,
      times: 1,
    });
    expect((await atReplica(taskId)).status).toBe(500);
    const minted = await atReplica(taskId);
    expect(minted.status).toBe(201);
    expect(minted.body.token).toMatch(/^ghs_/);
    expect((await atReplica(taskId)).status).toBe(401);
    await h.settle();
    await replica.stop();
  });

  it("gives Fleet's run a token before its id is recorded (its dispatcher may have died): the run says it is Fleet's; a writer's copy of it gets none", async () => {
    // As if the process that dispatched the run died before recording it (held until released: the
    // checks below run while the task has no run id).
    const { run, replica, release } = await unrecordedRun("Unrecorded run");
    const taskId = String(run.inputs.task_id);
    const unrecorded = (await h.tasks()).find((t) => t.id === taskId);
    expect(unrecorded?.state).toBe("dispatched");
    expect(unrecorded?.runId).toBeUndefined();
    // A writer starts Fleet's workflow by hand with the very inputs of Fleet's run (its run-name too).
    const manualRun = await dispatchByHand(run.inputs as Record<string, string>);
    const runs = await h.mona.rest.actions.listWorkflowRuns({
      owner: h.owner,
      repo: h.name,
      workflow_id: "fleet-task.yml",
    });
    const titles = runs.data.workflow_runs.filter((r) => r.id === run.id || r.id === manualRun);
    expect(new Set(titles.map((r) => r.display_title)).size).toBe(1);
    const mark = h.gh.requests.mark();
    const copy = await exchangeAt(replica, await oidcToken(manualRun), taskId);
    expect(copy.status).toBe(409);
    expect(copy.body.token).toBeUndefined();
    const fleets = await exchangeAt(replica, await oidcToken(run.id), taskId);
    expect(fleets.status).toBe(201);
    expect(fleets.body.token).toMatch(/^ghs_/);
    // One read of the run, besides the mint; the writer's copy cost none (its token's signed actor is the writer).
    const { byRoute } = h.gh.counts({ since: mark });
    expect(byRoute["GET /repos/{owner}/{repo}/actions/runs/{run_id}"]).toBe(1);
    // The writer's copy ends, its webhook to the replica (which reads the state without the held-back
    // record): it is not the task's run, though its run-name says so. Taken for it, it would fail the
    // task (no retries left).
    h.gh.setWebhookUrl(replica.webhookUrl);
    await h.gh.setWorkflowRunStatus(h.full, manualRun, "completed", "failure");
    await h.gh.waitForDeliveries();
    await replica.idle();
    h.gh.setWebhookUrl(h.app.webhookUrl);
    release();
    await h.settle();
    const after = (await h.tasks()).find((t) => t.id === taskId);
    expect(after?.state).toBe("dispatched");
    expect(after?.runId).toBe(String(run.id));
    await replica.stop();
  });

  it("refuses a re-run of Fleet's run (its next attempt, started by a writer in the Actions tab)", async () => {
    const { task, run } = await liveTask("Re-run");
    // The run ends and a writer re-runs it, while Fleet hears of neither (its webhooks go nowhere
    // meanwhile): the task is still the run's, live, when the re-run asks for a token.
    const rerunIt = () =>
      h.mona.request("POST /repos/{owner}/{repo}/actions/runs/{run_id}/rerun", {
        owner: h.owner,
        repo: h.name,
        run_id: run.id,
      });
    // GitHub re-runs only a run that has ended.
    await expect(rerunIt()).rejects.toMatchObject({ status: 403 });
    h.gh.setWebhookUrl("http://127.0.0.1:9/unreachable");
    await h.gh.setWorkflowRunStatus(h.full, run.id, "completed", "success");
    expect((await rerunIt()).status).toBe(201);
    h.gh.setWebhookUrl(h.app.webhookUrl);
    const rerun = (await h.mona.rest.actions.getWorkflowRun({ owner: h.owner, repo: h.name, run_id: run.id }))
      .data;
    expect(rerun).toMatchObject({ run_attempt: 2, status: "queued", triggering_actor: { login: "mona" } });
    expect((await h.tasks()).find((t) => t.id === task.id)).toMatchObject({ runId: String(run.id) });
    const refused = await exchange(await oidcToken(run.id), task.id);
    expect(refused.status).toBe(403);
    expect(refused.body.token).toBeUndefined();
    expect(refused.body.message).toMatch(new RegExp(`Run ${run.id} is attempt 2, a re-run`));
  });

  it("gives a token that cannot change workflows or administer the repository; a ruleset keeps it off the default branch", async () => {
    const { task, run } = await liveTask("Limits");
    const token = (await exchange(await oidcToken(run.id), task.id)).body.token!;
    const dir = join(scratch, `limits-${run.id}`);
    const url = `${h.gh.url}/${h.full}.git`;
    expect((await gitAs(scratch, token, ["clone", "-q", url, dir])).code).toBe(0);
    const commit = async (path: string, text: string) => {
      await writeFile(join(dir, path), text);
      await gitAs(dir, undefined, ["add", "."]);
      await gitAs(dir, undefined, ["commit", "-q", "-m", `Change ${path}`]);
    };
    const push = (refspec: string) => gitAs(dir, token, ["push", "-q", url, refspec]);

    // Its own fleet/* branch: yes.
    await gitAs(dir, undefined, ["checkout", "-q", "-b", `fleet/${task.issue}-limits`]);
    await commit("LIMITS.md", "work\n");
    expect((await push(`fleet/${task.issue}-limits`)).code).toBe(0);
    // A workflow file: no (the token was not given `workflows`), so what the agent wrote cannot
    // start a workflow of its own with the repository's secrets.
    await commit(".github/workflows/fleet-task.yml", "name: changed\non: push\njobs: {}\n");
    const workflow = await push(`HEAD:refs/heads/fleet/${task.issue}-workflow`);
    expect(workflow.code).not.toBe(0);
    expect(workflow.stderr).toContain(
      "refusing to allow a GitHub App to create or update workflow `.github/workflows/fleet-task.yml` without `workflows` permission",
    );
    await gitAs(dir, undefined, ["reset", "-q", "--hard", "HEAD~1"]);
    // Repository administration: no (here, letting the jobs' GITHUB_TOKEN approve pull requests).
    const admin = await fetch(`${h.gh.url}/repos/${h.full}/actions/permissions/workflow`, {
      method: "PUT",
      headers: { authorization: `token ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ default_workflow_permissions: "write", can_approve_pull_request_reviews: true }),
    });
    expect(admin.status).toBe(403);

    // Its permissions reach every branch (GitHub's App permissions have no branch scope): the
    // default branch is kept from it by a ruleset that does not list the app as a bypass actor.
    h.gh.addRuleset(h.full, {
      name: "Default branch through pull requests",
      include: ["~DEFAULT_BRANCH"],
      rules: ["pull_request"],
    });
    const main = await push("HEAD:refs/heads/main");
    expect(main.code).not.toBe(0);
    expect(main.stderr).toContain("GH013: Repository rule violations found for refs/heads/main.");
    expect(main.stderr).toContain("Changes must be made through a pull request.");
    const api = await fetch(`${h.gh.url}/repos/${h.full}/contents/X.md`, {
      method: "PUT",
      headers: { authorization: `token ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ message: "x", content: Buffer.from("x").toString("base64"), branch: "main" }),
    });
    expect(api.status).toBe(422);
    expect(((await api.json()) as { message: string }).message).toContain(
      "Changes must be made through a pull request.",
    );
    // fleet/* stays open to it.
    await commit("LIMITS.md", "more work\n");
    expect((await push(`fleet/${task.issue}-limits`)).code).toBe(0);
    await h.settle();
  });

  it("with only the job's own GITHUB_TOKEN the run cannot open the PR (GitHub's default setting)", async () => {
    const { task, run } = await liveTask("Job token only");
    const result: ActionRun = await runActionBundle({
      h,
      run,
      scratch,
      inputs: {
        "fleet-url": "",
        "github-token": h.gh.jobEnvironment(h.full, run.id).GITHUB_TOKEN,
        credentials: "ANTHROPIC_API_KEY=sk-ant-job-token-test-0000000000",
        "model-base-url": model.url,
        "agent-env": "CLAUDE_CODE_MAX_RETRIES=0",
      },
    });
    expect(result.outputs.conclusion).toBe("failed");
    const after = (await h.tasks()).find((t) => t.id === task.id)!;
    expect(after.reason).toMatch(/GitHub Actions is not permitted to create or approve pull requests/);
    expect(h.gh.pulls(h.full).some((p) => p.head.startsWith(`fleet/${task.issue}-`))).toBe(false);
  }, 120_000);
});

/** POST /fleet/actions-token on `app` with `bearer` for `taskId`. */
async function exchangeAt(app: FleetServer, bearer: string | undefined, taskId: string) {
  const res = await fetch(`${app.url}/fleet/actions-token`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(bearer ? { authorization: `Bearer ${bearer}` } : {}),
    },
    body: JSON.stringify({ task_id: taskId }),
  });
  return { status: res.status, body: (await res.json()) as { token?: string; message?: string } };
}

// An issuer the app is configured to trust (FLEET_OIDC_ISSUER) can sign whatever claims it likes:
// the app needs `jti` and `exp` to accept a token once and forget it when it expires.
describe("the token exchange with another trusted OIDC issuer", () => {
  let gh: GitHubEmulator;
  let app: FleetServer;
  let issuer: Server;
  let issuerUrl: string;
  let sign: (claims: JWTPayload) => Promise<string>;

  beforeAll(async () => {
    const { publicKey, privateKey } = await generateKeyPair("RS256");
    const jwk = { ...(await exportJWK(publicKey)), kid: "test", alg: "RS256", use: "sig" };
    issuer = createServer((req, res) => {
      res.writeHead(req.url === "/.well-known/jwks" ? 200 : 404, { "content-type": "application/json" });
      res.end(JSON.stringify(req.url === "/.well-known/jwks" ? { keys: [jwk] } : {}));
    });
    await new Promise<void>((r) => issuer.listen(0, "127.0.0.1", r));
    issuerUrl = `http://127.0.0.1:${(issuer.address() as AddressInfo).port}`;
    sign = (claims) =>
      new SignJWT(claims).setProtectedHeader({ alg: "RS256", kid: "test", typ: "JWT" }).sign(privateKey);
    gh = await startGitHubEmulator(FLEET_APP);
    app = await startAppInstance(gh, { actionsTokens: { issuer: issuerUrl } });
  }, 60_000);
  afterAll(async () => {
    await app?.stop();
    await gh?.stop();
    await new Promise((r) => issuer?.close(r));
  });

  it("refuses a token without jti or without exp, saying which claim is missing", async () => {
    const now = Math.floor(Date.now() / 1000);
    const claims = {
      iss: issuerUrl,
      aud: "fleet",
      iat: now,
      exp: now + 300,
      jti: "a-unique-id",
      repository: "octo-org/widgets",
      event_name: "workflow_dispatch",
      run_id: "1",
      workflow_ref: "octo-org/widgets/.github/workflows/fleet-task.yml@refs/heads/main",
    };
    const { jti: _jti, ...noJti } = claims;
    const withoutJti = await exchangeAt(app, await sign(noJti), "fl-1");
    expect(withoutJti.status).toBe(401);
    expect(withoutJti.body.message).toMatch(/no `jti` claim/);
    const { exp: _exp, ...noExp } = claims;
    const withoutExp = await exchangeAt(app, await sign(noExp), "fl-1");
    expect(withoutExp.status).toBe(401);
    expect(withoutExp.body.message).toMatch(/no `exp` claim/);
  });
});
