import type { GitHub, RepoRef } from "./port.ts";

export type RepoRole = "admin" | "maintain" | "write" | "triage" | "read" | "none";

/**
 * The sender's role on the repository. GitHub's `permission` field folds maintain into write and
 * triage into read; `role_name` keeps them apart, which `allowed_roles` needs.
 */
export async function getRepoRole(github: GitHub, ref: RepoRef, login: string): Promise<RepoRole> {
  try {
    const data = await github.repos.getCollaboratorPermission(ref, login);
    const role = (data.role_name || data.permission) as RepoRole;
    return ["admin", "maintain", "write", "triage", "read"].includes(role) ? role : "none";
  } catch (error) {
    // GitHub answers 404 for a user who is not a collaborator at all.
    if ((error as { status?: number }).status === 404) return "none";
    throw error;
  }
}
