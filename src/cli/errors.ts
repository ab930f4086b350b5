/** Exit codes scripts can rely on. */
export const EXIT = { ok: 0, failure: 1, usage: 2, notFound: 3 } as const;

/** Bad arguments: what was wrong and how to call the command instead (exit 2). */
export class UsageError extends Error {
  readonly exitCode = EXIT.usage;
  readonly usage?: string;
  constructor(message: string, usage?: string) {
    super(message);
    this.usage = usage;
    this.name = "UsageError";
  }
}

/** `--help` was asked for: the command's usage is printed and the command does nothing else (exit 0). */
export class HelpRequested extends Error {
  readonly exitCode = EXIT.ok;
  readonly usage: string;
  constructor(usage: string) {
    super("help requested");
    this.usage = usage;
    this.name = "HelpRequested";
  }
}

/** A task, issue or artifact that does not exist (exit 3). */
export class NotFoundError extends Error {
  readonly exitCode = EXIT.notFound;
  constructor(message: string) {
    super(message);
    this.name = "NotFoundError";
  }
}

/** Anything else a user can hit and fix (exit 1). */
export class CliError extends Error {
  readonly exitCode = EXIT.failure;
  constructor(message: string) {
    super(message);
    this.name = "CliError";
  }
}

export const exitCodeOf = (error: unknown): number =>
  error instanceof UsageError || error instanceof NotFoundError || error instanceof CliError
    ? error.exitCode
    : EXIT.failure;
