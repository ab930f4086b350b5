import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import type { Auth } from "./auth.ts";
import { delayOf, type Faults } from "./faults.ts";
import { HttpError } from "./http-error.ts";
import { grantHolds, grantReaches } from "./installation-token.ts";
import { SequencedLog } from "./request-log.ts";
import { hookRules } from "./rulesets.ts";
import { type Actor, atLeast, type EmulatorState, type Repo } from "./state.ts";
import { holds } from "./workflow-token.ts";

/** One git smart-HTTP request (clone, fetch or push); kept apart from the REST request log. */
export interface GitRequest {
  at: number;
  seq: number;
  method: string;
  path: string;
  /** `git-upload-pack` (fetch) or `git-receive-pack` (push). */
  service: string;
  status: number;
  actor: string;
}

/** Git-over-HTTP requests: not REST requests, so they spend no REST or content-creation limit. */
export class GitRequestLog extends SequencedLog<GitRequest> {
  /** `fetches` are upload-pack requests, `pushes` receive-pack ones (advertisements included). */
  counts(filter: { since?: number } = {}) {
    const rows = this.after(filter.since);
    const fetches = rows.filter((e) => e.service === "git-upload-pack").length;
    return { total: rows.length, fetches, pushes: rows.length - fetches };
  }
}

/** Fault route names of the git smart-HTTP endpoints, for `faults.inject({ route })`. */
export const GIT_INFO_REFS_ROUTE = "GET /{owner}/{repo}.git/info/refs";
export const GIT_UPLOAD_PACK_ROUTE = "POST /{owner}/{repo}.git/git-upload-pack";
export const GIT_RECEIVE_PACK_ROUTE = "POST /{owner}/{repo}.git/git-receive-pack";
export const GIT_ROUTES = [GIT_INFO_REFS_ROUTE, GIT_UPLOAD_PACK_ROUTE, GIT_RECEIVE_PACK_ROUTE] as const;

const GIT_PATH = /^\/([^/]+)\/([^/]+?)\.git\/(info\/refs|git-upload-pack|git-receive-pack)$/;

/** The git smart-HTTP endpoint a path names, if it names one. */
export function matchGitHttp(pathname: string): { owner: string; repo: string; op: string } | undefined {
  const m = GIT_PATH.exec(pathname);
  return m ? { owner: decodeURIComponent(m[1]!), repo: decodeURIComponent(m[2]!), op: m[3]! } : undefined;
}

export interface GitHttpDeps {
  state: EmulatorState;
  auth: Auth;
  dataDir: string;
  log: GitRequestLog;
  /** The REST pipeline's faults; git routes take only the faults that name them. */
  faults?: Faults;
  /** Ref updates a push made ("<before> <after> <ref>" lines), reported before the push's response ends. */
  onPush: (repo: Repo, lines: string, actor: Actor) => Promise<void>;
}

