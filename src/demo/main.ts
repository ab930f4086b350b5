import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { startGitHubEmulator, type WorkflowRun } from "@fleet/github-emulator";
import { actionMain, runActionJob, workflowActionStep } from "@fleet/github-emulator/runner";
import { createProbot, ProbotOctokit } from "probot";
import { getAdapter } from "../agents/index.ts";
import { startFleetServer } from "../app/server.ts";
import type { Task } from "../core/task.ts";
import { isFleetAction } from "../core/task-workflow.ts";
import { totalTokens } from "../core/usage.ts";
import { githubForToken, githubOverOctokit } from "../github/octokit-port.ts";
import type { GitHub } from "../github/port.ts";
import { createRepoStateStore } from "../state/repo-store.ts";
import { startLocalWorker } from "../worker/local-worker.ts";
import {
  DEMO_CODERS,
  type DemoCoder,
  type DemoCoderSetup,
  demoCoder,
  isDemoCoder,
  REVIEWED_AFTER,
  REVIEWED_BEFORE,
  REVIEWED_FILE,
} from "./coder-scripts.ts";

const HELP = `npm run demo [-- --json] [-- --keep] [-- --dispatch local|actions] [-- --coder ${DEMO_CODERS.join("|")}] [-- --review]

Runs Fleet's whole loop offline: an emulated GitHub, the real Fleet app, a worker, and a real agent
CLI (Claude Code by default) answering from a scripted model server on loopback. A maintainer labels an
issue fleet:<coder>; Fleet queues it, the worker runs the agent, and the demo ends with the pull
request, the issue's comments, the token totals and the repository's CI runs.

  --coder <name>        the agent: claude (default), codex, gemini or opencode; each talks to a scripted
                        server of its own model API (Anthropic Messages, OpenAI Responses, Gemini)
  --review              instead of a task, an agent review of a person's pull request: @mona opens one
                        and comments \`/fleet review\`; the read-only agent posts one GitHub review with
                        inline comments on the changed lines
  --json                print one JSON object instead of the narrated run
  --keep                keep the work directory (worktrees, agent logs) and print where it is
  --dispatch actions    run the task through Fleet's workflow and the real action bundle (dist/) on an
                        emulated self-hosted runner, with the emulator's default repository settings:
                        the job exchanges its OIDC token for the app's token (default: local, a
                        \`fleet run\` worker)
`;

export interface DemoResult {
  pr: { number: number; url: string; head: string };
  /** `--review`: the review the agent posted on the person's pull request. */
  review?: { body: string; comments: Array<{ path: string; line: number | null; body: string }> };
  issue: { number: number; comments: number };
  tokens: { input: number; output: number; cacheRead: number; cacheWrite: number; costUsd: number | null };
  api: { total: number; contentCreating: number };
  /** The runs of the demo repository's own CI workflow that the emulator started, oldest first. */
  ci: { runs: Array<{ event: string; branch: string; actor: string }> };
}

/** The demo repository's CI workflow (`on: [push, pull_request]`). */
const CI_WORKFLOW = ".github/workflows/ci.yml";
/** Fleet's task workflow, dispatched once per task with `dispatch: actions`. */
const TASK_WORKFLOW = ".github/workflows/fleet-task.yml";

type Emulator = Awaited<ReturnType<typeof startGitHubEmulator>>;
const OWNER = "octo-org";
const NAME = "widgets";
const FULL = `${OWNER}/${NAME}`;

