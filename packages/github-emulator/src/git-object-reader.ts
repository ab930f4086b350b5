import { type ChildProcess, spawn } from "node:child_process";

/** What `git cat-file` says of an object: its id, type and size, and with `contents` its bytes. */
export interface ObjectInfo {
  sha: string;
  type: string;
  size: number;
}

type Pending = {
  withContents: boolean;
  resolve: (o: (ObjectInfo & { data?: Buffer }) | undefined) => void;
  reject: (e: Error) => void;
};

const HEADER = /^([0-9a-f]{40,64}) (\w+) (\d+)$/;

/**
 * Reads objects of one bare repository through a single long-lived `git cat-file --batch-command`
 * (git 2.36+) instead of a git process per read. A process started from a test's large node process
 * costs ~10 ms of that process's CPU in fork alone, and the emulator reads an object for nearly every
 * REST request. git looks a name up afresh for each command (loose refs and objects are read when
 * asked; packs are rescanned when an object is not found), so pushes made since the start are seen.
 */
export class GitObjectReader {
  private readonly gitDir: string;
  private readonly env: Record<string, string>;
  private child: ChildProcess | undefined;
  private pending: Pending[] = [];
  private buffered: Buffer = Buffer.alloc(0);

  constructor(gitDir: string, env: Record<string, string>) {
    this.gitDir = gitDir;
    this.env = env;
  }

  /** The object a name (`<sha>`, `refs/heads/x^{commit}`, `<commit>:<path>`) resolves to, if any. */
  info(name: string): Promise<ObjectInfo | undefined> {
    return this.ask("info", name, false);
  }

  /** The object and its bytes, if the name resolves. */
  contents(name: string): Promise<(ObjectInfo & { data: Buffer }) | undefined> {
    return this.ask("contents", name, true) as Promise<(ObjectInfo & { data: Buffer }) | undefined>;
  }

  /** Ends the process (the emulator's stop); a later read starts a new one. */
  close(): void {
    const child = this.child;
    this.child = undefined;
    child?.stdin?.end();
    this.fail(new Error("the object reader was closed"));
  }

  private ask(command: string, name: string, withContents: boolean) {
    // The protocol is a line per command: a name with a line break cannot be asked (git has none).
    if (/[\n\r]/.test(name)) return Promise.resolve(undefined);
    return new Promise<(ObjectInfo & { data?: Buffer }) | undefined>((resolve, reject) => {
      const child = this.child ?? this.start();
      if (this.pending.length === 0) holdOpen(child, true);
      this.pending.push({ withContents, resolve, reject });
      child.stdin!.write(`${command} ${name}\n`);
    });
  }

  private start(): ChildProcess {
    const child = spawn("git", ["-C", this.gitDir, "cat-file", "--batch-command"], {
      env: { ...process.env, ...this.env },
      stdio: ["pipe", "pipe", "ignore"],
    });
    this.child = child;
    this.buffered = Buffer.alloc(0);
    holdOpen(child, false);
    child.stdout!.on("data", (chunk: Buffer) => {
      this.buffered = this.buffered.length ? Buffer.concat([this.buffered, chunk]) : chunk;
      this.drain();
    });
    const ended = (why: string) => {
      if (this.child !== child) return;
      this.child = undefined;
      this.fail(new Error(`git cat-file in ${this.gitDir} ${why}`));
    };
    child.on("error", (e) => ended(`could not run: ${e.message}`));
    child.on("exit", (code, signal) => ended(`ended (${signal ?? code})`));
    child.stdin!.on("error", () => undefined);
    return child;
  }

  /** Answers the oldest reads whose whole answer has arrived. */
  private drain(): void {
    this.answer();
    if (this.pending.length === 0 && this.child) holdOpen(this.child, false);
  }

  private answer(): void {
    while (this.pending.length) {
      const eol = this.buffered.indexOf(10);
      if (eol < 0) return;
      const header = HEADER.exec(this.buffered.subarray(0, eol).toString("utf8"));
      const next = this.pending[0]!;
      if (!header) {
        // `<name> missing` or `<name> ambiguous`.
        this.buffered = this.buffered.subarray(eol + 1);
        this.pending.shift();
        next.resolve(undefined);
        continue;
      }
      const info = { sha: header[1]!, type: header[2]!, size: Number(header[3]) };
      if (!next.withContents) {
        this.buffered = this.buffered.subarray(eol + 1);
        this.pending.shift();
        next.resolve(info);
        continue;
      }
      // The bytes and a closing line feed follow the header.
      const end = eol + 1 + info.size;
      if (this.buffered.length < end + 1) return;
      const data = Buffer.from(this.buffered.subarray(eol + 1, end));
      this.buffered = this.buffered.subarray(end + 1);
      this.pending.shift();
      next.resolve({ ...info, data });
    }
  }

  private fail(error: Error): void {
    if (this.child) holdOpen(this.child, false);
    for (const p of this.pending.splice(0)) p.reject(error);
    this.buffered = Buffer.alloc(0);
  }
}

/** Idle, the reader must not keep its process alive; with a read in flight it must. */
function holdOpen(child: ChildProcess, hold: boolean): void {
  for (const h of [child, child.stdin, child.stdout] as Array<{ ref?: () => void; unref?: () => void }>)
    hold ? h?.ref?.() : h?.unref?.();
}
