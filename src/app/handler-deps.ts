import type { ConfigCache } from "../queue/config-cache.ts";
import type { RepoQueues } from "./repo-queues.ts";

/** What every webhook handler works with: the coders it knows, the repositories' queues, their configs. */
export interface HandlerDeps {
  knownCoders: readonly string[];
  queues: RepoQueues;
  /** `.github/fleet.yml` per repository between events (none: read on every event). */
  configs?: ConfigCache;
}
