import { type ChildProcess, spawn } from "node:child_process";

/** What `git cat-file` says of an object: its id, type and size, and with `contents` its bytes. */
export interface ObjectInfo {
  sha: string;
  type: string;
  size: number;
}

type Pending = {
  line: string;
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
  /** What arrived since `buffered` was last joined, and how many bytes the oldest answer needs. */
  private arriving: Buffer[] = [];
  private arrivingBytes = 0;
  private needed = 1;

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
    if (child) holdOpen(child, false);
    child?.stdin?.end();
    this.fail(new Error("the object reader was closed"));
  }

  private ask(command: string, name: string, withContents: boolean) {
    // The protocol is a line per command, and git reads a name up to a NUL: such a name cannot be
    // asked (no object or ref has one).
    if (/[\n\r\0]/.test(name)) return Promise.resolve(undefined);
    return new Promise<(ObjectInfo & { data?: Buffer }) | undefined>((resolve, reject) => {
      this.send({ line: `${command} ${name}\n`, withContents, resolve, reject });
    });
  }

  private send(p: Pending): void {
    const child = this.child ?? this.start();
    if (this.pending.length === 0) holdOpen(child, true);
    this.pending.push(p);
    child.stdin!.write(p.line);
  }

  private start(): ChildProcess {
    const child = spawn("git", ["-C", this.gitDir, "cat-file", "--batch-command"], {
      env: { ...process.env, ...this.env },
      stdio: ["pipe", "pipe", "ignore"],
    });
    this.child = child;
    this.buffered = Buffer.alloc(0);
    this.arriving = [];
    this.arrivingBytes = 0;
    this.needed = 1;
    holdOpen(child, false);
    child.stdout!.on("data", (chunk: Buffer) => {
      // A closed or replaced process's late answer belongs to no read of the new one.
      if (this.child !== child) return;
      // Joined once the oldest answer can be whole: a large blob arrives in many chunks.
      this.arriving.push(chunk);
      this.arrivingBytes += chunk.length;
      if (this.buffered.length + this.arrivingBytes < this.needed) return;
      this.buffered = Buffer.concat([this.buffered, ...this.arriving]);
      this.arriving = [];
      this.arrivingBytes = 0;
      this.drain();
    });
    const ended = (why: string) => {
      if (this.child !== child) return;
      this.child = undefined;
      // A name git cannot take ends the process (`fatal: …`): git answers in order, so it is the oldest
      // read's. That read fails; the ones behind it are asked again of a new process.
      const [culprit, ...rest] = this.pending.splice(0);
      holdOpen(child, false);
      this.buffered = Buffer.alloc(0);
      culprit?.reject(new Error(`git cat-file in ${this.gitDir} ${why}`));
      for (const p of rest) this.send(p);
    };
    child.on("error", (e) => ended(`could not run: ${e.message}`));
    // "close", not "exit": by then every answer it wrote has been read.
    child.on("close", (code, signal) => ended(`ended (${signal ?? code})`));
    child.stdin!.on("error", () => undefined);
    return child;
  }

  /** Answers the oldest reads whose whole answer has arrived. */
  private drain(): void {
    this.answer();
    if (this.pending.length === 0 && this.child) holdOpen(this.child, false);
  }

  private answer(): void {
    this.needed = 1;
    while (this.pending.length) {
      const eol = this.buffered.indexOf(10);
      if (eol < 0) {
        this.needed = this.buffered.length + 1;
        return;
      }
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
      if (this.buffered.length < end + 1) {
        this.needed = end + 1;
        return;
      }
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
