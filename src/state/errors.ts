/**
 * The state document (or the branch holding it) is not something this Fleet can read. Never
 * overwritten: the message says what is wrong and what the user can do about it.
 */
export class StateCorruptError extends Error {
  override readonly name = "StateCorruptError";
  constructor(
    /** Where the bad document lives, e.g. "fleet/state:.fleet/state.json" or a local file path. */
    readonly path: string,
    /** What exactly is wrong with it. */
    readonly detail: string,
    /** What to do, e.g. "fix or revert the last commit on fleet/state". */
    readonly remedy: string,
  ) {
    super(`Fleet state at ${path} is unreadable: ${detail}. Fleet will not overwrite it; ${remedy}.`);
  }
}

/** A write kept losing the compare-and-swap race; nothing was written by this call. */
export class StateConflictError extends Error {
  override readonly name = "StateConflictError";
  constructor(
    readonly where: string,
    readonly attempts: number,
  ) {
    super(
      `Fleet state at ${where}: gave up after ${attempts} conflicting writes (other writers kept updating it first). Nothing was written; retry the operation.`,
    );
  }
}
