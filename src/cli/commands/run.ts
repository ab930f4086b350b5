import { adapters, getAdapter } from "../../agents/index.ts";
import type { FleetConfig } from "../../core/config.ts";
import { checkCredentialName } from "../../core/credential-names.ts";
import { isActive } from "../../core/lifecycle.ts";
import type { FleetStateDoc } from "../../core/state-doc.ts";
import type { Task } from "../../core/task.ts";
import { totalTokens } from "../../core/usage.ts";
import { useCommandHelper } from "../../process/command-runner.ts";
import { type LocalWorkerOptions, startLocalWorker } from "../../worker/local-worker.ts";
import { assertSandboxAvailable, SandboxUnavailableError } from "../../worker/sandbox/bubblewrap.ts";
import { parseEgressHosts } from "../../worker/sandbox/egress-proxy.ts";
import { git } from "../../worker/workspace/git.ts";
import { parse, TARGET_HELP, TARGET_OPTIONS } from "../args.ts";
import { workerPreflight } from "../doctor/preflight.ts";
import { CliError, UsageError } from "../errors.ts";
import { formatTokens, liveUsage } from "../format.ts";
import { err, sleep, untilSignal } from "../io.ts";
import { singleWorkerPool, startLocalPool, type WorkerPool } from "../local-pool.ts";
import { describeTarget, resolveTarget, type Target } from "../target.ts";

export const RUN_USAGE = `Usage: fleet run [--concurrency N] [--until-idle] [--poll MS]
                 [--model-base-url URL] [--agent-env KEY=VALUE ...] [--credential-env NAME ...]

A worker in the foreground: claims dispatched tasks and runs their agents in git worktrees under
--work-dir, up to --concurrency at once. Against GitHub it opens the pull requests. In local mode it
serves every repository in the queue ($FLEET_HOME): each task runs in the git repository it was
created in (\`fleet bd create\` records it), from a clone of it, and its fleet/* branch is pushed
there. With --repo-path it serves that repository only. Tasks queued before Fleet recorded
repositories run in the repository whose name they carry (local/<folder name>).
Ctrl-C or SIGTERM stops it cleanly: agents are stopped and their tasks go back to the queue.

  --concurrency N        tasks a worker runs at once, per repository in local mode (default: the
                         repository's max_concurrent, which also caps all repositories together)
  --until-idle           exit once no task is queued or running (scripts, CI)
  --poll MS              how often the state is read (default 1000 local, 5000 GitHub)
  --model-base-url URL   model API base URL for the agents (or FLEET_MODEL_BASE_URL)
  --agent-env KEY=VALUE  extra environment for the agents (repeatable), e.g. CLAUDE_CODE_MAX_RETRIES=0
  --credential-env NAME  also allow NAME as a coder credential (repeatable; the coders' own variables,
                         such as ANTHROPIC_API_KEY or OPENAI_API_KEY, are allowed already)
Each agent runs in a bubblewrap sandbox (unless .github/fleet.yml says \`sandbox: none\`) and never
holds a credential: its requests go through a model gateway in this worker, which adds the credential
named in coders.<coder>.credentials and found in this environment. Fleet's own variables
(GITHUB_TOKEN, GH_TOKEN, FLEET_*, the app's key) are never handed on. An agent's network is its
own (only loopback): other hosts only through Fleet's egress proxy and the repository's
\`network\` allowlist. FLEET_EGRESS_HOSTS=name=address,... maps names for that proxy (a registry
mirror on a private or loopback address).

${TARGET_HELP}`;

const OPTIONS = {
  ...TARGET_OPTIONS,
  concurrency: { type: "string" },
  "until-idle": { type: "boolean" },
  poll: { type: "string" },
  "model-base-url": { type: "string" },
  "agent-env": { type: "string", multiple: true },
  "credential-env": { type: "string", multiple: true },
} as const;

const SPINNER = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

function positiveInt(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1)
    throw new UsageError(`${name} must be a whole number above 0; got "${text}".`);
  return n;
}

/** The variables this worker may hand to a model provider: the coders' own, plus --credential-env. */
function allowedCredentials(extra: readonly string[]): Set<string> {
  const own = Object.values(adapters).flatMap((a) => [a.credentialEnv, ...(a.credentialAliases ?? [])]);
  return new Set([...own, ...extra]);
}

