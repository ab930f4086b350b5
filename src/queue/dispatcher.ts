import type { Task } from "../core/task.ts";

export interface DispatchStart {
  runId?: string;
  runUrl?: string;
}

/**
 * Starts and stops the work of dispatched tasks. The scheduler has already recorded the lease in
 * repository state when `start` is called; a mode only has to get an agent going.
 */
export interface Dispatcher {
  readonly mode: "actions" | "local";
  start(task: Task): Promise<DispatchStart>;
  stop(task: Task): Promise<void>;
}

/**
 * Local mode: workers (`fleet run`) watch the repository state and claim dispatched tasks themselves,
 * and notice a cancel on their next heartbeat, so there is nothing to call here.
 */
export const localDispatcher: Dispatcher = {
  mode: "local",
  start: async () => ({}),
  stop: async () => {},
};
