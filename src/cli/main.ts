import { pathToFileURL } from "node:url";
import { StateCorruptError } from "../core/state-doc.ts";
import { EXIT, exitCodeOf, HelpRequested, UsageError } from "./errors.ts";
import { err, out } from "./io.ts";

const USAGE = `Usage: fleet <command> [options]

Commands:
  tasks                     running and queued tasks (--all, --watch, --json)
  task <id> log|plan|knowledge|result|compare
                            what a task's agent left: its log (-f follows), plan, context, verdict;
                            compare: the sides of its A/B run side by side
  config show|set k=v ...   the effective config; validated overrides
  bd create|list|ready|show|update|close
                            the task list (beads): create a task (or an A/B run), see what is ready
  run                       a worker in the foreground: runs dispatched tasks' agents (local mode:
                            in every repository in the queue, each task in its own)
  merge <id>                local mode: merge a task's branch into its base; the task is done
  approve <id>              approve a task's plan (plan_approval: true); its work phase runs next
  answer <id> <answer>      answer the question a task's agent asked; the task goes on with it
  kill <id>                 cancel a task and stop its agent
  retry <id>                queue a failed, cancelled or rate-limited task again
  serve                     run the Fleet GitHub App (Probot): reads .env, forwards webhooks via smee
                            when WEBHOOK_PROXY_URL is set
  doctor                    check what serve and run need (app credentials, public URL, git,
                            bubblewrap, cgroups, coders, state), one line each with its fix
  init                      set up a repository: .github/fleet.yml, the task workflow, the labels

Targets: a GitHub repository (--repo owner/name, or the origin remote; token from GITHUB_TOKEN or
\`gh auth token\`; --api-url for GitHub Enterprise) or local mode (--local, or when no repository
is found; state in $FLEET_HOME, default ~/.fleet). A repository's state branch is read and written
over git (FLEET_STATE_TRANSPORT=api uses the REST API instead).
\`fleet <command> --help\` for a command's options. Exit codes: 0 ok, 1 failure, 2 usage error, 3 not found.
`;

const SERVE_USAGE =
  "Usage: fleet serve\n\nRuns the Fleet GitHub App with Probot's runner (APP_ID, PRIVATE_KEY or PRIVATE_KEY_PATH,\nWEBHOOK_SECRET, WEBHOOK_PROXY_URL, GHE_HOST from the environment or .env).";

// Each command's module is loaded when it runs: `fleet --help` or a typo should not pay for
// Octokit, the worker and the agents.
interface Command {
  run: (argv: string[]) => Promise<number>;
  usage: string;
}

const COMMANDS: Record<string, () => Promise<Command>> = {
  tasks: () => import("./commands/tasks.ts").then((m) => ({ run: m.tasksCommand, usage: m.TASKS_USAGE })),
  task: () => import("./commands/task.ts").then((m) => ({ run: m.taskCommand, usage: m.TASK_USAGE })),
  config: () => import("./commands/config.ts").then((m) => ({ run: m.configCommand, usage: m.CONFIG_USAGE })),
  bd: () => import("./commands/bd.ts").then((m) => ({ run: m.bdCommand, usage: m.BD_USAGE })),
  run: () => import("./commands/run.ts").then((m) => ({ run: m.runCommand, usage: m.RUN_USAGE })),
  merge: () => import("./commands/merge.ts").then((m) => ({ run: m.mergeCommand, usage: m.MERGE_USAGE })),
  approve: () =>
    import("./commands/approve.ts").then((m) => ({ run: m.approveCommand, usage: m.APPROVE_USAGE })),
  answer: () => import("./commands/answer.ts").then((m) => ({ run: m.answerCommand, usage: m.ANSWER_USAGE })),
  kill: () =>
    import("./commands/kill-retry.ts").then((m) => ({
      run: (argv) => m.moveCommand("kill", argv),
      usage: m.KILL_USAGE,
    })),
  retry: () =>
    import("./commands/kill-retry.ts").then((m) => ({
      run: (argv) => m.moveCommand("retry", argv),
      usage: m.RETRY_USAGE,
    })),
  doctor: () => import("./commands/doctor.ts").then((m) => ({ run: m.doctorCommand, usage: m.DOCTOR_USAGE })),
  init: () => import("./commands/init.ts").then((m) => ({ run: m.initCommand, usage: m.INIT_USAGE })),
  serve: async () => ({
    run: async (argv) => {
      if (argv.includes("--help") || argv.includes("-h")) {
        out(SERVE_USAGE);
        return EXIT.ok;
      }
      const { serve } = await import("./serve.ts");
      await serve();
      return EXIT.ok;
    },
    usage: SERVE_USAGE,
  }),
};

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === "--help" || command === "-h" || command === "help") {
    const topic = command === "help" ? rest[0] : undefined;
    const load = topic ? COMMANDS[topic] : undefined;
    if (load) out((await load()).usage);
    else (command ? out : err)(USAGE);
    return command ? EXIT.ok : EXIT.usage;
  }
  const load = Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined;
  if (!load) {
    err(`fleet: unknown command "${command}".\n\n${USAGE}`);
    return EXIT.usage;
  }
  try {
    return await (await load()).run(rest);
  } catch (error) {
    if (error instanceof HelpRequested) {
      out(error.usage);
      return EXIT.ok;
    }
    return report(command, error);
  }
}

function report(command: string, error: unknown): number {
  const e = error as Error & { status?: number };
  if (error instanceof UsageError) {
    err(`fleet ${command}: ${e.message}`);
    err(error.usage ? `\n${error.usage}` : `Run \`fleet ${command} --help\` for usage.`);
  } else if (error instanceof StateCorruptError) {
    err(`fleet ${command}: ${e.message}`);
  } else if (typeof e?.status === "number") {
    // GitHub answered with an error: say which and what usually fixes it.
    const hint =
      e.status === 401
        ? " The token was refused: check GITHUB_TOKEN (or `gh auth login`)."
        : e.status === 403
          ? " The token lacks access (or a rate limit was hit): it needs repo (contents, issues, pull requests) write."
          : e.status === 404
            ? " Check --repo (owner/name) and that the token can see the repository; --api-url for GitHub Enterprise."
            : "";
    err(`fleet ${command}: GitHub answered ${e.status}: ${e.message}.${hint}`);
  } else if (e instanceof Error && "exitCode" in e) {
    err(`fleet ${command}: ${e.message}`);
  } else {
    err(`fleet ${command}: ${e?.stack ?? String(error)}`);
  }
  return exitCodeOf(error);
}

/** Runs `main` and sets the exit code; the process ends when its handles close (the worker's, `--watch`). */
export async function runMain(argv: string[]): Promise<void> {
  const code = await main(argv);
  process.exitCode = code;
}

// `node build/fleet.mjs <command>` (this file built by scripts/build-app.mjs) and `tsx src/cli/main.ts`
// run this file directly; bin/fleet.js (the `fleet` command, and npm start) calls runMain.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href)
  await runMain(process.argv.slice(2));