/** A credential's value by name, for names the worker allows; a refused name is said once. */
function credentialValue(env: NodeJS.ProcessEnv, allowed: ReadonlySet<string>, warn: (m: string) => void) {
  const said = new Set<string>();
  return (name: string): string | undefined => {
    const check = checkCredentialName(name, allowed);
    if (!check.ok) {
      if (!said.has(name)) warn(`credential ${check.why}.`);
      said.add(name);
      return undefined;
    }
    return env[name] || undefined;
  };
}

function credentialFor(config: FleetConfig, credentialOf: (name: string) => string | undefined) {
  return (coder: string) => {
    const names = [...(config.coders[coder]?.credentials ?? [])];
    const fallback = getAdapter(coder)?.credentialEnv;
    if (fallback && !names.includes(fallback)) names.push(fallback);
    const name = names.find((n) => credentialOf(n));
    return name ? { name, value: credentialOf(name)! } : undefined;
  };
}

async function cloneSource(
  target: Target,
): Promise<{ cloneUrl: string; gitAuth?: { username: string; token: string } }> {
  if (target.kind === "local") {
    const r = await git(["rev-parse", "--verify", "-q", "HEAD"], { cwd: target.repoPath, okCodes: [1, 128] });
    if (r.exitCode !== 0)
      throw new CliError(
        `${target.repoPath} is not a git repository with a commit; pass --repo-path to one (tasks branch off its HEAD branch).`,
      );
    return { cloneUrl: target.repoPath };
  }
  const data = await target.github.repos.get(target.repo);
  return { cloneUrl: data.clone_url, gitAuth: { username: "x-access-token", token: target.token } };
}

/** `FLEET_EGRESS_HOSTS`, the operator's name=address map for the egress proxy, or a usage error. */
function egressHostsOrError(text: string | undefined): { egressHosts?: Record<string, string> } {
  try {
    const hosts = parseEgressHosts(text);
    return Object.keys(hosts).length ? { egressHosts: hosts } : {};
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

async function sandboxOrError(config: FleetConfig): Promise<void> {
  try {
    await assertSandboxAvailable(config.sandbox);
  } catch (error) {
    if (error instanceof SandboxUnavailableError) throw new CliError(error.message);
    throw error;
  }
}

/** `--agent-env KEY=VALUE` pairs as an environment. */
function agentEnvOf(pairs: readonly string[]): Record<string, string> {
  const agentEnv: Record<string, string> = {};
  for (const kv of pairs) {
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s.exec(kv);
    if (!m) throw new UsageError(`--agent-env takes KEY=VALUE; got "${kv}".`);
    agentEnv[m[1]!] = m[2]!;
  }
  return agentEnv;
}

/** A line on stderr, stamped, around the live status line of a terminal. */
function createPrinter() {
  const tty = Boolean(process.stderr.isTTY);
  let statusLine = "";
  return {
    tty,
    print(line: string) {
      const stamp = new Date().toISOString().slice(11, 19);
      if (tty && statusLine) process.stderr.write("\r\x1b[K");
      err(`[${stamp}] ${line}`);
      if (tty && statusLine) process.stderr.write(statusLine);
    },
    status(line: string) {
      statusLine = line;
      if (tty) process.stderr.write(line ? `\r\x1b[K${line}` : "\r\x1b[K");
    },
  };
}

export async function runCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, OPTIONS, RUN_USAGE);
  if (positionals.length)
    throw new UsageError(`fleet run takes no arguments (got "${positionals[0]}").`, RUN_USAGE);
  const agentEnv = agentEnvOf(values["agent-env"] ?? []);
  // A worker runs for days and starts git for every task: from a small helper, not from itself.
  useCommandHelper();
  // Signals are ours from here on: one arriving while the worker starts still stops it cleanly.
  const signal = untilSignal();
  let stopping: NodeJS.Signals | undefined;
  void signal.promise.then((s) => {
    stopping = s;
  });
  const target = await resolveTarget(values);
  const pollMs = positiveInt("--poll", values.poll, target.kind === "local" ? 1000 : 5000);
  const { doc } = await target.store.read();
  const file = await target.fileConfig();
  if (file.problems.length)
    throw new CliError(
      `.github/fleet.yml is invalid:\n${file.problems.map((p) => `  ${p}`).join("\n")}\nFix it, then run again.`,
    );
  const config = await target.config(doc);
  // A worker that cannot contain its agents (or has no git) says so now, not at its first task.
  await workerPreflight(config, process.env, (line) => err(`fleet run: ${line}`));
  const allowed = allowedCredentials(values["credential-env"] ?? []);
  for (const name of values["credential-env"] ?? []) {
    const check = checkCredentialName(name, allowed);
    if (!check.ok) throw new UsageError(`--credential-env ${name}: ${check.why}.`);
  }
  const concurrency = positiveInt("--concurrency", values.concurrency, config.max_concurrent);
  const out = createPrinter();
  out.print(
    target.kind === "github"
      ? `fleet run: worker for ${describeTarget(target)}, up to ${concurrency} at once, work dir ${target.workDir}`
      : `fleet run: worker for the local queue in ${target.home}, ${values["repo-path"] ? `repository ${target.repoPath} only` : "every repository in it"}, up to ${concurrency} at once per repository, work dir ${target.workDir}`,
  );
  const pace = {
    agentEnv,
    modelBaseUrl: values["model-base-url"] ?? process.env.FLEET_MODEL_BASE_URL,
    concurrency,
    pollMs,
    heartbeatMs: Math.min(30_000, Math.max(1_000, pollMs * 5)),
  };
  const worker = await startWorkers(target, values, { config, allowed, pace, print: out.print });
  // In local mode (or with dispatch: local) no app schedules: this worker does.
  const schedules = target.kind === "local" || config.dispatch === "local";
  const queue = target.queue(file.config);
  try {
    await watch({
      target,
      worker,
      out,
      pollMs,
      untilIdle: values["until-idle"] === true,
      signal,
      stopped: () => stopping,
      // The loop has just looked at a state at most an interval old: a pass that finds nothing on it
      // needs no second read (the next round passes again).
      schedule: schedules ? () => queue.schedule({ trustCacheMs: 2 * pollMs }) : undefined,
    });
  } finally {
    out.status("");
    // A run that already ended waits for its end to be recorded (within its lease): a second signal skips that.
    if (stopping)
      out.print(
        `${stopping}: stopping agents; their tasks go back to the queue (${stopping} again to quit now)`,
      );
    // A second signal while stopping means "now".
    const force = () => process.exit(130);
    process.once("SIGINT", force);
    process.once("SIGTERM", force);
    await worker.stop();
    signal.dispose();
    process.off("SIGINT", force);
    process.off("SIGTERM", force);
    out.print("worker stopped");
  }
  return 0;
}