export async function runDemo(opts: {
  json: boolean;
  keep: boolean;
  dispatch?: "local" | "actions";
  coder?: DemoCoder;
  /** An agent review of a person's pull request instead of a task (`--review`). */
  review?: boolean;
}): Promise<DemoResult> {
  const dispatch = opts.dispatch ?? "local";
  const coder = demoCoder(opts.coder ?? "claude");
  const started = Date.now();
  const say = (line: string) => {
    if (!opts.json)
      process.stdout.write(`[${((Date.now() - started) / 1000).toFixed(1).padStart(5)}s] ${line}\n`);
  };
  // The real agent CLIs installed with the project's devDependencies.
  process.env.PATH = `${resolve("node_modules/.bin")}${delimiter}${process.env.PATH ?? ""}`;

  say("starting the offline GitHub (emulator on loopback, real bare git repositories)");
  const gh = await startGitHubEmulator({ appSlug: "fleet", appName: "Fleet" });
  const workDir = await mkdtemp(join(tmpdir(), "fleet-demo-"));
  const stops: Array<() => Promise<unknown>> = [() => gh.stop()];
  try {
    const repo = await createDemoRepo(gh, dispatch, coder, opts.review === true);
    say("starting the Fleet app (Probot) and pointing the emulator's webhooks at it");
    const app = await startFleetServer({
      appId: gh.appId,
      privateKey: gh.privateKey,
      webhookSecret: gh.webhookSecret,
      baseUrl: gh.url,
      logLevel: "fatal",
      trackerIntervalMs: 2_000,
      // Runners show the emulator's OIDC tokens (GitHub's own issuer when online).
      actionsTokens: { issuer: gh.oidcIssuer },
    });
    stops.unshift(() => app.stop());
    gh.setWebhookUrl(app.webhookUrl);

    say(`starting the scripted model server the real ${coder.displayName} CLI will talk to`);
    const model = await (opts.review ? coder.startReviewModel() : coder.startModel());
    stops.unshift(() => model.stop());

    let finished: ((t: string) => void) | undefined;
    const done = new Promise<string>((r) => {
      finished = r;
    });
    const worker = { gh, workDir, coder, modelUrl: model.url, say, finished: (o: string) => finished?.(o) };
    const stopWorker =
      dispatch === "local" ? await startDemoWorker({ ...worker, repo }) : startDemoRunner(worker);
    stops.unshift(stopWorker);

    const mona = await githubForToken({ token: gh.userToken("mona"), baseUrl: gh.url });
    // A pull request is an issue too: the review's task is on the PR's number.
    const issue = opts.review
      ? await openAndAskReview(mona, say)
      : await openAndLabel(mona, coder.coder, say);
    const outcome = await Promise.race([
      done,
      new Promise<string>((_, reject) =>
        setTimeout(
          () => reject(new Error("the demo's task did not finish within 5 minutes")),
          300_000,
        ).unref(),
      ),
    ]);
    // A review changes nothing: its run ends without changes, with the review posted.
    const expected = opts.review ? "no-changes" : "pr-opened";
    if (outcome !== expected)
      throw new Error(
        `the task ended with "${outcome}" instead of ${opts.review ? "a posted review" : "a pull request"}`,
      );

    // Stopping the worker writes its last tracking-comment edit (throttled to one per 15 s otherwise).
    await stopWorker();
    // Deliveries answered, then handled (the app answers each on receipt), then the comment edits
    // still waiting for their throttle window written.
    await gh.waitForDeliveries();
    await app.idle();
    await app.flush();
    const result = await demoResult(gh, mona, issue);
    if (!opts.json) narrate(gh, result, say);
    if (!opts.json && opts.keep) process.stdout.write(`work directory kept: ${workDir}\n`);
    return result;
  } finally {
    for (const stop of stops) await stop().catch(() => {});
    if (!opts.keep) await rm(workDir, { recursive: true, force: true });
  }
}

/** The demo repository: a README, its Fleet config, its own CI workflow (and Fleet's workflow for actions). */
async function createDemoRepo(
  gh: Emulator,
  dispatch: "local" | "actions",
  coder: DemoCoderSetup,
  review: boolean,
) {
  const repo = await gh.createRepo({
    owner: OWNER,
    name: NAME,
    files: {
      "README.md": "# widgets\n\nA small library.\n",
      ...(review ? { [REVIEWED_FILE]: REVIEWED_BEFORE } : {}),
      ".github/fleet.yml": `dispatch: ${dispatch}\nmax_concurrent: 2\nplan_phase: true\ncoders:\n  ${coder.coder}: { model: ${coder.model} }\n`,
      // Fleet's task workflow, as a repository using dispatch: actions has it.
      ...(dispatch === "actions" ? { [TASK_WORKFLOW]: await readFile(resolve(TASK_WORKFLOW), "utf8") } : {}),
      // The repository's own CI: it runs for pushes and PRs, never for Fleet's state commits.
      [CI_WORKFLOW]:
        "name: CI\non: [push, pull_request]\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo test\n",
    },
  });
  gh.addCollaborator(FULL, "mona", "write");
  return repo;
}

