import { grantHolds, grantReaches } from "./installation-token.ts";
import type { Reply } from "./router.ts";
import { type Actor, atLeast, type EmulatorState, type Issue, type Repo } from "./state.ts";
import type { World } from "./world.ts";

/** GitHub pins at most three issues per repository. */
export const MAX_PINNED_ISSUES = 3;

const nodeIdOf = (kind: string, id: number) =>
  Buffer.from(`0:${kind}${id}`).toString("base64").replace(/=+$/, "");

const gqlError = (message: string, type?: string): Reply => ({
  status: 200,
  body: { data: null, errors: [{ ...(type ? { type } : {}), message }] },
});

/**
 * A minimal `POST /graphql`: the `pinIssue` and `unpinIssue` mutations (by the issue's node id) and
 * `markPullRequestReadyForReview` (by the pull request's node id), which have no REST equivalent. Anything else is answered as GitHub answers a query it cannot resolve:
 * 200 with an `errors` list that says what the emulator supports.
 */
export function handleGraphql(state: EmulatorState, actor: Actor, body: unknown, world?: World): Reply {
  if (actor.kind === "anonymous" || actor.kind === "app")
    return { status: 401, body: { message: "This endpoint requires you to be authenticated." } };
  const { query, variables } = (body ?? {}) as { query?: unknown; variables?: Record<string, unknown> };
  if (typeof query !== "string") return { status: 400, body: { message: "Problems parsing JSON: no query" } };
  if (/\bmarkPullRequestReadyForReview\s*\(/.test(query))
    return markReadyForReview(state, actor, query, variables, world);
  const op = /\b(pinIssue|unpinIssue)\s*\(\s*input\s*:\s*\{\s*issueId\s*:\s*(\$\w+|"[^"]*")\s*\}/.exec(query);
  if (!op)
    return gqlError(
      "The offline GitHub's GraphQL endpoint supports only the pinIssue, unpinIssue and markPullRequestReadyForReview mutations.",
    );
  const ref = op[2]!;
  const issueId = ref.startsWith("$") ? variables?.[ref.slice(1)] : ref.slice(1, -1);
  let found: { repo: Repo; issue: Issue } | undefined;
  for (const entry of state.issuesById.values()) {
    if (!entry.issue.pull && nodeIdOf("Issue", entry.issue.id) === issueId) found = entry;
  }
  if (!found)
    return gqlError(`Could not resolve to a node with the global id of '${String(issueId)}'`, "NOT_FOUND");
  const { repo, issue } = found;
  const allowed =
    actor.kind === "installation"
      ? actor.installationId === repo.installationId &&
        (!actor.grant || (grantReaches(actor.grant, repo) && grantHolds(actor.grant, "issues", "write")))
      : atLeast(state.permission(repo, actor.user.login), "write");
  if (!allowed)
    return gqlError(
      `${actor.user.login} does not have the right permission to pin issues in ${repo.fullName}`,
      "FORBIDDEN",
    );
  if (op[1] === "pinIssue" && !issue.pinned) {
    const pinned = [...repo.issues.values()].filter((i) => i.pinned).length;
    if (pinned >= MAX_PINNED_ISSUES)
      return gqlError(
        `You can't pin more than ${MAX_PINNED_ISSUES} issues in a repository.`,
        "UNPROCESSABLE",
      );
    issue.pinned = true;
  } else if (op[1] === "unpinIssue") issue.pinned = false;
  return { status: 200, body: { data: { [op[1]!]: { issue: { number: issue.number } } } } };
}

/**
 * `markPullRequestReadyForReview(input: {pullRequestId})`
 * (https://docs.github.com/en/graphql/reference/mutations#markpullrequestreadyforreview): a draft pull
 * request becomes ready, with a `pull_request` `ready_for_review` webhook
 * (https://docs.github.com/en/webhooks/webhook-events-and-payloads#pull_request); one that is not a
 * draft is answered as it is. Who may: the author, someone with write access, or an installation
 * with `pull_requests: write`.
 */
function markReadyForReview(
  state: EmulatorState,
  actor: Exclude<Actor, { kind: "anonymous" | "app" }>,
  query: string,
  variables: Record<string, unknown> | undefined,
  world: World | undefined,
): Reply {
  const op =
    /\bmarkPullRequestReadyForReview\s*\(\s*input\s*:\s*\{\s*pullRequestId\s*:\s*(\$\w+|"[^"]*")\s*\}/.exec(
      query,
    );
  const ref = op?.[1];
  if (!ref) return gqlError("markPullRequestReadyForReview takes input: { pullRequestId }.");
  const id = ref.startsWith("$") ? variables?.[ref.slice(1)] : ref.slice(1, -1);
  let found: { repo: Repo; issue: Issue } | undefined;
  for (const entry of state.issuesById.values()) {
    if (entry.issue.pull && nodeIdOf("PullRequest", entry.issue.id) === id) found = entry;
  }
  if (!found)
    return gqlError(`Could not resolve to a node with the global id of '${String(id)}'`, "NOT_FOUND");
  const { repo, issue } = found;
  const allowed =
    actor.kind === "installation"
      ? actor.installationId === repo.installationId &&
        (!actor.grant ||
          (grantReaches(actor.grant, repo) && grantHolds(actor.grant, "pull_requests", "write")))
      : actor.user.login === issue.user.login || atLeast(state.permission(repo, actor.user.login), "write");
  if (!allowed)
    return gqlError(
      `${actor.user.login} does not have permission to mark pull request #${issue.number} ready for review`,
      "FORBIDDEN",
    );
  if (issue.state !== "open") return gqlError("Pull request is closed", "UNPROCESSABLE");
  if (issue.pull!.draft) {
    issue.pull!.draft = false;
    issue.updatedAt = new Date().toISOString();
    world?.emit(repo, "pull_request", {
      action: "ready_for_review",
      number: issue.number,
      pull_request: world.pullJsonSync(repo, issue),
    });
  }
  return {
    status: 200,
    body: {
      data: { markPullRequestReadyForReview: { pullRequest: { number: issue.number, isDraft: false } } },
    },
  };
}