/**
 * The workers of this run: one for a GitHub repository; in local mode one per repository in the queue
 * (or --repo-path's only), each under its own repository's .github/fleet.yml (sandbox, plan phase,
 * timeouts, coders).
 */
async function startWorkers(
  target: Target,
  values: { "repo-path"?: string } & Parameters<typeof resolveTarget>[0],
  o: {
    config: FleetConfig;
    allowed: ReadonlySet<string>;
    pace: Partial<LocalWorkerOptions>;
    print: (line: string) => void;
  },
): Promise<WorkerPool> {
  if (target.kind === "github") {
    const opts = await workerOptions(target, o.config, o.allowed, o.print);
    return singleWorkerPool(startLocalWorker({ ...opts, ...o.pace }), target.full);
  }
  return startLocalPool({
    flags: values,
    only: values["repo-path"],
    cwd: process.cwd(),
    print: o.print,
    start: async (repoTarget, accepts) => {
      const own = await repoTarget.fileConfig();
      if (own.problems.length)
        throw new CliError(`its .github/fleet.yml is invalid: ${own.problems.join("; ")}.`);
      const ownConfig = await repoTarget.config((await repoTarget.store.read()).doc);
      await sandboxOrError(ownConfig);
      const opts = await workerOptions(repoTarget, ownConfig, o.allowed, o.print);
      return startLocalWorker({ ...opts, ...o.pace, accepts });
    },
  });
}

