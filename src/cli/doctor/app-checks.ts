import { getPrivateKey } from "@probot/get-private-key";
import { Probot, ProbotOctokit } from "probot";
import {
  appAuthFix,
  appPermissionsCheck,
  type CheckResult,
  failed,
  type PublicUrlProbe,
  passed,
  publicUrlCheck,
  RUN_PERMISSIONS,
  skipped,
  stateCheck,
  TOKEN_MINT_FIX,
  warned,
  webhookSecretCheck,
} from "../../core/doctor.ts";
import { StateCorruptError } from "../../core/state-doc.ts";
import { getAppIdentity } from "../../github/app-identity.ts";
import { githubAppOverOctokit, githubForToken, type OctokitClient } from "../../github/octokit-port.ts";
import type { GitHub, GitHubApp, RepoRef } from "../../github/port.ts";
import { readFleetConfig } from "../../github/read-config.ts";
import { createRepoStateStore } from "../../state/repo-store.ts";
import { DEFAULT_STATE_BRANCH } from "../../state/store.ts";

/** Where the app's runs exchange their OIDC token (src/app/actions-token.ts serves it). */
export const ACTIONS_TOKEN_PATH = "/fleet/actions-token";

/** The app's settings as `fleet serve` reads them (environment, then `.env`). */
export interface AppSettings {
  appId?: string;
  privateKey?: string;
  /** Why the key could not be read (a missing file, a value that is no PEM). */
  keyError?: string;
  webhookSecret?: string;
  publicUrl?: string;
  /** GitHub's REST API root (GitHub Enterprise Server's `/api/v3` from GHE_HOST). */
  baseUrl: string;
}

export function appSettingsFrom(env: NodeJS.ProcessEnv): AppSettings {
  let privateKey: string | undefined;
  let keyError: string | undefined;
  try {
    privateKey = getPrivateKey({ env })?.toString() || undefined;
  } catch (error) {
    keyError = (error as Error).message.replace(/^\[@probot\/get-private-key\] /, "");
  }
  return {
    ...(env.APP_ID ? { appId: env.APP_ID.trim() } : {}),
    ...(privateKey ? { privateKey } : {}),
    ...(keyError ? { keyError } : {}),
    ...(env.WEBHOOK_SECRET ? { webhookSecret: env.WEBHOOK_SECRET } : {}),
    ...(env.FLEET_PUBLIC_URL ? { publicUrl: env.FLEET_PUBLIC_URL.trim() } : {}),
    baseUrl: env.GHE_HOST
      ? `${env.GHE_PROTOCOL || "https"}://${env.GHE_HOST}/api/v3`
      : "https://api.github.com",
  };
}

/** GitHub's HTTP status; none when no answer came (Octokit reports a refused connection as a 500 without a response). */
const statusOf = (error: unknown): number | undefined => {
  const e = error as { status?: unknown; response?: unknown } | undefined;
  return typeof e?.status === "number" && e.status > 0 && e.response !== undefined ? e.status : undefined;
};
const messageOf = (error: unknown): string => {
  const e = error as Error & { status?: number; cause?: Error };
  const cause = e.cause?.message ? ` (${e.cause.message})` : "";
  return `${statusOf(error) ? `${e.status} ` : ""}${e.message}${cause}`.replace(/\s+/g, " ").trim();
};

/** The settings' own checks: an app id and a readable key (no request yet). */
function settingsChecks(s: AppSettings): CheckResult[] {
  const checks: CheckResult[] = [];
  if (!s.appId)
    checks.push(
      failed(
        "app.id",
        "APP_ID",
        "not set (environment or .env)",
        "set APP_ID to the App ID on the GitHub App's settings page; on a machine that only runs workers, run `fleet doctor --worker`",
      ),
    );
  else if (!/^\d+$/.test(s.appId))
    checks.push(
      failed(
        "app.id",
        "APP_ID",
        `"${s.appId}" is not a number`,
        "APP_ID is the numeric App ID on the app's settings page",
      ),
    );
  else checks.push(passed("app.id", "APP_ID", s.appId));
  if (s.keyError)
    checks.push(
      failed(
        "app.key",
        "private key",
        s.keyError,
        "set PRIVATE_KEY_PATH to the .pem file generated on the app's settings page (or PRIVATE_KEY to its contents)",
      ),
    );
  else if (!s.privateKey)
    checks.push(
      failed(
        "app.key",
        "private key",
        "neither PRIVATE_KEY nor PRIVATE_KEY_PATH is set",
        "generate a private key on the app's settings page and set PRIVATE_KEY_PATH to the .pem file",
      ),
    );
  else checks.push(passed("app.key", "private key", "read"));
  return checks;
}

/** The app's JWT client, through Probot's own auth (what `fleet serve` uses); no retries: the doctor wants the first answer. */
async function appClient(s: AppSettings): Promise<{ probot: Probot; octokit: OctokitClient }> {
  const probot = new Probot({
    appId: Number(s.appId),
    privateKey: s.privateKey!,
    baseUrl: s.baseUrl,
    logLevel: "fatal",
    Octokit: ProbotOctokit.defaults((instance: Record<string, unknown>) => ({
      ...instance,
      throttle: { ...(instance.throttle as object), enabled: false },
      retry: { ...(instance.retry as object), enabled: false },
    })),
  });
  return { probot, octokit: (await probot.auth()) as OctokitClient };
}

