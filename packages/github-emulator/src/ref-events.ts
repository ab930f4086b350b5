import { refreshPull } from "./pull-requests.ts";
import type { Repo, User } from "./state.ts";
import type { World } from "./world.ts";

const ZERO = "0".repeat(40);

/** A ref moved (`before`/`after` null: created/deleted), through the REST API: what GitHub does about it. */
export type OnRefMoved = (
  repo: Repo,
  ref: string,
  before: string | null,
  after: string | null,
) => Promise<void>;

/**
 * What GitHub does when a branch moves, by API or by `git push`: a push webhook, the `on: push`
 * workflow runs, and a `synchronize` (with its `on: pull_request` runs) for open pull requests whose
 * head is that branch.
 */
export function makeRefMoved(w: World) {
  return async (
    repo: Repo,
    ref: string,
    before: string | null,
    after: string | null,
    pusher?: User,
  ): Promise<void> => {
    // GitHub's push event is for branches and tags only ("when there is a push to a repository branch
    // ... a commit tag is pushed", https://docs.github.com/en/webhooks/webhook-events-and-payloads#push);
    // a ref elsewhere (`refs/notes/*`, an app's own namespace) starts no webhook and no workflow.
    if (!ref.startsWith("refs/heads/") && !ref.startsWith("refs/tags/")) return;
    repo.pushedAt = new Date().toISOString().replace(/\.\d{3}Z$/, "Z");
    const commits = [];
    if (after) {
      // `--exclude` patterns for `--branches` are short names (git rev-parse --help), not refs/heads/...
      const range = before
        ? [`${before}..${after}`]
        : [after, "--not", `--exclude=${ref.replace(/^refs\/heads\//, "")}`, "--branches"];
      // GitHub lists at most 20 commits in a push payload.
      for (const c of await repo.git.logWithFiles(range, 20)) {
        commits.push({
          id: c.sha,
          tree_id: c.tree,
          distinct: true,
          message: c.message,
          timestamp: c.committer.date,
          url: `${w.shapes.html}/${repo.fullName}/commit/${c.sha}`,
          author: { name: c.author.name, email: c.author.email },
          committer: { name: c.committer.name, email: c.committer.email },
          added: c.files.filter((f) => f.status === "A").map((f) => f.path),
          removed: c.files.filter((f) => f.status === "D").map((f) => f.path),
          modified: c.files.filter((f) => f.status !== "A" && f.status !== "D").map((f) => f.path),
        });
      }
    }
    const forced = !!(before && after && !(await repo.git.isAncestor(before, after)));
    w.emit(
      repo,
      "push",
      {
        ref,
        before: before ?? ZERO,
        after: after ?? ZERO,
        created: before === null,
        deleted: after === null,
        forced,
        base_ref: null,
        compare: `${w.shapes.html}/${repo.fullName}/compare/${(before ?? ZERO).slice(0, 12)}...${(after ?? ZERO).slice(0, 12)}`,
        commits,
        head_commit: commits[commits.length - 1] ?? null,
        pusher: pusher ? { name: pusher.login, email: null } : { name: repo.owner.login, email: null },
      },
      pusher,
    );
    await w.workflowTriggers?.pushed(repo, ref, before, after, pusher);
    if (!ref.startsWith("refs/heads/")) return;
    const branch = ref.slice("refs/heads/".length);
    for (const i of repo.issues.values()) {
      if (!i.pull || i.state !== "open") continue;
      if (i.pull.headRef === branch && after) {
        const prev = i.pull.headSha;
        await refreshPull(repo, i);
        if (prev !== i.pull.headSha) {
          w.emit(
            repo,
            "pull_request",
            {
              action: "synchronize",
              number: i.number,
              before: prev,
              after: i.pull.headSha,
              pull_request: w.pullJsonSync(repo, i),
            },
            pusher,
          );
          await w.workflowTriggers?.pullRequest(repo, i, "synchronize", pusher);
        }
      } else if (i.pull.baseRef === branch) {
        await refreshPull(repo, i);
      }
    }
  };
}
