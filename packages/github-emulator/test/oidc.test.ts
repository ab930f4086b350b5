import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getIDToken } from "@actions/core";
import { createRemoteJWKSet, jwtVerify } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GitHubEmulator, startGitHubEmulator, type WorkflowRun } from "../src/index.ts";
import { eventually, gitAs, tokenOctokit, userOctokit } from "../src/test-helpers.ts";

const owner = "acme";
const repo = "oidc";
const FULL = `${owner}/${repo}`;

let em: GitHubEmulator;
let httpUrl: string;
let otherHttpUrl: string;
let work: string;

beforeAll(async () => {
  em = await startGitHubEmulator();
  ({ httpUrl } = await em.createRepo({
    owner,
    name: repo,
    files: {
      "README.md": "# oidc\n",
      ".github/workflows/fleet.yml": "name: Fleet task\non: workflow_dispatch\njobs: {}\n",
      ".github/workflows/ci.yml": "name: CI\non: [push, pull_request]\njobs: {}\n",
    },
  }));
  ({ httpUrl: otherHttpUrl } = await em.createRepo({
    owner,
    name: "other",
    files: { "README.md": "# o\n" },
  }));
  await em.createRepo({ owner: "zeta", name: "z", files: { "README.md": "# z\n" } });
  em.addCollaborator(FULL, "mona", "write");
  work = await mkdtemp(join(tmpdir(), "fleet-gh-oidc-"));
});
afterAll(async () => {
  await em?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

const status = (p: Promise<unknown>) =>
  p.then(
    () => 200,
    (e: { status?: number }) => e.status ?? -1,
  );

/** Mona dispatches Fleet's workflow on `ref`; the new run. */
async function dispatch(ref = "main"): Promise<WorkflowRun> {
  const before = em.workflowRuns(FULL).length;
  await userOctokit(em, "mona").rest.actions.createWorkflowDispatch({
    owner,
    repo,
    workflow_id: "fleet.yml",
    ref,
  });
  const runs = em.workflowRuns(FULL);
  expect(runs.length).toBe(before + 1);
  return runs[runs.length - 1]!;
}

/** Runs `fn` with `env` in process.env (what a runner gives a step), then puts the old values back. */
async function withEnv<T>(env: Record<string, string | undefined>, fn: () => Promise<T>): Promise<T> {
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  const set = (vars: Record<string, string | undefined>) => {
    for (const [k, v] of Object.entries(vars)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
  set(env);
  try {
    return await fn();
  } finally {
    set(saved);
  }
}

/** getIDToken as a step calls it; @actions/core prints `::add-mask::` and `::debug::` lines, kept quiet here. */
async function idTokenAsAStep(env: Record<string, string | undefined>, audience?: string): Promise<string> {
  const write = process.stdout.write;
  process.stdout.write = (() => true) as typeof process.stdout.write;
  try {
    return await withEnv(env, () => getIDToken(audience));
  } finally {
    process.stdout.write = write;
  }
}

/** GET the ID-token URL the way getIDToken does (URL + `&audience=`, bearer), without retries. */
async function fetchIdToken(url: string, token: string | undefined, audience?: string) {
  const res = await fetch(audience ? `${url}&audience=${encodeURIComponent(audience)}` : url, {
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
  });
  return { status: res.status, body: (await res.json()) as { value?: string; message?: string } };
}

const jwks = () => createRemoteJWKSet(new URL(`${em.oidcIssuer}/.well-known/jwks`));

describe("the Actions OIDC issuer", () => {
  it("publishes discovery and the signing key (GHES form: <url>/_services/token)", async () => {
    expect(em.oidcIssuer).toBe(`${em.url}/_services/token`);
    const mark = em.requests.mark();
    const conf = (await (await fetch(`${em.oidcIssuer}/.well-known/openid-configuration`)).json()) as Record<
      string,
      unknown
    >;
    expect(conf).toMatchObject({
      issuer: em.oidcIssuer,
      jwks_uri: `${em.oidcIssuer}/.well-known/jwks`,
      id_token_signing_alg_values_supported: ["RS256"],
      response_types_supported: ["id_token"],
    });
    expect(conf.claims_supported).toEqual(expect.arrayContaining(["sub", "repository", "job_workflow_ref"]));
    const { keys } = (await (await fetch(String(conf.jwks_uri))).json()) as {
      keys: Array<Record<string, string>>;
    };
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatchObject({ kty: "RSA", alg: "RS256", use: "sig", e: "AQAB" });
    expect(keys[0]!.kid).toMatch(/^[\w-]{20,}$/);
    expect(keys[0]!.n!.length).toBeGreaterThan(300);
    // Not REST: no request counted, nothing unimplemented.
    expect(em.counts({ since: mark }).total).toBe(0);
    expect(em.unimplemented()).toEqual([]);
  });

  it("one key pair per process: a second emulator signs with the same key, and its issuer and tokens are its own", async () => {
    const second = await startGitHubEmulator();
    try {
      const kid = async (issuer: string) =>
        ((await (await fetch(`${issuer}/.well-known/jwks`)).json()) as { keys: Array<{ kid: string }> })
          .keys[0]!.kid;
      expect(await kid(second.oidcIssuer)).toBe(await kid(em.oidcIssuer));
      expect(second.oidcIssuer).not.toBe(em.oidcIssuer);
      // A token one emulator issued means nothing to the other.
      const token = em.userToken("mona");
      const other = await fetch(`${second.url}/user`, { headers: { authorization: `token ${token}` } });
      expect(other.status).toBe(401);
    } finally {
      await second.stop();
    }
  });
});

describe("a job's OIDC token", () => {
  it("comes from getIDToken of @actions/core with the job's environment and verifies against the JWKS with the run's claims", async () => {
    const run = await dispatch();
    const env = em.jobEnvironment(FULL, run.id);
    expect(Object.keys(env).sort()).toEqual([
      "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
      "ACTIONS_ID_TOKEN_REQUEST_URL",
      "GITHUB_TOKEN",
    ]);
    expect(env.ACTIONS_ID_TOKEN_REQUEST_URL).toContain("?");
    // The same run keeps its request token.
    expect(em.jobEnvironment(FULL, run.id).ACTIONS_ID_TOKEN_REQUEST_TOKEN).toBe(
      env.ACTIONS_ID_TOKEN_REQUEST_TOKEN,
    );

    const mark = em.requests.mark();
    const jwt = await idTokenAsAStep(env, "fleet");
    const { payload, protectedHeader } = await jwtVerify(jwt, jwks(), {
      issuer: em.oidcIssuer,
      audience: "fleet",
      algorithms: ["RS256"],
    });
    expect(em.counts({ since: mark }).total).toBe(0);
    expect(em.unimplemented()).toEqual([]);

    const { keys } = (await (await fetch(`${em.oidcIssuer}/.well-known/jwks`)).json()) as {
      keys: Array<{ kid: string }>;
    };
    expect(protectedHeader).toMatchObject({ alg: "RS256", typ: "JWT", kid: keys[0]!.kid });

    const mona = userOctokit(em, "mona");
    const { data: r } = await mona.rest.repos.get({ owner, repo });
    const { data: monaUser } = await mona.rest.users.getByUsername({ username: "mona" });
    const workflowRef = `${FULL}/.github/workflows/fleet.yml@refs/heads/main`;
    expect(payload).toMatchObject({
      iss: em.oidcIssuer,
      aud: "fleet",
      sub: `repo:${FULL}:ref:refs/heads/main`,
      repository: FULL,
      repository_id: String(r.id),
      repository_owner: owner,
      repository_owner_id: String(r.owner.id),
      repository_visibility: "public",
      run_id: String(run.id),
      run_number: String(run.runNumber),
      run_attempt: "1",
      actor: "mona",
      actor_id: String(monaUser.id),
      workflow: "Fleet task",
      workflow_ref: workflowRef,
      workflow_sha: run.headSha,
      job_workflow_ref: workflowRef,
      job_workflow_sha: run.headSha,
      event_name: "workflow_dispatch",
      ref: "refs/heads/main",
      ref_type: "branch",
      sha: run.headSha,
      head_ref: "",
      base_ref: "",
      runner_environment: "self-hosted",
    });
    expect(typeof payload.jti).toBe("string");
    const now = Math.floor(Date.now() / 1000);
    expect(payload.iat).toBeGreaterThanOrEqual(now - 5);
    expect(payload.nbf).toBeLessThanOrEqual(payload.iat!);
    // Short-lived: a few minutes.
    expect(payload.exp! - payload.iat!).toBe(300);

    // Each request is a new token (its own jti).
    const again = await idTokenAsAStep(env, "fleet");
    expect((await jwtVerify(again, jwks(), { audience: "fleet" })).payload.jti).not.toBe(payload.jti);
  });

  it("defaults the audience to https://github.com/<owner> and follows the run's branch", async () => {
    const mona = userOctokit(em, "mona");
    const { data: main } = await mona.rest.git.getRef({ owner, repo, ref: "heads/main" });
    await mona.rest.git.createRef({ owner, repo, ref: "refs/heads/feature/x", sha: main.object.sha });
    const run = await dispatch("feature/x");
    const env = em.jobEnvironment(FULL, run.id);
    const got = await fetchIdToken(env.ACTIONS_ID_TOKEN_REQUEST_URL!, env.ACTIONS_ID_TOKEN_REQUEST_TOKEN);
    expect(got.status).toBe(200);
    const { payload } = await jwtVerify(got.body.value!, jwks(), { issuer: em.oidcIssuer });
    expect(payload).toMatchObject({
      aud: `https://github.com/${owner}`,
      sub: `repo:${FULL}:ref:refs/heads/feature/x`,
      ref: "refs/heads/feature/x",
      workflow_ref: `${FULL}/.github/workflows/fleet.yml@refs/heads/feature/x`,
    });
    // The lower-case `bearer` of GitHub's curl example works too.
    const lower = await fetch(env.ACTIONS_ID_TOKEN_REQUEST_URL!, {
      headers: { authorization: `bearer ${env.ACTIONS_ID_TOKEN_REQUEST_TOKEN}` },
    });
    expect(lower.status).toBe(200);
  });

  it("of a pull_request run has the pull_request subject, its merge ref and head/base refs", async () => {
    const mona = userOctokit(em, "mona");
    const { data: main } = await mona.rest.git.getRef({ owner, repo, ref: "heads/main" });
    await mona.rest.git.createRef({ owner, repo, ref: "refs/heads/pr-branch", sha: main.object.sha });
    await mona.rest.repos.createOrUpdateFileContents({
      owner,
      repo,
      path: "pr.txt",
      branch: "pr-branch",
      message: "PR change",
      content: Buffer.from("pr\n").toString("base64"),
    });
    const { data: pr } = await mona.rest.pulls.create({
      owner,
      repo,
      head: "pr-branch",
      base: "main",
      title: "PR",
    });
    const run = em
      .workflowRuns(FULL)
      .find((r) => r.event === "pull_request" && r.pullRequests?.includes(pr.number))!;
    expect(run).toBeDefined();
    const env = em.jobEnvironment(FULL, run.id);
    const got = await fetchIdToken(
      env.ACTIONS_ID_TOKEN_REQUEST_URL!,
      env.ACTIONS_ID_TOKEN_REQUEST_TOKEN,
      "x",
    );
    const { payload } = await jwtVerify(got.body.value!, jwks(), { audience: "x" });
    expect(payload).toMatchObject({
      sub: `repo:${FULL}:pull_request`,
      event_name: "pull_request",
      ref: `refs/pull/${pr.number}/merge`,
      head_ref: "pr-branch",
      base_ref: "main",
      workflow: "CI",
      sha: run.headSha,
    });
  });

  it("answers 401 without the run's request token, for another run, or once the run is completed", async () => {
    const a = await dispatch();
    const b = await dispatch();
    const envA = em.jobEnvironment(FULL, a.id);
    const envB = em.jobEnvironment(FULL, b.id);
    const urlA = envA.ACTIONS_ID_TOKEN_REQUEST_URL!;
    expect(envA.ACTIONS_ID_TOKEN_REQUEST_TOKEN).not.toBe(envB.ACTIONS_ID_TOKEN_REQUEST_TOKEN);

    expect((await fetchIdToken(urlA, undefined, "fleet")).status).toBe(401);
    expect((await fetchIdToken(urlA, "not-the-token", "fleet")).status).toBe(401);
    // Run B's token is not run A's, and the reverse.
    expect((await fetchIdToken(urlA, envB.ACTIONS_ID_TOKEN_REQUEST_TOKEN, "fleet")).status).toBe(401);
    expect(
      (await fetchIdToken(envB.ACTIONS_ID_TOKEN_REQUEST_URL!, envA.ACTIONS_ID_TOKEN_REQUEST_TOKEN, "fleet"))
        .status,
    ).toBe(401);
    // A GITHUB_TOKEN is not a request token.
    expect((await fetchIdToken(urlA, envA.GITHUB_TOKEN, "fleet")).status).toBe(401);
    // getIDToken reports the refusal.
    await expect(
      idTokenAsAStep(
        { ...envA, ACTIONS_ID_TOKEN_REQUEST_TOKEN: envB.ACTIONS_ID_TOKEN_REQUEST_TOKEN },
        "fleet",
      ),
    ).rejects.toThrow(/401/);

    expect((await fetchIdToken(urlA, envA.ACTIONS_ID_TOKEN_REQUEST_TOKEN, "fleet")).status).toBe(200);
    await em.setWorkflowRunStatus(FULL, a.id, "completed", "success");
    expect((await fetchIdToken(urlA, envA.ACTIONS_ID_TOKEN_REQUEST_TOKEN, "fleet")).status).toBe(401);
  });

  it("is not offered to a job without id-token: write", async () => {
    const run = await dispatch();
    const env = em.jobEnvironment(FULL, run.id, { idToken: false });
    expect(Object.keys(env)).toEqual(["GITHUB_TOKEN"]);
    await expect(idTokenAsAStep(env, "fleet")).rejects.toThrow(
      /ACTIONS_ID_TOKEN_REQUEST_URL|ACTIONS_ID_TOKEN_REQUEST_TOKEN/,
    );
    // Its GITHUB_TOKEN is the run's workflow token.
    const gh = tokenOctokit(em, env.GITHUB_TOKEN);
    const { data: issue } = await gh.rest.issues.create({ owner, repo, title: "from the job" });
    expect(issue.user?.login).toBe("github-actions[bot]");
    expect(() => em.jobEnvironment(FULL, 999_999)).toThrow(/no workflow run/);
  });
});

/** The app's JWT, as the Fleet app signs it. */
async function appJwt(): Promise<string> {
  const { createAppAuth } = await import("@octokit/auth-app");
  const auth = createAppAuth({ appId: em.appId, privateKey: em.privateKey });
  return ((await auth({ type: "app" })) as { token: string }).token;
}

describe("installation tokens narrowed with repositories and permissions", () => {
  it("reach only the repositories asked for (others 404) with only the permissions asked for", async () => {
    const app = tokenOctokit(em, await appJwt());
    const installation_id = em.installationId(FULL);
    const { data } = await app.rest.apps.createInstallationAccessToken({
      installation_id,
      repositories: [repo],
      permissions: { contents: "write", issues: "write" },
    });
    expect(data.permissions).toEqual({ contents: "write", issues: "write", metadata: "read" });
    expect(data.repository_selection).toBe("selected");
    expect(data.repositories?.map((r) => r.full_name)).toEqual([FULL]);

    const gh = tokenOctokit(em, data.token);
    expect((await gh.rest.repos.get({ owner, repo })).status).toBe(200);
    expect(await status(gh.rest.repos.get({ owner, repo: "other" }))).toBe(404);
    expect(await status(gh.rest.issues.listForRepo({ owner, repo: "other" }))).toBe(404);
    const { data: issue } = await gh.rest.issues.create({ owner, repo, title: "by the narrowed token" });
    expect(issue.user).toMatchObject({ login: em.botLogin, type: "Bot" });
    // pull_requests and actions were not asked for.
    const refused = await gh.rest.pulls.list({ owner, repo }).catch((e) => e);
    expect(refused.status).toBe(403);
    expect(refused.response.data.message).toBe("Resource not accessible by integration");
    expect(await status(gh.rest.actions.listWorkflowRunsForRepo({ owner, repo }))).toBe(403);
    // The installation's repositories, as this token sees them.
    const { data: listed } = await gh.rest.apps.listReposAccessibleToInstallation();
    expect(listed.repositories.map((r) => r.full_name)).toEqual([FULL]);
    // Git over HTTP: the other repository is not there for it.
    const clone = await gitAs(work, data.token, ["clone", "-q", otherHttpUrl, join(work, "other-clone")]);
    expect(clone.code).not.toBe(0);
    expect(clone.stderr).toMatch(/not found/i);

    // repository_ids work the same way; read-only contents cannot write.
    const { data: other } = await userOctokit(em, owner).rest.repos.get({ owner, repo: "other" });
    const { data: byId } = await app.rest.apps.createInstallationAccessToken({
      installation_id,
      repository_ids: [other.id],
      permissions: { contents: "read" },
    });
    expect(byId.repositories?.map((r) => r.full_name)).toEqual([`${owner}/other`]);
    expect(byId.permissions).toEqual({ contents: "read", metadata: "read" });
    const reader = tokenOctokit(em, byId.token);
    expect(await status(reader.rest.repos.get({ owner, repo }))).toBe(404);
    expect((await reader.rest.repos.getContent({ owner, repo: "other", path: "README.md" })).status).toBe(
      200,
    );
    expect(
      await status(
        reader.rest.repos.createOrUpdateFileContents({
          owner,
          repo: "other",
          path: "x.txt",
          message: "x",
          content: Buffer.from("x").toString("base64"),
        }),
      ),
    ).toBe(403);

    // Without them: every repository of the installation, all of the app's permissions.
    const { data: full } = await app.rest.apps.createInstallationAccessToken({ installation_id });
    expect(full.repositories?.map((r) => r.full_name).sort()).toEqual([FULL, `${owner}/other`]);
    expect(full.permissions).toMatchObject({ contents: "write", pull_requests: "write", actions: "write" });
    expect((await tokenOctokit(em, full.token).rest.pulls.list({ owner, repo })).status).toBe(200);
  });

  it("answers 422 for a permission the app lacks or a repository outside the installation", async () => {
    const app = tokenOctokit(em, await appJwt());
    const installation_id = em.installationId(FULL);
    const refused = async (body: Record<string, unknown>) => {
      const e = await app
        .request("POST /app/installations/{installation_id}/access_tokens", { installation_id, ...body })
        .catch((err) => err);
      return { status: e.status as number, message: e.response?.data?.message as string };
    };
    const noPermission = "The permissions requested are not granted to this installation.";
    expect(await refused({ permissions: { administration: "write" } })).toEqual({
      status: 422,
      message: noPermission,
    });
    expect(await refused({ permissions: { metadata: "write" } })).toEqual({
      status: 422,
      message: noPermission,
    });
    // The REST API spells it pull_requests; the workflow file's pull-requests is no app permission.
    expect(await refused({ permissions: { "pull-requests": "write" } })).toEqual({
      status: 422,
      message: noPermission,
    });
    const noRepo =
      "There is at least one repository that does not exist or is not accessible to the parent installation.";
    // Repository names, not full names; and not another installation's repository.
    expect(await refused({ repositories: [FULL] })).toEqual({ status: 422, message: noRepo });
    expect(await refused({ repositories: [repo, "z"] })).toEqual({ status: 422, message: noRepo });
    const { data: z } = await userOctokit(em, "zeta").rest.repos.get({ owner: "zeta", repo: "z" });
    expect(await refused({ repository_ids: [z.id] })).toEqual({ status: 422, message: noRepo });
  });

  it("push a change to a workflow file only with `workflows` (GitHub's refusal otherwise, as for a GITHUB_TOKEN)", async () => {
    // GitHub refuses, for the whole push, a commit new to the repository that adds or changes a file
    // under .github/workflows/ when an app's token lacks `workflows`: a token without it cannot make
    // the repository run code of its choosing with its secrets. The refusal, as git reports it:
    // https://github.com/peter-evans/create-pull-request/issues/1713 and
    // https://docs.github.com/en/rest/authentication/permissions-required-for-github-apps#repository-permissions-for-workflows
    const app = tokenOctokit(em, await appJwt());
    const installation_id = em.installationId(FULL);
    const mint = async (permissions?: Record<string, "read" | "write">) =>
      (
        await app.rest.apps.createInstallationAccessToken({
          installation_id,
          repositories: [repo],
          permissions,
        })
      ).data.token;
    const without = await mint({ contents: "write" });
    const withIt = await mint({ contents: "write", workflows: "write" });
    const dir = join(work, "workflows-clone");
    expect((await gitAs(work, without, ["clone", "-q", httpUrl, dir])).code).toBe(0);
    await gitAs(dir, undefined, ["checkout", "-q", "-b", "wf-change"]);
    // A branch whose commits are all in the repository already is fine, workflow files and all.
    expect((await gitAs(dir, without, ["push", "-q", "origin", "wf-change"])).code).toBe(0);
    await writeFile(join(dir, "notes.txt"), "a change\n");
    await gitAs(dir, undefined, ["add", "."]);
    await gitAs(dir, undefined, ["commit", "-q", "-m", "Notes"]);
    await writeFile(join(dir, ".github/workflows/ci.yml"), "name: CI\non: [push]\njobs: {}\n");
    await gitAs(dir, undefined, ["commit", "-q", "-am", "Change CI"]);
    await writeFile(join(dir, "more.txt"), "more\n");
    await gitAs(dir, undefined, ["add", "."]);
    await gitAs(dir, undefined, ["commit", "-q", "-m", "More"]);
    const head = (await gitAs(dir, undefined, ["rev-parse", "HEAD"])).stdout.trim();
    const remoteHead = async (branch: string) =>
      (await gitAs(dir, em.userToken(owner), ["ls-remote", "origin", `refs/heads/${branch}`])).stdout.split(
        "\t",
      )[0];

    const refused = await gitAs(dir, without, ["push", "origin", "wf-change"]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain(
      "refusing to allow a GitHub App to create or update workflow `.github/workflows/ci.yml` without `workflows` permission",
    );
    // Nothing of the push landed.
    expect(await remoteHead("wf-change")).not.toBe(head);
    // A new branch the same.
    expect((await gitAs(dir, without, ["push", "-q", "origin", "HEAD:refs/heads/wf-new"])).code).not.toBe(0);
    // A job's GITHUB_TOKEN never holds `workflows`.
    const run = await dispatch();
    const jobToken = em.jobEnvironment(FULL, run.id).GITHUB_TOKEN;
    const byJob = await gitAs(dir, jobToken, ["push", "origin", "wf-change"]);
    expect(byJob.code).not.toBe(0);
    expect(byJob.stderr).toContain("without `workflows` permission");
    // With `workflows`, and for a person, the same push goes through.
    expect((await gitAs(dir, withIt, ["push", "-q", "origin", "wf-change"])).code).toBe(0);
    expect(await remoteHead("wf-change")).toBe(head);
    const mona = em.userToken("mona");
    expect((await gitAs(dir, mona, ["push", "-q", "origin", "HEAD:refs/heads/wf-mona"])).code).toBe(0);
    // A branch deleted by the token without it: no workflow file is written.
    expect((await gitAs(dir, without, ["push", "-q", "origin", ":wf-mona"])).code).toBe(0);
  });

  it("act as the app's bot, and what they push or open starts workflow runs (unlike a GITHUB_TOKEN)", async () => {
    // What Fleet does on a runner: the job's OIDC token, checked against the JWKS, buys a token of
    // the app for the run's repository only.
    const run = await dispatch();
    const env = em.jobEnvironment(FULL, run.id);
    const { payload } = await jwtVerify(await idTokenAsAStep(env, "fleet"), jwks(), {
      issuer: em.oidcIssuer,
      audience: "fleet",
    });
    const [claimOwner, claimRepo] = String(payload.repository).split("/");
    const app = tokenOctokit(em, await appJwt());
    const { data } = await app.rest.apps.createInstallationAccessToken({
      installation_id: em.installationId(`${claimOwner}/${claimRepo}`),
      repositories: [claimRepo!],
      permissions: { contents: "write", issues: "write", pull_requests: "write", actions: "write" },
    });

    const dir = join(work, "clone");
    expect((await gitAs(work, data.token, ["clone", "-q", httpUrl, dir])).code).toBe(0);
    await gitAs(dir, undefined, ["checkout", "-q", "-b", "fleet/7-task"]);
    await writeFile(join(dir, "task.txt"), "done\n");
    await gitAs(dir, undefined, ["add", "."]);
    await gitAs(dir, undefined, ["commit", "-q", "-m", "Task work"]);
    expect((await gitAs(dir, data.token, ["push", "-q", "origin", "fleet/7-task"])).code).toBe(0);

    const pushRun = await eventually(
      () => em.workflowRuns(FULL).find((r) => r.event === "push" && r.headBranch === "fleet/7-task"),
      "the push's CI run",
    );
    expect(pushRun.actor.login).toBe(em.botLogin);
    const push = em
      .deliveries()
      .find((d) => d.event === "push" && (d.payload as { ref: string }).ref === "refs/heads/fleet/7-task")!;
    expect((push.payload as { sender: { login: string } }).sender.login).toBe(em.botLogin);

    const gh = tokenOctokit(em, data.token);
    const { data: pr } = await gh.rest.pulls.create({
      owner,
      repo,
      head: "fleet/7-task",
      base: "main",
      title: "Task",
    });
    expect(pr.user?.login).toBe(em.botLogin);
    const prRun = em
      .workflowRuns(FULL)
      .find((r) => r.event === "pull_request" && r.pullRequests?.includes(pr.number));
    expect(prRun?.actor.login).toBe(em.botLogin);

    // The same push with the job's GITHUB_TOKEN starts none.
    const before = em.workflowRuns(FULL).length;
    expect(
      (await gitAs(dir, env.GITHUB_TOKEN, ["push", "-q", "origin", "fleet/7-task:fleet/7-gh"])).code,
    ).toBe(0);
    expect(em.workflowRuns(FULL).length).toBe(before);
    expect(em.unimplemented()).toEqual([]);
  });
});
