import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { execa } from "execa";
import { parse as parseYaml } from "yaml";
import { CODER_NAMES } from "../../core/coders.ts";
import {
  defaultFleetConfig,
  FLEET_CONFIG_PATH,
  type FleetConfig,
  parseFleetConfig,
} from "../../core/config.ts";
import { fleetYmlTemplate } from "../../core/config-template.ts";
import { type FileAction, fileAction, fileActionWords, leftToDo, writes } from "../../core/init-plan.ts";
import { fleetLabelDefinitions } from "../../core/labels.ts";
import {
  actionRef,
  defaultActionOwner,
  isAccountName,
  TASK_WORKFLOW_PATH,
  taskWorkflowFor,
  workflowCredentialNames,
} from "../../core/task-workflow.ts";
import { ensureFleetLabels } from "../../github/labels.ts";
import { githubForToken } from "../../github/octokit-port.ts";
import { parseRepoFullName, type RepoRef } from "../../github/port.ts";
import { fleetInstallRoot } from "../../worker/sandbox/install-root.ts";
import { parse } from "../args.ts";
import { CliError, UsageError } from "../errors.ts";
import { json, out } from "../io.ts";
import { repoFromRemoteUrl } from "../target.ts";

export const INIT_USAGE = `Usage: fleet init [--action-owner NAME] [--force] [--dry-run] [--no-labels] [--json]
                  [--repo owner/name] [--api-url URL] [--repo-path DIR]

Sets up a repository for Fleet, in its clone (the git repository here, or --repo-path):
  .github/fleet.yml                  every setting with its default, commented out
  .github/workflows/fleet-task.yml   the task workflow the app dispatches, running Fleet's published
                                     action <owner>/fleet@v1 (permissions: contents: read, id-token: write)
  the fleet labels on GitHub         fleet:<coder>, fleet:p0..p4, fleet:split, fleet:rebase
then prints what is left (commit and push, the app, Actions secrets, runners).
Safe to run again: a file that is already Fleet's stays as it is, one that differs is kept unless
--force. With \`workflow:\` or \`dispatch: local\` in an existing .github/fleet.yml, the workflow is
written under that name, or not at all.

  --action-owner NAME   whose published action the workflow runs (default: the owner in Fleet's
                        package.json repository field, else fleet-dev)
  --force               replace files that differ from Fleet's
  --dry-run             say what would be written and created; write and create nothing
  --no-labels           do not create the labels (the app creates them when it is installed)
  --repo owner/name     the GitHub repository for the labels (default: from the origin remote)
  --api-url URL         GitHub API URL (GitHub Enterprise); or GITHUB_API_URL
  --repo-path DIR       the repository's clone (default: the git repository here)
  --json                machine-readable output
Token for the labels: GITHUB_TOKEN, else \`gh auth token\` (Issues: write).`;