/** The token of a git request: HTTP Basic with the token as password (any user name), or `token X`. */
function credentials(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const basic = /^basic\s+(\S+)$/i.exec(header.trim());
  if (!basic) return header;
  const decoded = Buffer.from(basic[1]!, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  const password = colon >= 0 ? decoded.slice(colon + 1) : decoded;
  // An empty password is what git sends when it has none: treat it as no credentials.
  return password === "" ? undefined : `token ${password}`;
}

const actorLogin = (a: Actor): string =>
  a.kind === "user" || a.kind === "installation" ? a.user.login : a.kind;

type GitTarget = { owner: string; repo: string; op: string };

/** Who may do what, as GitHub answers it: 401 asks for credentials, 404 hides a repository, 403 refuses a push. */
function authorize(d: GitHttpDeps, req: IncomingMessage, owner: string, name: string, push: boolean) {
  const unauthorized = new HttpError(
    401,
    "Invalid username or token.",
    {},
    { "www-authenticate": 'Basic realm="GitHub"' },
  );
  let actor: Actor;
  try {
    actor = d.auth.actor(credentials(req.headers.authorization));
  } catch {
    throw unauthorized;
  }
  const repo = d.state.repo(owner, name);
  if (actor.kind === "app") throw unauthorized;
  if (actor.kind === "anonymous") {
    // Public repositories can be cloned without credentials; everything else asks for them.
    if (!repo || repo.private || push) throw unauthorized;
    return { repo, actor };
  }
  const notFound = new HttpError(404, "Repository not found.");
  if (!repo) throw notFound;
  const denied = () =>
    new HttpError(403, `Permission to ${repo.fullName}.git denied to ${actor.user.login}.`);
  const level = push ? "write" : "read";
  if (actor.kind === "installation") {
    if (actor.installationId !== repo.installationId) throw notFound;
    // A GITHUB_TOKEN reaches its own repository only, and pushes with `contents: write`.
    if (actor.workflow) {
      if (actor.workflow.repo.toLowerCase() !== repo.fullName.toLowerCase()) throw notFound;
      if (!holds(actor.workflow, "contents", level)) throw denied();
    }
    // The app's token reaches the repositories it was created for, with `contents` to fetch and push.
    if (actor.grant) {
      if (!grantReaches(actor.grant, repo)) throw notFound;
      if (!grantHolds(actor.grant, "contents", level)) throw denied();
    }
    return { repo, actor };
  }
  const p = d.state.permission(repo, actor.user.login);
  if (p === "none") throw notFound;
  if (push && !atLeast(p, "write")) throw denied();
  return { repo, actor };
}

/**
 * What the pre-receive hook (repositories.ts) checks for this pusher: the rulesets that hold it, and
 * whether it may change workflow files. An app's token needs `workflows` for that, and a job's
 * GITHUB_TOKEN never has it ("refusing to allow a GitHub App to create or update workflow ... without
 * `workflows` permission": https://docs.github.com/en/rest/authentication/permissions-required-for-github-apps#repository-permissions-for-workflows).
 */
function pushChecks(repo: Repo, actor: Actor): Record<string, string> {
  const env: Record<string, string> = {};
  const rules = hookRules(repo, actorLogin(actor));
  if (rules) env.GH_EMULATOR_RULES = rules;
  if (actor.kind === "installation") {
    const workflows = actor.grant ? grantHolds(actor.grant, "workflows", "write") : !actor.workflow;
    if (!workflows) env.GH_EMULATOR_NO_WORKFLOWS = "1";
  }
  return env;
}

/** A fault injected for this git route (after its latency): the status, text and headers to answer. */
async function injectedFault(d: GitHttpDeps, method: string, op: string) {
  const fault = d.faults?.take(method, `/{owner}/{repo}.git/${op}`, { wildcard: false });
  await delayOf(fault);
  if (!fault?.status) return undefined;
  const limited = fault.status === 403 || fault.status === 429;
  const message = limited
    ? "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
    : fault.status >= 500
      ? "Server Error"
      : "Injected fault";
  const headers: Record<string, string> =
    fault.retryAfter !== undefined ? { "retry-after": String(fault.retryAfter) } : {};
  return { status: fault.status, message, headers };
}

/** The CGI environment of `git http-backend` for one request; a clean one, without the emulator's GIT_* variables. */
function cgiEnvironment(
  d: GitHttpDeps,
  req: IncomingMessage,
  repo: Repo,
  target: GitTarget,
  query: URLSearchParams,
  remoteUser: string,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith("GIT_")) env[k] = v;
  Object.assign(env, {
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_PROJECT_ROOT: d.dataDir,
    GIT_HTTP_EXPORT_ALL: "1",
    PATH_INFO: `/${relative(d.dataDir, repo.git.gitDir)}/${target.op}`,
    QUERY_STRING: query.toString(),
    REQUEST_METHOD: (req.method ?? "GET").toUpperCase(),
    CONTENT_TYPE: req.headers["content-type"] ?? "",
    // http-backend enables receive-pack only for an authenticated user.
    REMOTE_USER: remoteUser,
    REMOTE_ADDR: req.socket.remoteAddress ?? "",
  });
  if (req.headers["content-encoding"]) env.HTTP_CONTENT_ENCODING = String(req.headers["content-encoding"]);
  if (req.headers["content-length"]) env.CONTENT_LENGTH = String(req.headers["content-length"]);
  if (req.headers["git-protocol"]) env.GIT_PROTOCOL = String(req.headers["git-protocol"]);
  return env;
}

/** Where a CGI response's header block ends (CRLF or LF blank line), or -1 while it has not. */
function cgiHeaderEnd(head: Buffer): number {
  const crlf = head.indexOf("\r\n\r\n");
  const lf = head.indexOf("\n\n");
  return crlf >= 0 && (lf < 0 || crlf < lf) ? crlf + 4 : lf >= 0 ? lf + 2 : -1;
}

