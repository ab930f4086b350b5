/** A write kept losing the compare-and-swap race; nothing was written by this call. */
export class StateConflictError extends Error {
  override readonly name = "StateConflictError";
  readonly where: string;
  readonly attempts: number;
  constructor(where: string, attempts: number) {
    super(
      `Fleet state at ${where}: gave up after ${attempts} conflicting writes (other writers kept updating it first). Nothing was written; retry the operation.`,
    );
    this.where = where;
    this.attempts = attempts;
  }
}