const OPTIONS = {
  "action-owner": { type: "string" },
  force: { type: "boolean" },
  "dry-run": { type: "boolean" },
  "no-labels": { type: "boolean" },
  repo: { type: "string" },
  "api-url": { type: "string" },
  "repo-path": { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

async function repositoryRoot(dir: string): Promise<string> {
  const r = await execa("git", ["rev-parse", "--show-toplevel"], { cwd: dir, reject: false });
  if (r.exitCode !== 0)
    throw new CliError(
      `${dir} is not in a git repository: run \`fleet init\` in your repository's clone, or pass --repo-path.`,
    );
  return String(r.stdout).trim();
}

const readText = (path: string) => readFile(path, "utf8").catch(() => undefined);

/** The repository's own .github/fleet.yml, as it is in the working tree (its workflow name, dispatch, coders). */
async function currentConfig(root: string): Promise<{ config: FleetConfig; problem?: string }> {
  const text = await readText(join(root, FLEET_CONFIG_PATH));
  if (text === undefined) return { config: defaultFleetConfig() };
  try {
    const r = parseFleetConfig(parseYaml(text) ?? {});
    if (r.ok) return { config: r.config };
    return {
      config: defaultFleetConfig(),
      problem: r.problems.map((p) => `${p.path}: ${p.message}`).join("; "),
    };
  } catch (error) {
    return { config: defaultFleetConfig(), problem: (error as Error).message };
  }
}

async function actionOwner(given: string | undefined): Promise<string> {
  if (given !== undefined) {
    if (!isAccountName(given))
      throw new UsageError(`--action-owner "${given}" is not a GitHub account name.`, INIT_USAGE);
    return given;
  }
  const pkg = JSON.parse(await readFile(join(fleetInstallRoot(), "package.json"), "utf8")) as {
    repository?: unknown;
  };
  return defaultActionOwner(pkg);
}

async function githubToken(env: NodeJS.ProcessEnv): Promise<string | undefined> {
  if (env.GITHUB_TOKEN || env.GH_TOKEN) return env.GITHUB_TOKEN || env.GH_TOKEN;
  const gh = await execa("gh", ["auth", "token"], { reject: false }).catch(() => undefined);
  return gh?.exitCode === 0 ? String(gh.stdout).trim() || undefined : undefined;
}

interface LabelsResult {
  created?: string[];
  missing?: string[];
  skipped?: string;
}

/** Creates the fleet labels that are missing (or, dry, lists them); a repository or token not found is said, not fatal. */
async function labels(
  root: string,
  values: { repo?: string; "api-url"?: string; "dry-run"?: boolean },
): Promise<{ repo?: RepoRef; result: LabelsResult }> {
  const origin = await execa("git", ["remote", "get-url", "origin"], { cwd: root, reject: false });
  const full = values.repo ?? (origin.exitCode === 0 ? repoFromRemoteUrl(String(origin.stdout)) : undefined);
  if (!full)
    return {
      result: {
        skipped:
          "no GitHub repository found (no --repo, and origin is not on GitHub); the app creates them when installed",
      },
    };
  let repo: RepoRef;
  try {
    repo = parseRepoFullName(full);
  } catch (error) {
    throw new UsageError((error as Error).message, INIT_USAGE);
  }
  const token = await githubToken(process.env);
  if (!token)
    return {
      repo,
      result: {
        skipped:
          "no GitHub token (set GITHUB_TOKEN or `gh auth login`, then run fleet init again); the app creates them when installed",
      },
    };
  const github = await githubForToken({
    token,
    baseUrl: (values["api-url"] ?? process.env.GITHUB_API_URL ?? "https://api.github.com").replace(/\/$/, ""),
    userAgent: "fleet-init",
    log: { debug() {}, info() {}, warn() {}, error() {} },
  });
  const definitions = fleetLabelDefinitions(CODER_NAMES);
  if (values["dry-run"]) {
    const have = new Set((await github.issues.listLabels(repo)).map((l) => l.name.toLowerCase()));
    return {
      repo,
      result: { missing: definitions.map((d) => d.name).filter((n) => !have.has(n.toLowerCase())) },
    };
  }
  return { repo, result: { created: await ensureFleetLabels(github, repo, definitions) } };
}

interface PlannedFile {
  path: string;
  action: FileAction;
  content: string;
}

export async function initCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, OPTIONS, INIT_USAGE);
  if (positionals.length)
    throw new UsageError(`fleet init takes no arguments (got "${positionals[0]}").`, INIT_USAGE);
  const root = await repositoryRoot(resolve(values["repo-path"] ?? process.cwd()));
  const dryRun = values["dry-run"] === true;
  const { config, problem } = await currentConfig(root);
  const owner = await actionOwner(values["action-owner"]);
  const template = await readFile(join(fleetInstallRoot(), TASK_WORKFLOW_PATH), "utf8");
  const workflow = taskWorkflowFor(template, owner);
  const wanted = [
    { path: FLEET_CONFIG_PATH, content: fleetYmlTemplate() },
    ...(config.dispatch === "actions"
      ? [{ path: `.github/workflows/${config.workflow}`, content: workflow }]
      : []),
  ];
  const files: PlannedFile[] = [];
  for (const w of wanted) {
    const action = fileAction(await readText(join(root, w.path)), w.content, values.force === true);
    files.push({ ...w, action });
    if (dryRun || !writes(action)) continue;
    await mkdir(dirname(join(root, w.path)), { recursive: true });
    await writeFile(join(root, w.path), w.content);
  }
  const noLabels = values["no-labels"] === true;
  const labelled = noLabels ? { result: { skipped: "--no-labels" } } : await labels(root, values);
  const left = leftToDo({
    ...(labelled.repo ? { repo: `${labelled.repo.owner}/${labelled.repo.repo}` } : {}),
    config,
    written: dryRun ? [] : files.filter((f) => writes(f.action)).map((f) => f.path),
    workflowSecrets: workflowCredentialNames(workflow),
    ...(labelled.result.skipped && !noLabels ? { labelsSkipped: labelled.result.skipped } : {}),
  });
  const report = {
    root,
    dryRun,
    action: actionRef(owner),
    files: files.map((f) => ({ path: f.path, action: f.action })),
    labels: labelled.result,
    ...(problem ? { configProblem: problem } : {}),
    left,
  };
  if (values.json) json(report);
  else out(initText(report, files, dryRun));
  return 0;
}

function initText(
  r: { root: string; action: string; labels: LabelsResult; configProblem?: string; left: string[] },
  files: PlannedFile[],
  dryRun: boolean,
): string {
  const lines = [`fleet init in ${r.root}${dryRun ? " (dry run: nothing written)" : ""}`];
  for (const f of files)
    lines.push(
      `  ${f.path}: ${fileActionWords(f.action, dryRun)}${f.path.includes("workflows") ? ` (${r.action})` : ""}`,
    );
  if (r.configProblem)
    lines.push(
      `  note: the existing ${FLEET_CONFIG_PATH} is invalid (${r.configProblem}); its defaults were used`,
    );
  const l = r.labels;
  lines.push(
    l.skipped
      ? `  labels: not created (${l.skipped})`
      : l.missing
        ? `  labels: ${l.missing.length ? `would create ${l.missing.join(", ")}` : "all present"}`
        : `  labels: ${l.created?.length ? `created ${l.created.join(", ")}` : "all present"}`,
  );
  lines.push("", "Left to do:", ...r.left.map((x, i) => `  ${i + 1}. ${x}`));
  return lines.join("\n");
}
