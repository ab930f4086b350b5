/** Output of a command: stdout for results, stderr for progress and errors. */
export const out = (text: string): void => {
  process.stdout.write(text.endsWith("\n") ? text : `${text}\n`);
};
export const err = (text: string): void => {
  process.stderr.write(text.endsWith("\n") ? text : `${text}\n`);
};
export const json = (value: unknown): void => out(JSON.stringify(value, null, 2));

/** Resolves on the first SIGINT or SIGTERM (and keeps the process from dying on it). */
export function untilSignal(): { promise: Promise<NodeJS.Signals>; dispose: () => void } {
  let resolveFn: (s: NodeJS.Signals) => void = () => {};
  const promise = new Promise<NodeJS.Signals>((r) => {
    resolveFn = r;
  });
  const onInt = () => resolveFn("SIGINT");
  const onTerm = () => resolveFn("SIGTERM");
  // `on`, not `once`: a signal that arrives while a child runs (execa's signal-exit listens too) would
  // otherwise find no listener of ours left, and signal-exit re-raises it and the process dies.
  process.on("SIGINT", onInt);
  process.on("SIGTERM", onTerm);
  return {
    promise,
    dispose: () => {
      process.off("SIGINT", onInt);
      process.off("SIGTERM", onTerm);
    },
  };
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