/** A CGI header block: its `Status` and the HTTP headers to send. */
function cgiHeaders(block: string): { status: number; headers: Record<string, string> } {
  let status = 200;
  const headers: Record<string, string> = {};
  for (const line of block.split(/\r?\n/)) {
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    const key = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (key === "status") status = Number.parseInt(value, 10) || 500;
    else headers[key] = value;
  }
  return { status, headers };
}

/**
 * Runs `git http-backend` with the request as its input and streams its answer back (headers from
 * its CGI header block). Resolves when it exits, leaving the response open for the caller to end.
 */
function runHttpBackend(
  req: IncomingMessage,
  res: ServerResponse,
  env: Record<string, string>,
  log: (status: number) => void,
): Promise<{ headersDone: boolean; code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn("git", ["http-backend"], { env, stdio: ["pipe", "pipe", "pipe"] });
    let head = Buffer.alloc(0);
    let headersDone = false;
    let stderr = "";
    child.stderr.on("data", (c: Buffer) => {
      stderr += c.toString("utf8");
    });
    child.stdin.on("error", () => {});
    req.pipe(child.stdin);
    child.stdout.on("data", (chunk: Buffer) => {
      if (headersDone) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = cgiHeaderEnd(head);
      if (end < 0) return;
      headersDone = true;
      const { status, headers } = cgiHeaders(head.subarray(0, end).toString("latin1"));
      log(status);
      res.writeHead(status, headers);
      const rest = head.subarray(end);
      if (rest.length) res.write(rest);
    });
    child.on("error", (e) => {
      stderr += e.message;
    });
    child.on("close", (code) => resolve({ headersDone, code, stderr }));
  });
}

/**
 * Serves `info/refs`, `git-upload-pack` and `git-receive-pack` by running `git http-backend` as a CGI,
 * with GitHub's rules: HTTP Basic with a token, read access to fetch, write access to push.
 */
export function createGitHttpHandler(d: GitHttpDeps) {
  return async function handle(
    req: IncomingMessage,
    res: ServerResponse,
    target: GitTarget,
    query: URLSearchParams,
  ): Promise<void> {
    const method = (req.method ?? "GET").toUpperCase();
    const service = target.op === "info/refs" ? (query.get("service") ?? "") : target.op;
    const path = `/${target.owner}/${target.repo}.git/${target.op}`;
    let actorName = "anonymous";
    const log = (status: number) => d.log.add({ method, path, service, status, actor: actorName });
    const fail = (status: number, message: string, headers: Record<string, string> = {}) => {
      log(status);
      req.resume();
      res.writeHead(status, { "content-type": "text/plain; charset=utf-8", ...headers });
      res.end(`${message}\n`);
    };

    if (service !== "git-upload-pack" && service !== "git-receive-pack")
      return fail(403, "Only the smart HTTP protocol is supported.");
    const expected = target.op === "info/refs" ? "GET" : "POST";
    if (method !== expected) return fail(405, `Use ${expected} for ${target.op}.`);

    let repo: Repo;
    let actor: Actor;
    try {
      ({ repo, actor } = authorize(d, req, target.owner, target.repo, service === "git-receive-pack"));
    } catch (e) {
      const err = e as HttpError;
      return fail(err.status, err.message, err.headers);
    }
    actorName = actorLogin(actor);

    const fault = await injectedFault(d, method, target.op);
    if (fault) return fail(fault.status, fault.message, fault.headers);

    const env = cgiEnvironment(d, req, repo, target, query, actorName);
    let pushFile: string | undefined;
    if (target.op === "git-receive-pack") {
      // The post-receive hook writes its lines here; the emulator reports them as the token's actor.
      pushFile = join(await mkdtemp(join(tmpdir(), "gh-emulator-push-")), "lines");
      env.GH_EMULATOR_PUSH_FILE = pushFile;
      Object.assign(env, pushChecks(repo, actor));
    }
    const { headersDone, code, stderr } = await runHttpBackend(req, res, env, log);
    if (pushFile) {
      const lines = await readFile(pushFile, "utf8").catch(() => "");
      await rm(dirname(pushFile), { recursive: true, force: true });
      if (lines)
        await d
          .onPush(repo, lines, actor)
          .catch((e) => process.stderr.write(`[github-emulator] push report failed: ${e}\n`));
    }
    if (headersDone) {
      res.end();
      return;
    }
    process.stderr.write(`[github-emulator] git http-backend failed (${code}): ${stderr}\n`);
    if (!res.headersSent) fail(500, "git http-backend failed");
    else res.end();
  };
}