/** The worker's side of the target: its repository and clone, the credentials it may hand on, what it logs. */
async function workerOptions(
  target: Target,
  config: FleetConfig,
  allowed: ReadonlySet<string>,
  print: (line: string) => void,
): Promise<LocalWorkerOptions> {
  const { cloneUrl, gitAuth } = await cloneSource(target);
  const credentialOf = credentialValue(process.env, allowed, print);
  // Whatever this worker holds is looked for in everything its agents leave, in any encoding.
  const secrets = [
    ...(target.kind === "github" ? [target.token] : []),
    ...[...allowed].map((name) => process.env[name] ?? "").filter(Boolean),
  ];
  return {
    repo: target.repo,
    github: target.github,
    store: target.store,
    cloneUrl,
    gitAuth,
    workDir: target.workDir,
    adapterFor: getAdapter,
    credentialFor: credentialFor(config, credentialOf),
    credentialValue: credentialOf,
    secrets,
    ...(target.loadConfig ? { loadConfig: target.loadConfig } : {}),
    sandbox: config.sandbox,
    ...egressHostsOrError(process.env.FLEET_EGRESS_HOSTS),
    trackerIntervalMs: target.kind === "local" ? 0 : undefined,
    local: target.kind === "local",
    log: print,
    onOutcome: (id, o) =>
      print(
        `${id}: ${o.outcome}${o.pr ? ` (PR #${o.pr.number} ${o.pr.url})` : ""}${o.reason ? `: ${o.reason}` : ""}${
          o.totals ? ` [${formatTokens(totalTokens(o.totals.usage))} tokens]` : ""
        }`,
      ),
  };
}

/**
 * Until a signal (or, with --until-idle, until nothing is queued or running): every task's state
 * change printed, a live status line on a terminal, and a scheduling pass per poll when this worker
 * is the one that schedules.
 */
async function watch(o: {
  target: Target;
  worker: WorkerPool;
  out: ReturnType<typeof createPrinter>;
  pollMs: number;
  untilIdle: boolean;
  signal: { promise: Promise<unknown> };
  stopped: () => NodeJS.Signals | undefined;
  schedule?: () => Promise<unknown>;
}): Promise<void> {
  const { target, out } = o;
  const seen = new Map<string, string>();
  let frame = 0;
  let sawWork = false;
  // Tasks of repositories this run does not serve are someone else's: they do not keep it busy.
  const work = (doc: FleetStateDoc) => {
    const mine = Object.values(doc.tasks).filter((t) => o.worker.serves(t, doc));
    return {
      running: mine.filter((t) => isActive(t.state)),
      queued: mine.filter((t) => t.state === "queued"),
    };
  };
  await o.schedule?.();
  while (!o.stopped()) {
    // The worker's polls read the state as often: a read of theirs within the interval does (on a
    // terminal the line is redrawn four times a second, from the same state).
    const { doc } = await target.store.read({ maxAgeMs: o.pollMs });
    await o.worker.refresh(doc);
    const tasks = Object.values(doc.tasks);
    for (const t of tasks) {
      const before = seen.get(t.id);
      if (before !== undefined && before !== t.state)
        out.print(
          `${t.id} #${t.issue} ${t.coder}:${t.model}: ${before} -> ${t.state}${t.reason ? ` (${t.reason})` : ""}`,
        );
      seen.set(t.id, t.state);
    }
    const { running, queued } = work(doc);
    if (running.length || queued.length) sawWork = true;
    if (out.tty) {
      const mine = await Promise.all(
        running.slice(0, 3).map(async (t: Task) => {
          const u = await liveUsage(target.workDir, t);
          return `${t.id} ${t.state}${u ? ` ${formatTokens(totalTokens(u))} tok` : ""}`;
        }),
      );
      out.status(
        `${SPINNER[frame++ % SPINNER.length]} ${running.length} running, ${queued.length} queued${mine.length ? ` | ${mine.join(", ")}` : ""}`,
      );
    }
    // Idle is said on a fresh read only: the loop's may be an interval old.
    if (o.untilIdle && running.length === 0 && queued.length === 0 && o.worker.running === 0) {
      const left = work((await target.store.read()).doc);
      if (left.running.length === 0 && left.queued.length === 0 && o.worker.running === 0) {
        out.print(
          sawWork ? "idle: nothing queued or running" : "nothing to do: no task is queued or running",
        );
        return;
      }
    }
    await o.schedule?.();
    await Promise.race([sleep(out.tty ? Math.min(o.pollMs, 250) : o.pollMs), o.signal.promise]);
  }
}