/** An installed repository and a client of its installation. */
export interface InstalledRepo {
  full: string;
  repo: RepoRef;
  github: GitHub;
}

/**
 * GET /app, then a token for each installation with the permissions a task's run gets (the mint a run
 * depends on), and the repositories each token reaches; `enough`, given each installation's
 * repositories in turn, may end the walk early (`fleet serve`'s start needs no more than it asks).
 */
async function credentialChecks(
  s: AppSettings,
  enough?: (repos: InstalledRepo[]) => Promise<boolean>,
): Promise<{ checks: CheckResult[]; repos?: InstalledRepo[] }> {
  const checks: CheckResult[] = [];
  let app: GitHubApp;
  try {
    const { octokit } = await appClient(s);
    const me = await getAppIdentity(octokit);
    checks.push(
      passed(
        "app.credentials",
        "GitHub App",
        `${me.name} (${me.slug}, id ${me.id}${me.owner ? `, owned by ${me.owner}` : ""}) at ${s.baseUrl}`,
      ),
    );
    checks.push(appPermissionsCheck(me.permissions));
    app = githubAppOverOctokit(octokit);
  } catch (error) {
    checks.push(
      failed(
        "app.credentials",
        "GitHub App",
        `${s.baseUrl} refused GET /app: ${messageOf(error)}`,
        appAuthFix(statusOf(error)),
      ),
    );
    return { checks };
  }
  let installations: Array<{ id: number }>;
  try {
    installations = await app.listInstallations();
  } catch (error) {
    checks.push(failed("app.installations", "installations", messageOf(error), appAuthFix(statusOf(error))));
    return { checks };
  }
  if (installations.length === 0) {
    checks.push(
      warned(
        "app.installations",
        "installations",
        "the app is installed nowhere yet",
        "install it on the repositories Fleet should work on (the app's page -> Install App)",
      ),
    );
    return { checks, repos: [] };
  }
  const repos: InstalledRepo[] = [];
  let walked = 0;
  for (const { id } of installations) {
    walked += 1;
    try {
      // The permissions a run gets: a permission the installation has not accepted fails here, not at a run.
      const { token } = await app.createInstallationToken(id, { permissions: { ...RUN_PERMISSIONS } });
      const github = await githubForToken({
        token,
        baseUrl: s.baseUrl,
        userAgent: "fleet-doctor",
        log: quiet,
      });
      const found = (await github.listInstallationRepositories()).map((r) => ({
        full: `${r.owner.login}/${r.name}`,
        repo: { owner: r.owner.login, repo: r.name },
        github,
      }));
      repos.push(...found);
      if (enough && (await enough(found))) break;
    } catch (error) {
      checks.push(
        failed(
          "app.token",
          "installation token",
          `no token for installation ${id} with ${Object.keys(RUN_PERMISSIONS).join(", ")}: write: ${messageOf(error)}`,
          statusOf(error) === 422 ? TOKEN_MINT_FIX : appAuthFix(statusOf(error)),
        ),
      );
      return { checks };
    }
  }
  checks.push(
    passed(
      "app.installations",
      "installations",
      `${installations.length} installation${installations.length === 1 ? "" : "s"}, ${repos.length} repositor${repos.length === 1 ? "y" : "ies"}${walked < installations.length ? ` in the first ${walked}` : ""}`,
    ),
  );
  checks.push(
    passed(
      "app.token",
      "installation token",
      `minted with ${Object.keys(RUN_PERMISSIONS).join(", ")}: write (what a task's run gets)`,
    ),
  );
  return { checks, repos };
}

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * Each installed repository's `.github/fleet.yml`: the invalid ones, and those using dispatch: actions.
 * With `firstActionsOnly`, stops at the first repository that uses actions (all `fleet serve` needs to
 * know whether it needs a public URL).
 */
async function configChecks(
  repos: readonly InstalledRepo[],
  firstActionsOnly: boolean,
): Promise<{ checks: CheckResult[]; actionsRepos: string[] }> {
  const actionsRepos: string[] = [];
  const invalid: string[] = [];
  for (const r of repos) {
    const load = await readFleetConfig(r.github, r.repo).catch(
      (error) =>
        ({ ok: false, problems: [{ path: ".github/fleet.yml", message: messageOf(error) }] }) as const,
    );
    if (!load.ok) {
      invalid.push(`${r.full} (${load.problems[0]?.path}: ${load.problems[0]?.message})`);
      continue;
    }
    if (load.config.dispatch === "actions") {
      actionsRepos.push(r.full);
      if (firstActionsOnly) break;
    }
  }
  const title = ".github/fleet.yml";
  const checks = invalid.length
    ? [
        failed(
          "app.config",
          title,
          `invalid in ${invalid.length} repositor${invalid.length === 1 ? "y" : "ies"}: ${invalid.slice(0, 3).join("; ")}`,
          "fix the file on the repository's default branch (`fleet config show --repo owner/name` lists every problem); until then Fleet refuses that repository's tasks",
        ),
      ]
    : firstActionsOnly
      ? []
      : [
          passed(
            "app.config",
            title,
            `valid in ${repos.length} repositor${repos.length === 1 ? "y" : "ies"}`,
          ),
        ];
  return { checks, actionsRepos };
}

