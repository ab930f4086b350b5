import type { Actions } from "../actions.ts";
import type { ArtifactStore } from "../artifact-store.ts";
import type { RateLimits } from "../rate-limits.ts";
import type { OnRefMoved } from "../ref-events.ts";
import type { Router } from "../router.ts";
import type { World } from "../world.ts";
import { registerActionsPermissionRoutes } from "./actions-permissions.ts";
import { registerAppRoutes } from "./apps.ts";
import { registerArtifactRoutes } from "./artifacts.ts";
import { registerAssigneeRoutes } from "./assignees.ts";
import { registerBranchRoutes } from "./branches.ts";
import { registerCollaboratorRoutes } from "./collaborators.ts";
import { registerCommitRoutes } from "./commits.ts";
import { registerContentsRoutes } from "./contents.ts";
import { registerGitBlobRoutes } from "./git-blobs.ts";
import { registerGitCommitRoutes } from "./git-commits.ts";
import { registerGitRefRoutes } from "./git-refs.ts";
import { registerGitTreeRoutes } from "./git-trees.ts";
import { registerInstallationRoutes } from "./installations.ts";
import { registerIssueCommentRoutes } from "./issue-comments.ts";
import { registerIssueEventRoutes } from "./issue-events.ts";
import { registerIssueRoutes } from "./issues.ts";
import { registerLabelRoutes } from "./labels.ts";
import { registerPullReviewRoutes } from "./pull-reviews.ts";
import { registerPullRoutes } from "./pulls.ts";
import { registerRateLimitRoutes } from "./rate-limit.ts";
import { registerReactionRoutes } from "./reactions.ts";
import { registerRepoRoutes } from "./repos.ts";
import { registerRepositoryDispatchRoutes } from "./repository-dispatches.ts";
import { registerReviewCommentRoutes } from "./review-comments.ts";
import { registerSubIssueRoutes } from "./sub-issues.ts";
import { registerUserRoutes } from "./users.ts";
import { registerWorkflowJobRoutes } from "./workflow-jobs.ts";
import { registerWorkflowRunRoutes } from "./workflow-runs.ts";
import { registerWorkflowRoutes } from "./workflows.ts";

export interface RouteDeps {
  actions: Actions;
  artifacts: ArtifactStore;
  limits: RateLimits;
  /** What GitHub does when a ref moves (push webhook, runs, synchronize): ref-events.ts. */
  onRefMoved: OnRefMoved;
}

/**
 * Every REST operation the emulator implements, one file per resource as GitHub's REST reference
 * groups them (https://docs.github.com/en/rest). Anything else answers 404 (server.ts).
 */
export function registerRoutes(r: Router, w: World, d: RouteDeps): void {
  // Apps, installations, users
  registerAppRoutes(r, w);
  registerInstallationRoutes(r, w);
  registerUserRoutes(r, w);
  registerRateLimitRoutes(r, d.limits);
  // Repositories
  registerRepoRoutes(r, w);
  registerCollaboratorRoutes(r, w);
  registerBranchRoutes(r, w);
  registerContentsRoutes(r, w, d.onRefMoved);
  registerCommitRoutes(r, w);
  registerRepositoryDispatchRoutes(r, w, d.actions);
  // Issues
  registerIssueRoutes(r, w);
  registerIssueCommentRoutes(r, w);
  registerIssueEventRoutes(r, w);
  registerLabelRoutes(r, w);
  registerAssigneeRoutes(r, w);
  registerSubIssueRoutes(r, w);
  registerReactionRoutes(r, w);
  // Git database
  registerGitRefRoutes(r, w, d.onRefMoved);
  registerGitCommitRoutes(r, w);
  registerGitTreeRoutes(r, w);
  registerGitBlobRoutes(r, w);
  // Pull requests
  registerPullRoutes(r, w, d.onRefMoved);
  registerPullReviewRoutes(r, w);
  registerReviewCommentRoutes(r, w);
  // Actions
  registerWorkflowRoutes(r, w, d.actions);
  registerWorkflowRunRoutes(r, w, d.actions);
  registerWorkflowJobRoutes(r, w);
  registerArtifactRoutes(r, w, d.artifacts);
  registerActionsPermissionRoutes(r, w);
}
