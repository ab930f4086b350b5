import { chmod, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { GitHubEmulator } from "./api.ts";
import { noreplyIdentity } from "./authors.ts";
import { GitRepo } from "./git-repo.ts";
import { type EmulatorState, type Installation, nowIso, type Repo, type User } from "./state.ts";

export type NewRepository = Parameters<GitHubEmulator["createRepo"]>[0];

/**
 * A new repository: a bare git repository under `dataDir` (with a first commit of `files`, if any)
 * and its post-receive hook, in the owner's installation (made on first use).
 */
export async function createRepository(
  state: EmulatorState,
  dataDir: string,
  baseUrl: string,
  input: NewRepository,
): ReturnType<GitHubEmulator["createRepo"]> {
  const fullName = `${input.owner}/${input.name}`;
  if (state.repos.has(fullName.toLowerCase())) throw new Error(`repository ${fullName} already exists`);
  const defaultBranch = input.defaultBranch ?? "main";
  const git = await GitRepo.init(join(dataDir, input.owner, `${input.name}.git`), defaultBranch);
  const owner = state.user(input.owner);
  const installation = installationOf(state, owner);
  installation.repos.add(fullName);
  const now = nowIso();
  const repo: Repo = {
    id: state.nextId(),
    owner,
    name: input.name,
    fullName,
    defaultBranch,
    private: input.private ?? false,
    git,
    installationId: installation.id,
    labels: new Map(),
    issues: new Map(),
    nextNumber: 1,
    collaborators: new Map(),
    runs: [],
    workflowIds: new Map(),
    artifacts: [],
    // A new repository's defaults: a read-only GITHUB_TOKEN, and Actions may not create or
    // approve pull requests (https://docs.github.com/en/repositories/managing-your-repositorys-settings-and-features/enabling-features-for-your-repository/managing-github-actions-settings-for-a-repository#preventing-github-actions-from-creating-or-approving-pull-requests).
    actionsSettings: { defaultWorkflowPermissions: "read", canApprovePullRequestReviews: false },
    rulesets: [],
    createdAt: now,
    pushedAt: now,
  };
  await initialCommit(git, defaultBranch, owner, input.files ?? {});
  await installPushHook(repo, baseUrl);
  state.repos.set(fullName.toLowerCase(), repo);
  return {
    fullName,
    cloneUrl: pathToFileURL(git.gitDir).href,
    httpUrl: `${baseUrl}/${input.owner}/${input.name}.git`,
    gitDir: git.gitDir,
    installationId: installation.id,
  };
}

/** One installation per owner account, holding all of that owner's repositories. */
function installationOf(state: EmulatorState, owner: User): Installation {
  let installation = [...state.installations.values()].find((i) => i.account.id === owner.id);
  if (!installation) {
    installation = { id: state.nextId(), account: owner, repos: new Set(), createdAt: nowIso() };
    state.installations.set(installation.id, installation);
  }
  return installation;
}

async function initialCommit(git: GitRepo, branch: string, owner: User, files: Record<string, string>) {
  const entries = Object.entries(files);
  if (entries.length === 0) return;
  const changes = [];
  for (const [path, content] of entries)
    changes.push({ path, mode: "100644", sha: await git.writeBlob(content) });
  const tree = await git.buildTree(undefined, changes);
  const sha = await git.commitTree({
    tree,
    parents: [],
    message: "Initial commit",
    author: noreplyIdentity(owner),
  });
  await git.updateRef(`refs/heads/${branch}`, sha, "");
}

/**
 * The hook reports pushes back to the emulator; GH_EMULATOR_LOGIN in the pusher's environment
 * names who pushed (default: the repository owner). Pushes over HTTP hand their lines to the emulator
 * through a file instead (no node start-up per push).
 */
async function installPushHook(repo: Repo, baseUrl: string): Promise<void> {
  const script = `#!/bin/sh
if [ -n "$GH_EMULATOR_PUSH_FILE" ]; then cat > "$GH_EMULATOR_PUSH_FILE"; exit 0; fi
input=$(cat)
GH_EMULATOR_HOOK_INPUT="$input" exec node -e '
const body = JSON.stringify({ lines: process.env.GH_EMULATOR_HOOK_INPUT || "", login: process.env.GH_EMULATOR_LOGIN || undefined });
fetch(${JSON.stringify(`${baseUrl}/_emulator/push/${encodeURIComponent(repo.fullName)}`)}, { method: "POST", body, headers: { "content-type": "application/json" } })
  .then((r) => r.arrayBuffer()).catch(() => {});
'
`;
  const hook = join(repo.git.gitDir, "hooks", "post-receive");
  await writeFile(hook, script);
  await chmod(hook, 0o755);
  const pre = join(repo.git.gitDir, "hooks", "pre-receive");
  await writeFile(pre, PRE_RECEIVE);
  await chmod(pre, 0o755);
}

/**
 * What GitHub refuses before a push lands, for pushes over HTTP (git-http.ts sets the variables for
 * the pusher; local pushes set none and pass):
 * - GH_EMULATOR_RULES, "<ref pattern><TAB><message>" lines: a ruleset's "Require a pull request
 *   before merging" refuses an update of a targeted branch with GitHub's GH013 report
 *   (https://docs.github.com/en/repositories/configuring-branches-and-merges-in-your-repository/managing-rulesets/about-rulesets);
 * - GH_EMULATOR_NO_WORKFLOWS: the token lacks `workflows`, so a commit new to the repository that
 *   adds, changes or removes a file under .github/workflows/ is refused with GitHub's message
 *   (https://docs.github.com/en/rest/authentication/permissions-required-for-github-apps#repository-permissions-for-workflows).
 * Any refusal declines the whole push.
 */
const PRE_RECEIVE = `#!/bin/sh
[ -z "$GH_EMULATOR_RULES" ] && [ -z "$GH_EMULATOR_NO_WORKFLOWS" ] && exit 0
zero=0000000000000000000000000000000000000000
tab=$(printf '\\t')
tick=$(printf '\\140')
status=0
while read -r old new ref; do
  if [ -n "$GH_EMULATOR_RULES" ] && [ "$old" != "$zero" ] && [ "$new" != "$zero" ]; then
    broken=$(printf '%s\\n' "$GH_EMULATOR_RULES" | while IFS="$tab" read -r pattern message; do
      case "$ref" in $pattern) printf -- '- %s\\n\\n' "$message" ;; esac
    done)
    if [ -n "$broken" ]; then
      printf 'error: GH013: Repository rule violations found for %s.\\n\\n%s\\n' "$ref" "$broken" >&2
      status=1
      continue
    fi
  fi
  if [ -n "$GH_EMULATOR_NO_WORKFLOWS" ] && [ "$new" != "$zero" ]; then
    for c in $(git rev-list "$new" --not --all); do
      parent=$(git rev-parse -q --verify "$c^1" || git hash-object -t tree /dev/null)
      file=$(git diff --name-only "$parent" "$c" -- .github/workflows | head -n 1)
      if [ -n "$file" ]; then
        printf 'refusing to allow a GitHub App to create or update workflow %s without %s permission\\n' \\
          "$tick$file$tick" "\${tick}workflows$tick" >&2
        status=1
        break
      fi
    done
  fi
done
exit $status
`;