/** A maintainer opens the issue and labels it `fleet:<coder>`. */
async function openAndLabel(mona: GitHub, coder: DemoCoder, say: (line: string) => void): Promise<number> {
  const repo = { owner: OWNER, repo: NAME };
  const issue = await mona.issues.create(repo, {
    title: "Add a changelog",
    body: "We need a CHANGELOG.md with an Unreleased section.",
  });
  say(`@mona opened issue #${issue.number} and labels it fleet:${coder}`);
  await mona.issues.addLabels(repo, issue.number, [`fleet:${coder}`]);
  return issue.number;
}

/** `--review`: a maintainer pushes a change on a branch, opens its pull request and asks for a review. */
async function openAndAskReview(mona: GitHub, say: (line: string) => void): Promise<number> {
  const repo = { owner: OWNER, repo: NAME };
  const main = (await mona.git.getRef(repo, "heads/main")).data.sha;
  const tree = await mona.git.createTree(repo, {
    baseTree: await mona.git.getCommitTree(repo, main),
    files: [{ path: REVIEWED_FILE, content: REVIEWED_AFTER }],
  });
  const commit = await mona.git.createCommit(repo, {
    message: "sum: index loop",
    tree,
    parents: [main],
  });
  await mona.git.createRef(repo, "refs/heads/mona/sum-loop", commit);
  const pr = await mona.pulls.create(repo, {
    title: "sum: an index loop",
    head: "mona/sum-loop",
    base: "main",
    body: "Rewrites sum() with an index loop.",
  });
  say(`@mona opened pull request #${pr.number} (a change to ${REVIEWED_FILE}) and comments /fleet review`);
  await mona.issues.createComment(repo, pr.number, "/fleet review");
  return pr.number;
}

/** What the demo ended with: the PR, the issue's comments, the tokens, the API requests, the CI runs. */
async function demoResult(gh: Emulator, mona: GitHub, issue: number): Promise<DemoResult> {
  const state = await createRepoStateStore({ github: mona, owner: OWNER, repo: NAME }).read();
  const task = Object.values(state.doc.tasks).find((t: Task) => t.issue === issue)!;
  // A review's task is on the person's pull request; a task's, on the PR it opened.
  const prNumber = task.review?.pr ?? task.pr;
  const pr = gh.pulls(FULL).find((p) => p.number === prNumber)!;
  const review = task.review ? await postedReview(gh, mona, pr.number) : undefined;
  const totals = task.totals;
  const counts = gh.counts();
  return {
    pr: { number: pr.number, url: `${gh.url.replace(/\/$/, "")}/${FULL}/pull/${pr.number}`, head: pr.head },
    ...(review ? { review } : {}),
    issue: { number: issue, comments: gh.comments(FULL, issue).length },
    tokens: {
      input: totals?.usage.input ?? 0,
      output: totals?.usage.output ?? 0,
      cacheRead: totals?.usage.cacheRead ?? 0,
      cacheWrite: totals?.usage.cacheWrite ?? 0,
      costUsd: totals?.costUsd ?? null,
    },
    api: { total: counts.total, contentCreating: counts.contentCreating },
    ci: {
      runs: gh
        .workflowRuns(FULL)
        .filter((r) => r.workflowPath === CI_WORKFLOW)
        .map((r) => ({ event: r.event, branch: r.headBranch, actor: r.actor.login })),
    },
  };
}

/** The review on `pull` (GET .../pulls/{n}/reviews, read as the maintainer) and its inline comments. */
async function postedReview(
  gh: Emulator,
  mona: GitHub,
  pull: number,
): Promise<NonNullable<DemoResult["review"]>> {
  const res = await fetch(`${gh.url.replace(/\/$/, "")}/repos/${FULL}/pulls/${pull}/reviews`, {
    headers: { authorization: `token ${gh.userToken("mona")}`, accept: "application/vnd.github+json" },
  });
  const reviews = (await res.json()) as Array<{ body: string }>;
  const inline = await mona.pulls.listReviewComments({ owner: OWNER, repo: NAME }, pull);
  return {
    body: reviews.at(-1)?.body ?? "",
    comments: inline.map((c) => ({ path: c.path ?? "", line: c.line ?? null, body: c.body ?? "" })),
  };
}

