import { spawnSync } from "node:child_process";
import { constants } from "node:fs";
import { access, lstat, mkdir, open, readdir, readlink, realpath, rm, stat } from "node:fs/promises";
import { homedir } from "node:os";
import { basename, delimiter, dirname, isAbsolute, join, resolve, sep } from "node:path";
import type { SandboxMode } from "../../core/config.ts";
import { fleetInstallRoot } from "./install-root.ts";

// How agent runs are contained (`sandbox` in .github/fleet.yml): `bubblewrap`, each run in its own
// bubblewrap sandbox (Linux); `none`, a plain child process with the worker's view (chosen explicitly).
export type { SandboxMode };

/** What one agent run may see. Paths are absolute host paths, mounted at the same path inside. */
export interface SandboxMounts {
  /** Read-write: the worktree (work phase), the agent's notes folder and its private HOME. */
  writable: string[];
  /** Read-only: the worktree in a plan phase, the git data the worktree needs. */
  readOnly: string[];
  /** Emptied with a tmpfs (after readOnly): e.g. the other tasks' worktree admin folders. */
  hidden?: string[];
  /** Read-only, mounted after `hidden` (e.g. this worktree's own admin folder inside a hidden one). */
  readOnlyAfter?: string[];
  /**
   * Read-only, each host `source` shown at `target` (mounted last, over the writable HOME): the worker
   * user's own files of the agent's coder with `home: inherit` (see `inheritedHomePaths`).
   */
  homeOverlay?: Array<{ source: string; target: string }>;
}

/** The bwrap binary could not run a sandbox here; the message says what to install or configure. */
export class SandboxUnavailableError extends Error {
  override readonly name = "SandboxUnavailableError";
}

/** System folders the agent's tools need, read-only (symlinks such as /bin -> usr/bin are recreated). */
const SYSTEM_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt/hostedtoolcache"];

/**
 * The few files of /etc that programs need to run (users, name resolution, TLS roots but not private
 * keys, shared-library cache, the alternatives links /usr/bin points into). The rest of /etc (shadow,
 * ssh host keys, /etc/ssl/private, the system git config with its credential helpers, npmrc tokens)
 * stays out.
 */
const ETC_FILES = [
  "alternatives",
  "bash.bashrc",
  "ca-certificates",
  "ca-certificates.conf",
  "group",
  "host.conf",
  "hosts",
  "inputrc",
  "ld.so.cache",
  "ld.so.conf",
  "ld.so.conf.d",
  "localtime",
  "mime.types",
  "nsswitch.conf",
  "os-release",
  "passwd",
  "pki/tls/certs",
  "pki/ca-trust/extracted",
  "profile",
  "resolv.conf",
  "ssl/certs",
  "ssl/openssl.cnf",
  "terminfo",
  "timezone",
];

const exists = (p: string) =>
  access(p).then(
    () => true,
    () => false,
  );

/** Where Fleet's own npm dependencies put their executables (the coders' CLIs among them). */
export const fleetBinDir = (): string => join(fleetInstallRoot(), "node_modules", ".bin");

/**
 * A coder's CLI: on PATH first (the operator's choice wins), else the one installed with Fleet (its
 * dependencies include the coders' npm CLIs), so a fresh install needs no PATH change.
 */
export async function findCoderCli(binary: string, path: string | undefined): Promise<string | undefined> {
  return (await resolveExecutable(binary, path)) ?? (await resolveExecutable(binary, fleetBinDir()));
}

