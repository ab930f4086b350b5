import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { GitObjectReader } from "./git-object-reader.ts";

export interface GitIdentity {
  name: string;
  email: string;
  date?: Date;
}

export interface CommitInfo {
  sha: string;
  tree: string;
  parents: string[];
  author: { name: string; email: string; date: string };
  committer: { name: string; email: string; date: string };
  message: string;
}

export interface TreeEntry {
  mode: string;
  type: "blob" | "tree" | "commit";
  sha: string;
  size?: number;
  path: string;
}

// Never read the user's or the system's git config: results must not depend on the machine.
const gitEnv = { GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null", GIT_TERMINAL_PROMPT: "0" };
const identity = ["-c", "user.name=GitHub Emulator", "-c", "user.email=emulator@github-emulator.invalid"];

/**
 * A ref name as the files ref store keeps it, under refs/ (what readRef reads itself): parts of
 * letters, digits and `-_.`, none empty; `..`, `@{`, control characters and the like go to git.
 */
const STORED_REF = /^refs(\/[A-Za-z0-9_.-]+)+$/;

/** A bare repository driven through the git CLI; the emulator's only store of git data. */
export class GitRepo {
  private lock: Promise<unknown> = Promise.resolve();
  readonly gitDir: string;
  /** Reads (objects, and names resolved to them) through one long-lived git process. */
  private readonly objects: GitObjectReader;
  private refStoreIsFiles?: Promise<boolean>;

  constructor(gitDir: string) {
    this.gitDir = gitDir;
    this.objects = new GitObjectReader(gitDir, gitEnv);
  }

  /** Ends the repository's reader process (the emulator's stop). */
  close(): void {
    this.objects.close();
  }

  /** Serializes writes so compare-and-swap checks and the ref update they guard are atomic. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.lock.then(fn, fn);
    this.lock = run.catch(() => undefined);
    return run;
  }

  async git(
    args: string[],
    opts: { input?: string | Buffer; env?: Record<string, string>; reject?: boolean } = {},
  ) {
    return execa("git", [...identity, "-C", this.gitDir, ...args], {
      env: { ...gitEnv, ...opts.env },
      extendEnv: true,
      input: opts.input,
      reject: opts.reject ?? true,
      stripFinalNewline: true,
    });
  }

  async gitBuffer(args: string[]): Promise<Buffer> {
    const r = await execa("git", [...identity, "-C", this.gitDir, ...args], {
      env: gitEnv,
      encoding: "buffer",
      stripFinalNewline: false,
    });
    return Buffer.from(r.stdout);
  }

  static async init(gitDir: string, defaultBranch: string): Promise<GitRepo> {
    await execa("git", ["init", "--bare", "-q", "-b", defaultBranch, gitDir], { env: gitEnv });
    const repo = new GitRepo(gitDir);
    // Lets a push to this bare repository be reported to the emulator (push webhooks, PR sync).
    await repo.git(["config", "receive.denyNonFastForwards", "false"]);
    return repo;
  }

  async writeBlob(content: Buffer | string): Promise<string> {
    const r = await this.git(["hash-object", "-w", "--stdin"], { input: content });
    return r.stdout.trim();
  }

  async readBlob(sha: string): Promise<Buffer> {
    if (!plainName(sha)) return this.gitBuffer(["cat-file", "blob", sha]);
    const o = await this.objects.contents(sha);
    if (o?.type !== "blob") throw new Error(`git cat-file blob ${sha}: not a blob of ${this.gitDir}`);
    return o.data;
  }

  async objectType(sha: string): Promise<string | undefined> {
    if (noName(sha)) return undefined;
    if (!plainName(sha)) {
      const r = await this.git(["cat-file", "-t", sha], { reject: false });
      return r.exitCode === 0 ? r.stdout.trim() : undefined;
    }
    return (await this.objects.info(sha))?.type;
  }

  async objectSize(sha: string): Promise<number> {
    if (!plainName(sha)) return Number((await this.git(["cat-file", "-s", sha])).stdout.trim());
    const o = await this.objects.info(sha);
    if (!o) throw new Error(`git cat-file -s ${sha}: no such object in ${this.gitDir}`);
    return o.size;
  }

  /** Sha of a full ref name (`refs/heads/main`), or undefined when it does not exist. */
  async resolveRef(ref: string): Promise<string | undefined> {
    if (noName(ref)) return undefined;
    if (plainName(ref)) return (await this.objects.info(ref))?.sha;
    const r = await this.git(["rev-parse", "--verify", "-q", ref], { reject: false });
    return r.exitCode === 0 ? r.stdout.trim() : undefined;
  }

  /** Resolves a branch, tag or sha the way `?ref=` does on GitHub, to a commit sha. */
  async resolveCommitish(ref: string): Promise<string | undefined> {
    if (noName(ref)) return undefined;
    const plain = plainName(ref);
    for (const cand of [`refs/heads/${ref}`, `refs/tags/${ref}`, ref]) {
      if (plain) {
        const o = await this.objects.info(`${cand}^{commit}`);
        if (o) return o.sha;
        continue;
      }
      const r = await this.git(["rev-parse", "--verify", "-q", `${cand}^{commit}`], { reject: false });
      if (r.exitCode === 0) return r.stdout.trim();
    }
    return undefined;
  }

  /**
   * One full ref name exactly (no DWIM, no prefix match), or undefined when it does not exist. A plain
   * name is read from the ref store's files as git writes them (a loose file, else `packed-refs`), with
   * no process; anything else (a symbolic ref, a name git would refuse) asks `for-each-ref`.
   */
  async readRef(ref: string): Promise<{ ref: string; sha: string; type: string } | undefined> {
    const exactly = async () => (await this.listRefs(ref)).find((x) => x.ref === ref);
    if (
      !(await this.filesRefStore()) ||
      !STORED_REF.test(ref) ||
      ref.includes("..") ||
      ref.split("/").some((part) => part.startsWith(".") || part.endsWith(".lock"))
    )
      return exactly();
    const loose = await readFile(join(this.gitDir, ref), "utf8").catch((e: NodeJS.ErrnoException) =>
      // Not a file: no loose ref by that name (a folder is the prefix of longer names).
      ["ENOENT", "ENOTDIR", "EISDIR"].includes(e.code ?? "") ? undefined : Promise.reject(e),
    );
    let sha: string | undefined;
    if (loose !== undefined) {
      sha = /^([0-9a-f]{40})\n?$/.exec(loose)?.[1];
      if (!sha) return exactly();
    } else {
      const packed = await readFile(join(this.gitDir, "packed-refs"), "utf8").catch(
        (e: NodeJS.ErrnoException) => (e.code === "ENOENT" ? "" : Promise.reject(e)),
      );
      // "<sha> <ref>" lines; "# pack-refs" headers and "^<sha>" peeled lines are no refs.
      for (const line of packed.split("\n"))
        if (
          line.length === 41 + ref.length &&
          line.endsWith(` ${ref}`) &&
          /^[0-9a-f]{40}$/.test(line.slice(0, 40))
        )
          sha = line.slice(0, 40);
      if (!sha) return undefined;
    }
    const type = (await this.objects.info(sha))?.type;
    return type ? { ref, sha, type } : exactly();
  }

  /**
   * Whether refs are kept as files and objects named by SHA-1, which readRef reads itself: not with
   * `extensions.refStorage` (reftable) or `extensions.objectFormat` (SHA-256), which git's
   * GIT_DEFAULT_REF_FORMAT and GIT_DEFAULT_HASH choose at init. Read from the config once.
   */
  private filesRefStore(): Promise<boolean> {
    this.refStoreIsFiles ??= readFile(join(this.gitDir, "config"), "utf8").then(
      (text) => !/^\s*(refstorage|objectformat)\s*=/im.test(text),
      () => false,
    );
    return this.refStoreIsFiles;
  }

  async listRefs(prefix = "refs/"): Promise<Array<{ ref: string; sha: string; type: string }>> {
    const r = await this.git(["for-each-ref", "--format=%(refname) %(objectname) %(objecttype)", prefix]);
    return r.stdout
      .split("\n")
      .filter(Boolean)
      .map((line) => {
        const [ref, sha, type] = line.split(" ");
        return { ref: ref!, sha: sha!, type: type! };
      });
  }

  /** Atomic at git level too: `old` of "" means the ref must not exist yet. */
  async updateRef(ref: string, sha: string, old?: string): Promise<boolean> {
    const args = ["update-ref", ref, sha];
    if (old !== undefined) args.push(old === "" ? "0".repeat(40) : old);
    const r = await this.git(args, { reject: false });
    return r.exitCode === 0;
  }

  async deleteRef(ref: string): Promise<boolean> {
    const r = await this.git(["update-ref", "-d", ref], { reject: false });
    return r.exitCode === 0;
  }

  async isAncestor(ancestor: string, descendant: string): Promise<boolean> {
    if (noName(ancestor) || noName(descendant)) return false;
    if (!plainName(ancestor) || !plainName(descendant)) {
      const r = await this.git(["merge-base", "--is-ancestor", ancestor, descendant], { reject: false });
      return r.exitCode === 0;
    }
    const [a, d] = await Promise.all([
      this.objects.info(`${ancestor}^{commit}`),
      this.objects.info(`${descendant}^{commit}`),
    ]);
    if (!a || !d) return false;
    // The usual case, a branch moved ahead by a few commits, is walked through the reader; a history
    // longer than that is left to git.
    let frontier = [d.sha];
    const seen = new Set<string>();
    while (frontier.length && seen.size < 200) {
      const next: string[] = [];
      for (const sha of frontier) {
        if (sha === a.sha) return true;
        if (seen.has(sha)) continue;
        seen.add(sha);
        next.push(...((await this.readCommit(sha))?.parents ?? []));
      }
      frontier = next;
    }
    if (!frontier.length) return false;
    const r = await this.git(["merge-base", "--is-ancestor", a.sha, d.sha], { reject: false });
    return r.exitCode === 0;
  }

  async readCommit(sha: string): Promise<CommitInfo | undefined> {
    if (noName(sha)) return undefined;
    // The commit's text without its final line feed, as git prints it.
    let raw: string;
    if (plainName(sha)) {
      // `^{commit}`: a tag is read as the commit it names, as `git cat-file commit` does.
      const o = await this.objects.contents(`${sha}^{commit}`);
      if (!o) return undefined;
      raw = o.data.toString("utf8").replace(/\r?\n$/, "");
    } else {
      const r = await this.git(["cat-file", "commit", sha], { reject: false });
      if (r.exitCode !== 0) return undefined;
      raw = r.stdout;
    }
    const split = raw.indexOf("\n\n");
    const header = split >= 0 ? raw.slice(0, split) : raw;
    const message = split >= 0 ? raw.slice(split + 2) : "";
    let tree = "";
    const parents: string[] = [];
    const people: Record<string, { name: string; email: string; date: string }> = {};
    for (const line of header.split("\n")) {
      const [key, ...rest] = line.split(" ");
      const value = rest.join(" ");
      if (key === "tree") tree = value;
      else if (key === "parent") parents.push(value);
      else if (key === "author" || key === "committer") {
        const m = /^(.*) <(.*)> (\d+) ([+-]\d{4})$/.exec(value);
        if (m)
          people[key] = {
            name: m[1]!,
            email: m[2]!,
            date: new Date(Number(m[3]) * 1000).toISOString().replace(".000Z", "Z"),
          };
      }
    }
    const blank = { name: "", email: "", date: new Date(0).toISOString() };
    return {
      sha,
      tree,
      parents,
      author: people.author ?? blank,
      committer: people.committer ?? blank,
      message,
    };
  }

  async commitTree(input: {
    tree: string;
    parents: string[];
    message: string;
    author: GitIdentity;
    committer?: GitIdentity;
  }): Promise<string> {
    const committer = input.committer ?? input.author;
    const fmt = (d?: Date) => `${Math.floor((d ?? new Date()).getTime() / 1000)} +0000`;
    const args = ["commit-tree", input.tree, ...input.parents.flatMap((p) => ["-p", p]), "-F", "-"];
    const r = await this.git(args, {
      input: input.message,
      env: {
        GIT_AUTHOR_NAME: input.author.name,
        GIT_AUTHOR_EMAIL: input.author.email,
        GIT_AUTHOR_DATE: fmt(input.author.date),
        GIT_COMMITTER_NAME: committer.name,
        GIT_COMMITTER_EMAIL: committer.email,
        GIT_COMMITTER_DATE: fmt(committer.date),
      },
    });
    return r.stdout.trim();
  }

  /**
   * Entries of a tree (one level, or every blob with `recursive`), as `git ls-tree -l` lists them; with
   * `path`, the entry at that path itself.
   */
  async lsTree(treeish: string, opts: { recursive?: boolean; path?: string } = {}): Promise<TreeEntry[]> {
    if (noName(treeish) || noName(opts.path ?? "")) return [];
    // One level is read through the long-lived reader; a whole tree, or a name it cannot take, by
    // `git ls-tree` itself.
    if (!opts.recursive && plainTreeish(treeish) && (opts.path === undefined || plainPath(opts.path)))
      return this.listLevel(treeish, opts.path);
    return this.lsTreeOnce(treeish, opts);
  }

  private async listLevel(treeish: string, path?: string): Promise<TreeEntry[]> {
    if (path === undefined) return (await this.treeEntries(treeish)) ?? [];
    const slash = path.lastIndexOf("/");
    const dir = slash < 0 ? "" : path.slice(0, slash);
    const name = path.slice(slash + 1);
    const base = dir ? underTree(treeish, dir) : treeish;
    const entry = (await this.treeEntries(base))?.find((e) => e.path === name);
    return entry ? [{ ...entry, path }] : [];
  }

  /** A tree's entries with their blobs' sizes, read from the tree object itself; undefined when none. */
  private async treeEntries(name: string): Promise<TreeEntry[] | undefined> {
    // `<rev>:<path>` names the object at the path; a commit or tag is peeled to its tree.
    const tree = await this.objects.contents(name.includes(":") ? name : `${name}^{tree}`);
    if (tree?.type !== "tree") return undefined;
    const entries: TreeEntry[] = [];
    const data = tree.data;
    for (let at = 0; at < data.length; ) {
      const space = data.indexOf(32, at);
      const nul = data.indexOf(0, space);
      const mode = data.subarray(at, space).toString("latin1");
      const sha = data.subarray(nul + 1, nul + 21).toString("hex");
      const type = mode === "40000" ? "tree" : mode === "160000" ? "commit" : "blob";
      entries.push({
        mode: mode.padStart(6, "0"),
        type,
        sha,
        size: undefined,
        path: data.subarray(space + 1, nul).toString("utf8"),
      });
      at = nul + 21;
    }
    await Promise.all(
      entries
        .filter((e) => e.type === "blob")
        .map(async (e) => {
          e.size = (await this.objects.info(e.sha))?.size;
        }),
    );
    return entries;
  }

  private async lsTreeOnce(
    treeish: string,
    opts: { recursive?: boolean; path?: string },
  ): Promise<TreeEntry[]> {
    const args = ["ls-tree", "-z", "-l"];
    if (opts.recursive) args.push("-r", "-t");
    args.push(treeish);
    if (opts.path !== undefined) args.push("--", opts.path);
    const r = await this.git(args, { reject: false });
    if (r.exitCode !== 0) return [];
    return r.stdout
      .split("\0")
      .filter(Boolean)
      .map((line) => {
        const tab = line.indexOf("\t");
        const [mode, type, sha, size] = line.slice(0, tab).split(/\s+/);
        return {
          mode: mode!,
          type: type as TreeEntry["type"],
          sha: sha!,
          size: size === "-" ? undefined : Number(size),
          path: line.slice(tab + 1),
        };
      });
  }

  /**
   * Builds a tree from a base tree plus changes (nested paths allowed; `sha: null` deletes)
   * through a throwaway index file, which is how git itself nests trees.
   */
  async buildTree(
    base: string | undefined,
    changes: Array<{ path: string; mode: string; sha: string | null }>,
  ): Promise<string> {
    const dir = await mkdtemp(join(tmpdir(), "gh-emulator-index-"));
    const env = { GIT_INDEX_FILE: join(dir, "index") };
    try {
      if (base) await this.git(["read-tree", base], { env });
      // One `--index-info` call for every change: mode 0 removes a path.
      const lines = changes.map((c) =>
        c.sha === null ? `0 ${"0".repeat(40)}\t${c.path}` : `${c.mode} ${c.sha}\t${c.path}`,
      );
      if (lines.length)
        await this.git(["update-index", "--index-info"], { env, input: `${lines.join("\n")}\n` });
      for (const c of changes) {
        // Deleting a directory path removes everything beneath it.
        if (c.sha === null && base)
          await this.git(["rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", c.path], { env });
      }
      return (await this.git(["write-tree"], { env })).stdout.trim();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  /** A real three-way merge with no work tree; `conflicts` when git cannot merge cleanly. */
  async mergeTree(ours: string, theirs: string): Promise<{ tree: string } | { conflicts: true }> {
    const r = await this.git(["merge-tree", "--write-tree", "--no-messages", ours, theirs], {
      reject: false,
    });
    if (r.exitCode === 0) return { tree: r.stdout.split("\n")[0]!.trim() };
    if (r.exitCode === 1) return { conflicts: true };
    throw new Error(`git merge-tree failed: ${r.stderr}`);
  }

  async mergeBase(a: string, b: string): Promise<string | undefined> {
    const r = await this.git(["merge-base", a, b], { reject: false });
    return r.exitCode === 0 ? r.stdout.trim() : undefined;
  }

  async revList(range: string[]): Promise<string[]> {
    const r = await this.git(["rev-list", ...range], { reject: false });
    return r.exitCode === 0 ? r.stdout.split("\n").filter(Boolean) : [];
  }

  /**
   * Commits of a range, oldest first, with the files each touched, in one `git log` call
   * (push payloads need this on every ref move, so it must stay cheap).
   */
  async logWithFiles(
    range: string[],
    max: number,
  ): Promise<Array<CommitInfo & { files: Array<{ status: string; path: string }> }>> {
    const fmt = "%x1e%H%x1f%T%x1f%P%x1f%an%x1f%ae%x1f%aI%x1f%cn%x1f%ce%x1f%cI%x1f%B%x1f";
    const r = await this.git(
      [
        "log",
        "--reverse",
        `--max-count=${max}`,
        "--no-renames",
        "--name-status",
        "-z",
        `--format=${fmt}`,
        ...range,
      ],
      { reject: false },
    );
    if (r.exitCode !== 0) return [];
    const iso = (d: string) => new Date(d).toISOString().replace(".000Z", "Z");
    return r.stdout
      .split("\x1e")
      .filter(Boolean)
      .map((rec) => {
        const f = rec.split("\x1f");
        const [sha, tree, parents, an, ae, ad, cn, ce, cd, message] = f as [
          string,
          string,
          string,
          string,
          string,
          string,
          string,
          string,
          string,
          string,
        ];
        const rest = (f[10] ?? "")
          .split("\0")
          .map((x) => x.replace(/^\n/, ""))
          .filter(Boolean);
        const files: Array<{ status: string; path: string }> = [];
        for (let i = 0; i + 1 < rest.length; i += 2) files.push({ status: rest[i]!, path: rest[i + 1]! });
        return {
          sha,
          tree,
          parents: parents.split(" ").filter(Boolean),
          author: { name: an, email: ae, date: iso(ad) },
          committer: { name: cn, email: ce, date: iso(cd) },
          message: message.replace(/\n$/, ""),
          files,
        };
      });
  }

  async changedFiles(from: string, to: string): Promise<Array<{ status: string; path: string }>> {
    const r = await this.git(["diff", "--no-renames", "--name-status", "-z", from, to], { reject: false });
    const parts = r.stdout.split("\0").filter(Boolean);
    const out: Array<{ status: string; path: string }> = [];
    for (let i = 0; i + 1 < parts.length; i += 2) out.push({ status: parts[i]!, path: parts[i + 1]! });
    return out;
  }
}

/** The name of folder `dir` within `treeish`, which may itself name a folder (`<rev>:<path>`). */
function underTree(treeish: string, dir: string): string {
  if (!treeish.includes(":")) return `${treeish}:${dir}`;
  return treeish.endsWith(":") ? `${treeish}${dir}` : `${treeish}/${dir}`;
}

/**
 * A name the object reader is asked as is: a ref, an object id, `<rev>^{…}` peels added here. One
 * with a path (`:`), a reflog or upstream (`@{`), or a NUL or line break goes to git's own command
 * as before (some make `git cat-file --batch-command` stop, and git reads a name only up to a NUL).
 */
function plainName(name: string): boolean {
  return !/[:\0\n\r]|@\{/.test(name);
}

/** No object or ref is named with a NUL or a line break (git would read up to the NUL). */
function noName(name: string): boolean {
  return /[\0\n\r]/.test(name);
}

/** `<rev>` or `<rev>:<path>` whose path is plain (see plainPath). */
function plainTreeish(treeish: string): boolean {
  const colon = treeish.indexOf(":");
  if (colon < 0) return plainName(treeish);
  const path = treeish.slice(colon + 1);
  return plainName(treeish.slice(0, colon)) && (path === "" || plainPath(path));
}

/** A path git would look up as written: no empty, `.` or `..` part (git normalises those). */
function plainPath(path: string): boolean {
  return path.split("/").every((part) => part !== "" && part !== "." && part !== "..");
}