/** The narrated ending: the PR, the tracking comment and the first line of every other comment, the tokens, requests and CI runs. */
function narrate(gh: Emulator, result: DemoResult, say: (line: string) => void): void {
  const pr = gh.pulls(FULL).find((p) => p.number === result.pr.number)!;
  const comments = gh.comments(FULL, result.issue.number);
  say(`pull request #${pr.number} "${pr.title}" from ${pr.head}`);
  process.stdout.write(`\n--- pull request #${pr.number} ---\n${pr.body}\n`);
  if (result.review) {
    process.stdout.write(`\n--- the agent's review of #${pr.number} ---\n${result.review.body}\n`);
    for (const c of result.review.comments)
      process.stdout.write(`\n  ${c.path}:${c.line ?? "?"}  ${c.body}\n`);
  }
  process.stdout.write(
    `\n--- issue #${result.issue.number}: ${comments.length} comment${comments.length === 1 ? "" : "s"} ---\n`,
  );
  for (const c of comments) {
    // The tracking comment whole (state, plan, checklist, token report, run report); others by their first line.
    const shown = c.body.split("\n").filter((l) => !/^\s*<!--.*-->\s*$/.test(l));
    if (c.body.includes("fleet:tracking")) process.stdout.write(`@${c.user.login}:\n${shown.join("\n")}\n\n`);
    else process.stdout.write(`@${c.user.login}: ${(shown.find((l) => l.trim()) ?? "").slice(0, 110)}\n`);
  }
  const t = result.tokens;
  process.stdout.write(
    `\ntokens: ${t.input} input, ${t.output} output, ${t.cacheRead} cache read, ${t.cacheWrite} cache write` +
      ` (${totalTokens({ ...t, reasoning: 0 })} in all)${t.costUsd == null ? "" : `, $${t.costUsd.toFixed(4)}`}\n`,
  );
  process.stdout.write(
    `GitHub API: ${result.api.total} requests, ${result.api.contentCreating} content-creating\n`,
  );
  const runs = result.ci.runs.map((r) => `${r.event} on ${r.branch} by ${r.actor}`);
  process.stdout.write(
    `CI runs: ${runs.length ? runs.join("; ") : "none"} (state commits on fleet/state start none)\n`,
  );
}

/** `dispatch: local`: a `fleet run` worker with the app's installation token. */
async function startDemoWorker(o: {
  gh: Emulator;
  repo: { cloneUrl: string; installationId: number };
  workDir: string;
  coder: DemoCoderSetup;
  modelUrl: string;
  say: (line: string) => void;
  finished: (outcome: string) => void;
}): Promise<() => Promise<void>> {
  o.say("starting a local worker (dispatch: local) with its own installation token");
  const probot = createProbot({
    overrides: {
      appId: o.gh.appId,
      privateKey: o.gh.privateKey,
      baseUrl: o.gh.url,
      logLevel: "fatal",
      // A function: Probot shallow-merges its own throttle options over an object.
      Octokit: ProbotOctokit.defaults((x: Record<string, unknown>) => ({
        ...x,
        throttle: { ...(x.throttle as object), enabled: false },
      })),
    },
  });
  const github = githubOverOctokit(await probot.auth(o.repo.installationId));
  // The worker pushes with the app's token on GitHub: the emulator names the pusher of a file://
  // push from this variable, so the CI runs its pushes start are the app's (fleet[bot]) too.
  process.env.FLEET_EMULATOR_LOGIN = o.gh.botLogin;
  const worker = startLocalWorker({
    repo: { owner: OWNER, repo: NAME },
    github,
    store: createRepoStateStore({ github, owner: OWNER, repo: NAME, pacing: 0 }),
    cloneUrl: o.repo.cloneUrl,
    workDir: o.workDir,
    adapterFor: getAdapter,
    credentialFor: () => ({ name: o.coder.credential, value: DEMO_KEY }),
    modelBaseUrl: o.modelUrl,
    agentEnv: { CLAUDE_CODE_MAX_RETRIES: "0" },
    pollMs: 500,
    trackerIntervalMs: 2_000,
    onOutcome: (id, outcome) => {
      o.say(`worker: task ${id} ended: ${outcome.outcome}${outcome.reason ? ` (${outcome.reason})` : ""}`);
      o.finished(outcome.outcome);
    },
  });
  return () => worker.stop();
}

/**
 * `dispatch: actions`: each dispatched run of Fleet's workflow is picked up by an emulated self-hosted
 * runner that runs the real action bundle (dist/index.js) as the workflow's step, with the job's own
 * token and OIDC variables; the action exchanges the OIDC token for the app's token.
 */
