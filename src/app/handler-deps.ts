import type { GitHub } from "../github/port.ts";
import type { ConfigCache } from "../queue/config-cache.ts";
import type { RepoQueues } from "./repo-queues.ts";

/** What the app keeps across events: the coders it knows, the repositories' queues, their configs. */
export interface AppDeps {
  knownCoders: readonly string[];
  queues: RepoQueues;
  /** `.github/fleet.yml` per repository between events (none: read on every event). */
  configs?: ConfigCache;
  /** The app's handle in mentions (its slug, `@fleet`); undefined when it cannot be told (no mentions then). */
  appHandle?: () => Promise<string | undefined>;
}

/** What a webhook handler works with: the app's, and GitHub as the event's installation (its one client, eventGitHub). */
export interface HandlerDeps extends AppDeps {
  github: GitHub;
}