/** Finds `file` on PATH as execvp would (absolute or relative paths are taken as they are). */
export async function resolveExecutable(file: string, path: string | undefined): Promise<string | undefined> {
  if (file.includes("/")) return (await exists(file)) ? file : undefined;
  for (const dir of (path ?? "").split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, file);
    try {
      await access(candidate, constants.X_OK);
      if ((await stat(candidate)).isFile()) return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/**
 * Read-only paths an agent CLI needs besides the system: the package it comes from (and, for an npm
 * package, its platform-specific siblings such as `@openai/codex-linux-x64`, which hold the native
 * binary), or the executable alone when it is no npm package; and the interpreter named on its `#!`
 * line when that lives outside the system folders (see `interpreterMounts`). Nothing that is, or
 * holds, one of `forbidden` (the worker's HOME, Fleet's folders): a narrower path is mounted instead.
 */
export async function executableMounts(executable: string, forbidden: readonly string[]): Promise<string[]> {
  const real = await realpath(executable);
  const mounts = new Set<string>();
  const pkg = npmPackageRoot(real);
  if (pkg && !holdsAny(pkg, forbidden)) {
    const parent = dirname(pkg);
    const name = basename(pkg);
    for (const sibling of await readdir(parent).catch(() => [] as string[])) {
      const path = join(parent, sibling);
      if ((sibling === name || sibling.startsWith(`${name}-`)) && !holdsAny(path, forbidden))
        mounts.add(path);
    }
  } else if (!underSystem(real)) {
    mounts.add(real);
  }
  const interpreter = await shebangInterpreter(real);
  if (interpreter) for (const m of await interpreterMounts(interpreter, forbidden)) mounts.add(m);
  return [...mounts];
}

/**
 * What an interpreter outside the system folders needs (e.g. /opt/node-v24/bin/node): its whole install
 * prefix (npm and npx with it), unless the prefix is, holds or lies inside a forbidden folder, as
 * `~/bin/node`, `~/.local/bin/node` or an nvm install would make it HOME, ~/.local or a folder of
 * HOME: then the interpreter binary alone, and npm's own package from the prefix when it has one.
 */
export async function interpreterMounts(
  interpreter: string,
  forbidden: readonly string[],
): Promise<string[]> {
  const real = await realpath(interpreter).catch(() => interpreter);
  if (underSystem(real)) return [];
  const prefix = dirname(dirname(real));
  if (prefix !== sep && !holdsAny(prefix, forbidden) && !insideAny(prefix, forbidden)) return [prefix];
  const npm = join(prefix, "lib", "node_modules", "npm");
  return [real, ...((await exists(npm)) && !holdsAny(npm, forbidden) ? [npm] : [])];
}

/** Whether `path` lies inside one of `roots` (not one of them). */
function insideAny(path: string, roots: readonly string[]): boolean {
  const p = resolve(path);
  return roots.some((root) => p.startsWith(`${resolve(root)}${sep}`));
}

/**
 * Folders no sandbox is shown, nor any folder holding one: the worker user's HOME (~/.ssh, ~/.npmrc,
 * logins), `$FLEET_HOME` and the work folder (state, other tasks, logs), Fleet's install (the app's
 * `.env` and key), and on a runner its workspace (the checkout's persisted token) and temp folder.
 */
export function forbiddenFolders(workDir: string): string[] {
  const env = process.env;
  const found = [
    homedir(),
    env.HOME,
    env.FLEET_HOME,
    workDir,
    fleetInstallRoot(),
    env.GITHUB_WORKSPACE,
    env.RUNNER_TEMP,
  ];
  return [
    ...new Set(
      found.filter((p): p is string => typeof p === "string" && p !== "" && p !== sep).map((p) => resolve(p)),
    ),
  ];
}

/** Whether `path` is one of `roots` or a folder holding one of them. */
export function holdsAny(path: string, roots: readonly string[]): boolean {
  const p = resolve(path);
  return roots.some((root) => {
    const r = resolve(root);
    return r === p || r.startsWith(p === sep ? sep : `${p}${sep}`);
  });
}

const underSystem = (p: string) => SYSTEM_DIRS.some((d) => p === d || p.startsWith(`${d}${sep}`));

/** `.../node_modules/<name>` or `.../node_modules/@scope/<name>` containing `file`, if any. */
function npmPackageRoot(file: string): string | undefined {
  const parts = file.split(sep);
  const at = parts.lastIndexOf("node_modules");
  if (at < 0 || at + 1 >= parts.length - 1) return undefined;
  const scoped = parts[at + 1]!.startsWith("@");
  const end = at + (scoped ? 3 : 2);
  if (end > parts.length - 1) return undefined;
  return parts.slice(0, end).join(sep) || undefined;
}

/** The interpreter of a `#!` script (`/usr/bin/env node` is looked up on PATH), or undefined. */
async function shebangInterpreter(file: string): Promise<string | undefined> {
  let head: string;
  try {
    const fh = await open(file, "r");
    try {
      const buf = Buffer.alloc(256);
      const { bytesRead } = await fh.read(buf, 0, 256, 0);
      head = buf.subarray(0, bytesRead).toString("latin1");
    } finally {
      await fh.close();
    }
  } catch {
    return undefined;
  }
  if (!head.startsWith("#!")) return undefined;
  const words = head.slice(2).split("\n")[0]!.trim().split(/\s+/);
  const program = words[0] === "/usr/bin/env" ? words.find((w, i) => i > 0 && !w.startsWith("-")) : words[0];
  if (!program) return undefined;
  const found = isAbsolute(program) ? program : await resolveExecutable(program, process.env.PATH);
  return found ? realpath(found).catch(() => undefined) : undefined;
}

/**
 * Each coder's own files in its user's HOME (its login, settings, memory file, skills and commands):
 * all that `home: inherit` shows its agent of the worker user's HOME, read-only. Files and folders
 * one by one, not the CLI's whole folder: the CLIs write their sessions and state beside them (Claude
 * Code's Bash tool fails on a read-only ~/.claude), and that stays in the private HOME. Never ~/.ssh,
 * another coder's files or anything else.
 */
export const INHERITED_HOME_PATHS: Readonly<Record<string, readonly string[]>> = {
  claude: [
    ".claude.json",
    ".claude/.credentials.json",
    ".claude/settings.json",
    ".claude/CLAUDE.md",
    ".claude/skills",
    ".claude/agents",
    ".claude/commands",
    ".claude/plugins",
  ],
  codex: [".codex/auth.json", ".codex/config.toml", ".codex/AGENTS.md", ".codex/prompts"],
  // Not ~/.gemini/settings.json: Fleet writes its own there (usage statistics off).
  gemini: [
    ".gemini/oauth_creds.json",
    ".gemini/google_accounts.json",
    ".gemini/GEMINI.md",
    ".gemini/extensions",
  ],
  // Not the folder itself: opencode writes a .gitignore and installs its plugin package there.
  opencode: [
    ".config/opencode/opencode.json",
    ".config/opencode/opencode.jsonc",
    ".config/opencode/config.json",
    ".config/opencode/AGENTS.md",
    ".config/opencode/agent",
    ".config/opencode/command",
    ".local/share/opencode/auth.json",
  ],
  // Where agy keeps its sign-in is not known here (no run of agy recorded): nothing is inherited.
  agy: [],
};

/**
 * The `homeOverlay` of a `home: inherit` run: each of the coder's paths that exists in `userHome`,
 * shown read-only at the same place in the agent's private HOME (its mount point made there first).
 */
export async function inheritedHomeMounts(
  coder: string,
  userHome: string,
  agentHome: string,
): Promise<Array<{ source: string; target: string }>> {
  const mounts: Array<{ source: string; target: string }> = [];
  for (const rel of INHERITED_HOME_PATHS[coder] ?? []) {
    const source = await realpath(join(userHome, rel)).catch(() => undefined);
    const info = source ? await stat(source).catch(() => undefined) : undefined;
    if (!source || !info) continue;
    const target = join(agentHome, rel);
    // The private HOME is the agent's (kept across its runs): a symlink it left on the way is not
    // followed, and that path is then not inherited; neither when something else holds the name.
    const made = await makeInside(agentHome, rel, info.isDirectory() ? "dir" : "file", {
      replace: false,
    }).catch(() => false);
    if (!made) continue;
    mounts.push({ source, target });
  }
  return mounts;
}

/**
 * Makes `rel` inside `root` (a folder an agent can write: its private HOME) a plain folder or file
 * without following anything the agent left there: every component is checked with lstat and made
 * with mkdir (which never follows), the file with O_CREAT|O_EXCL|O_NOFOLLOW. A symlink, or an entry of
 * the wrong kind, on the way is removed with `replace` (the link itself, never what it points at), and
 * otherwise refused (false). Without `replace` an existing plain file or folder of the right kind is
 * kept as it is (a mount point); with it, the file is always made anew, holding `content`.
 * For use while no agent process runs in `root` (between runs).
 */
export async function makeInside(
  root: string,
  rel: string,
  kind: "file" | "dir",
  opts: { replace: boolean; content?: string },
): Promise<boolean> {
  const parts = rel.split(sep).filter((p) => p !== "" && p !== ".");
  if (isAbsolute(rel) || parts.length === 0 || parts.includes("..")) {
    throw new Error(`${rel} is not a path inside ${root}`);
  }
  const top = await lstat(root);
  if (!top.isDirectory()) throw new Error(`${root} is not a folder`);
  let dir = root;
  for (const [i, part] of parts.entries()) {
    const path = join(dir, part);
    const last = i === parts.length - 1;
    const wantDir = !last || kind === "dir";
    const info = await lstat(path).catch(() => undefined);
    const fits = info && (wantDir ? info.isDirectory() : info.isFile());
    if (info && (!fits || (last && !wantDir && opts.replace))) {
      if (!opts.replace) return false;
      await rm(path, { recursive: true, force: true });
    }
    if (wantDir) {
      if (!fits) await mkdir(path, { mode: 0o700 });
    } else if (!fits || opts.replace) {
      const fh = await open(
        path,
        constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
        0o600,
      );
      try {
        await fh.writeFile(opts.content ?? "");
      } finally {
        await fh.close();
      }
    }
    dir = path;
  }
  return true;
}

/**
 * bwrap's arguments for one agent run, up to and including `--`: an empty root with the system
 * folders and a few /etc files read-only, a fresh /proc in a new PID namespace (the agent sees none
 * of the worker's processes, so no `/proc/<pid>/environ` of an ancestor), a minimal /dev, a private
 * /tmp, and only the given paths of the host. The sandbox dies with the worker (`--die-with-parent`).
 * The network is the run's (`extra`: see sandbox-network.ts). No path that is, or holds, one of
 * `forbidden` is ever shown (the worker's HOME, $FLEET_HOME, Fleet's install). Nothing secret goes into these arguments: the sandbox's pid 1 shows them in /proc/1/cmdline.
 */
export async function bubblewrapArgs(
  mounts: SandboxMounts,
  cwd: string,
  opts: { forbidden?: readonly string[]; extra?: readonly string[]; tmpfsBytes?: number } = {},
): Promise<string[]> {
  const shown = [
    ...mounts.readOnly,
    ...mounts.writable,
    ...(mounts.readOnlyAfter ?? []),
    ...(mounts.homeOverlay ?? []).map((o) => o.source),
  ];
  const exposed = shown.find((p) => holdsAny(p, opts.forbidden ?? []));
  if (exposed)
    throw new Error(
      `refusing to show the agent ${exposed}: it is, or holds, the worker's HOME or one of Fleet's folders`,
    );
  const args = [
    "--die-with-parent",
    // A user namespace of its own even for a root worker: bwrap run by root otherwise leaves the agent
    // every capability (remount the read-only mounts, write /proc/sys). No capability inside, no
    // further user namespaces, and a session of its own (no TIOCSTI into a terminal).
    "--unshare-user",
    "--disable-userns",
    "--cap-drop",
    "ALL",
    "--new-session",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--hostname",
    "fleet-sandbox",
  ];
  for (const dir of SYSTEM_DIRS) {
    const info = await lstat(dir).catch(() => undefined);
    if (!info) continue;
    if (info.isSymbolicLink()) args.push("--symlink", await readlink(dir), dir);
    else args.push("--ro-bind", dir, dir);
  }
  for (const name of ETC_FILES) args.push("--ro-bind-try", `/etc/${name}`, `/etc/${name}`);
  // The kernel's knobs stay read-only (core_pattern would run a program as host root).
  args.push("--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys");
  args.push("--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger");
  // A private /tmp, bounded (its files are memory; the run's cgroup counts them too where it has one).
  const size = opts.tmpfsBytes ? ["--size", String(opts.tmpfsBytes)] : [];
  args.push("--dev", "/dev", ...size, "--tmpfs", "/tmp", ...size, "--tmpfs", "/var/tmp");
  args.push(...(opts.extra ?? []));
  for (const p of mounts.readOnly) args.push("--ro-bind", p, p);
  for (const p of mounts.writable) args.push("--bind", p, p);
  for (const p of mounts.hidden ?? []) args.push("--tmpfs", p);
  for (const p of mounts.readOnlyAfter ?? []) args.push("--ro-bind", p, p);
  for (const o of mounts.homeOverlay ?? []) args.push("--ro-bind", o.source, o.target);
  args.push("--chdir", cwd, "--");
  return args;
}

/** The remedy printed when bubblewrap is missing or cannot start a sandbox. */
export const SANDBOX_REMEDY =
  "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; it must be able to create namespaces: as a non-root user on Ubuntu 24.04 set `kernel.apparmor_restrict_unprivileged_userns=0` or add an AppArmor profile for bwrap), or set `sandbox: none` in .github/fleet.yml to run agents without one";

let checked: Promise<void> | undefined;

/**
 * Fails with a clear error when `mode` is `bubblewrap` and bwrap cannot start a sandbox on this host;
 * checked once per process (a worker checks at start, not at each task).
 */
export function assertSandboxAvailable(mode: SandboxMode): Promise<void> {
  if (mode === "none") return Promise.resolve();
  checked ??= (async () => {
    const probe = spawnSync(
      "bwrap",
      [
        ...(await bubblewrapArgs({ writable: [], readOnly: [] }, "/")),
        "/bin/sh",
        "-c",
        // Contained as promised: no capability left, the kernel's knobs read-only.
        // (access(2) only: a probe never writes a kernel setting, even on a host where it could.)
        'grep -q "^CapEff:[[:space:]]*0*$" /proc/self/status && ! test -w /proc/sys/kernel/core_pattern',
      ],
      { encoding: "utf8", timeout: 15_000, env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } },
    );
    if (probe.error) {
      const missing = (probe.error as NodeJS.ErrnoException).code === "ENOENT";
      throw new SandboxUnavailableError(
        `${missing ? "bubblewrap (bwrap) is not installed on this machine" : `bwrap could not be started (${probe.error.message})`}: agents run in a bubblewrap sandbox by default; ${SANDBOX_REMEDY}.`,
      );
    }
    if (probe.status !== 0) {
      const said = (probe.stderr ?? "").trim().split("\n").slice(-2).join(" ");
      throw new SandboxUnavailableError(
        `bwrap is installed but cannot create a sandbox here (${said || `exit ${probe.status}`}): ${SANDBOX_REMEDY}.`,
      );
    }
  })();
  const result = checked;
  // A failed check is not cached: the operator may install bwrap and try again in the same process.
  result.catch(() => {
    if (checked === result) checked = undefined;
  });
  return result;
}
