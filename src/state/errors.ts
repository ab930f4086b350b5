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