/** GET <url>/fleet/actions-token: Fleet answers 405 and names the path. */
export async function probePublicUrl(url: string, timeoutMs = 10_000): Promise<PublicUrlProbe> {
  try {
    const res = await fetch(`${url.replace(/\/$/, "")}${ACTIONS_TOKEN_PATH}`, {
      signal: AbortSignal.timeout(timeoutMs),
      redirect: "manual",
    });
    return { status: res.status, body: (await res.text()).slice(0, 2000) };
  } catch (error) {
    const e = error as Error & { cause?: Error & { code?: string } };
    return { error: e.cause?.code ?? e.cause?.message ?? e.message };
  }
}

/** Each installed repository's state branch, read as the app reads it (at most `limit` repositories). */
async function stateChecks(repos: readonly InstalledRepo[], limit: number): Promise<CheckResult[]> {
  const checks: CheckResult[] = [];
  for (const r of repos.slice(0, limit)) checks.push(await readState(r.full, r.github, r.repo));
  if (repos.length > limit)
    checks.push(
      passed(
        "state.more",
        "state branches",
        `${repos.length - limit} more repositories not read (--state-limit)`,
      ),
    );
  return checks;
}

/** One repository's state branch, through the store Fleet uses (git by default, FLEET_STATE_TRANSPORT=api). */
export async function readState(full: string, github: GitHub, repo: RepoRef): Promise<CheckResult> {
  try {
    const store = createRepoStateStore({ github, owner: repo.owner, repo: repo.repo });
    const snap = await store.read({ why: "doctor" });
    return stateCheck(full, DEFAULT_STATE_BRANCH, {
      tasks: Object.keys(snap.doc.tasks).length,
      exists: snap.version !== "",
    });
  } catch (error) {
    const status = statusOf(error);
    return stateCheck(full, DEFAULT_STATE_BRANCH, {
      error: messageOf(error),
      corrupt: error instanceof StateCorruptError,
      ...(status ? { status } : {}),
    });
  }
}

export interface AppCheckOptions {
  /** Probe FLEET_PUBLIC_URL (the doctor: yes; `fleet serve` before it listens: no). */
  probe: boolean;
  /** Read the state branch of at most this many installed repositories (0: none). */
  stateLimit: number;
  /** `fleet serve`'s start: no more installations and configs than it needs (see appChecks), no config line. */
  quick?: boolean;
}

/** The app's side: its settings, its credentials against GitHub, the webhook secret, the public URL, the state branches. */
export async function appChecks(s: AppSettings, o: AppCheckOptions): Promise<CheckResult[]> {
  const checks = settingsChecks(s);
  const settled = checks.every((c) => c.status === "ok");
  // `fleet serve`'s start: with FLEET_PUBLIC_URL one installation's token is enough; without it, the
  // installations until one repository is found using dispatch: actions.
  const quickActions: string[] = [];
  const enough = !o.quick
    ? undefined
    : s.publicUrl
      ? async () => true
      : async (repos: InstalledRepo[]) => {
          quickActions.push(...(await configChecks(repos, true)).actionsRepos);
          return quickActions.length > 0;
        };
  const creds = settled ? await credentialChecks(s, enough) : { checks: [] };
  checks.push(...creds.checks);
  checks.push(webhookSecretCheck(s.webhookSecret));
  const why = settled ? "no installation token" : "the app's settings failed";
  if (!creds.repos) checks.push(skipped("app.config", ".github/fleet.yml", `not read: ${why}`));
  const configs =
    creds.repos && !o.quick
      ? await configChecks(creds.repos, false)
      : { checks: [], actionsRepos: quickActions };
  checks.push(...configs.checks);
  const probe =
    o.probe && s.publicUrl && /^https?:\/\//.test(s.publicUrl)
      ? await probePublicUrl(s.publicUrl)
      : undefined;
  checks.push(
    !creds.repos && !s.publicUrl
      ? skipped("app.public-url", "FLEET_PUBLIC_URL", `not set; whether it is needed is not known (${why})`)
      : publicUrlCheck({
          url: s.publicUrl,
          actionsRepos: configs.actionsRepos,
          ...(probe ? { probe } : {}),
          tokenPath: ACTIONS_TOKEN_PATH,
        }),
  );
  if (o.stateLimit > 0)
    checks.push(
      ...(creds.repos
        ? await stateChecks(creds.repos, o.stateLimit)
        : [skipped("state.app", "state branches", `not read: ${why}`)]),
    );
  return checks;
}