function startDemoRunner(o: {
  gh: Emulator;
  workDir: string;
  coder: DemoCoderSetup;
  modelUrl: string;
  say: (line: string) => void;
  finished: (outcome: string) => void;
}): () => Promise<void> {
  o.say("starting an emulated self-hosted runner for Fleet's workflow (dispatch: actions)");
  const jobs: Promise<void>[] = [];
  o.gh.onWorkflowDispatch((run) => {
    const job = (async () => {
      o.say(`runner: picked up run ${run.id} of ${run.workflowPath} for task ${run.inputs.task_id}`);
      await o.gh.setWorkflowRunStatus(FULL, run.id, "in_progress");
      const result = await runWorkflowStep(o, run);
      await o.gh.setWorkflowRunStatus(FULL, run.id, "completed", result.code === 0 ? "success" : "failure");
      const conclusion = result.outputs.conclusion ?? "error";
      // What the action said when it failed (core.setFailed prints an ::error:: line).
      const said = `${result.stdout}\n${result.stderr}`.match(/^::error::(.*)$/m)?.[1];
      o.say(`runner: run ${run.id} ended: ${conclusion}${said ? ` (${said})` : ""}`);
      o.finished(conclusion);
    })().catch((error) => {
      o.say(`runner: run ${run.id} failed: ${(error as Error).message}`);
      o.finished("error");
    });
    jobs.push(job);
  });
  return async () => {
    await Promise.allSettled(jobs);
  };
}

const DEMO_KEY = "demo-not-a-real-key-0000";

/**
 * The runner's job: the workflow's step that uses `<owner>/fleet@v1` runs this checkout's action
 * (action.yml's `runs.main`), with the inputs the workflow gives it (the demo's key as the coder's
 * Actions secret) and the job token its `permissions:` grant; then the runner's own settings.
 */
async function runWorkflowStep(
  o: { gh: Emulator; workDir: string; coder: DemoCoderSetup; modelUrl: string },
  run: WorkflowRun,
) {
  const actionYml = await readFile(resolve("action.yml"), "utf8");
  const step = workflowActionStep({
    workflow: await readFile(resolve(TASK_WORKFLOW), "utf8"),
    match: isFleetAction,
    runInputs: run.inputs,
    secrets: { [o.coder.credential]: DEMO_KEY },
    github: { api_url: o.gh.url, server_url: o.gh.url, repository: FULL, run_id: String(run.id) },
    actionYml,
  });
  return runActionJob({
    gh: o.gh,
    fullName: FULL,
    run,
    scratch: o.workDir,
    main: resolve(actionMain(actionYml)),
    inputs: {
      ...step.inputs,
      "model-base-url": o.modelUrl,
      "agent-env": "CLAUDE_CODE_MAX_RETRIES=0",
      "work-dir": join(o.workDir, `run-${run.id}`),
    },
    ...(step.permissions ? { permissions: step.permissions } : {}),
    idToken: step.idToken,
  });
}

const isMain = process.argv[1] && resolve(process.argv[1]) === resolve(new URL(import.meta.url).pathname);
if (isMain) {
  const { values } = parseArgs({
    options: {
      json: { type: "boolean", default: false },
      keep: { type: "boolean", default: false },
      dispatch: { type: "string", default: "local" },
      coder: { type: "string", default: "claude" },
      review: { type: "boolean", default: false },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.dispatch !== "local" && values.dispatch !== "actions") {
    process.stderr.write(`--dispatch takes local or actions; got "${values.dispatch}".\n${HELP}`);
    process.exit(2);
  }
  if (!isDemoCoder(values.coder ?? "")) {
    process.stderr.write(`--coder takes ${DEMO_CODERS.join(", ")}; got "${values.coder}".\n${HELP}`);
    process.exit(2);
  }
  if (values.help) {
    process.stdout.write(HELP);
  } else {
    try {
      const result = await runDemo({
        json: values.json ?? false,
        keep: values.keep ?? false,
        dispatch: values.dispatch as "local" | "actions",
        coder: values.coder as DemoCoder,
        review: values.review ?? false,
      });
      if (values.json) process.stdout.write(`${JSON.stringify(result)}\n`);
      process.exit(0);
    } catch (error) {
      process.stderr.write(`demo failed: ${(error as Error).message}\n`);
      process.exit(1);
    }
  }
}
