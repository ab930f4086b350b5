/**
 * `fleet doctor`'s verdicts: what each check found, and for each failure the fix. The probes (GitHub,
 * git, bwrap, cgroups, the coders' CLIs) do I/O and live in src/cli/doctor/; deciding a check's status
 * from what a probe found, and the report's lines, are here, once, for `fleet doctor`, `fleet serve`
 * and `fleet run` alike.
 */

export type CheckStatus = "ok" | "warn" | "fail" | "skip";

export interface CheckResult {
  /** Stable id scripts match on (`--json`), e.g. `app.credentials`. */
  id: string;
  /** What is checked, in words. */
  title: string;
  status: CheckStatus;
  /** What was found. */
  detail: string;
  /** What to do: set on every failure and warning. */
  fix?: string;
}

export const passed = (id: string, title: string, detail: string): CheckResult => ({
  id,
  title,
  status: "ok",
  detail,
});
export const failed = (id: string, title: string, detail: string, fix: string): CheckResult => ({
  id,
  title,
  status: "fail",
  detail,
  fix,
});
export const warned = (id: string, title: string, detail: string, fix: string): CheckResult => ({
  id,
  title,
  status: "warn",
  detail,
  fix,
});
export const skipped = (id: string, title: string, detail: string): CheckResult => ({
  id,
  title,
  status: "skip",
  detail,
});

const MARKS: Record<CheckStatus, string> = { ok: "ok  ", warn: "warn", fail: "FAIL", skip: "skip" };

/** One check as one line: its mark, what was checked, what was found and, when something is wrong, the fix. */
export function doctorLine(c: CheckResult): string {
  return `${MARKS[c.status]}  ${c.title}: ${c.detail}${c.fix ? ` -> fix: ${c.fix}` : ""}`;
}

/** The failures among `checks` (what stops `fleet serve` and `fleet run` at start). */
export const failures = (checks: readonly CheckResult[]): CheckResult[] =>
  checks.filter((c) => c.status === "fail");

/** Every check's line, then a count. */
export function doctorReport(checks: readonly CheckResult[]): string {
  const count = (s: CheckStatus) => checks.filter((c) => c.status === s).length;
  const parts = [
    `${count("ok")} ok`,
    ...(count("warn") ? [`${count("warn")} warning${count("warn") === 1 ? "" : "s"}`] : []),
    ...(count("fail") ? [`${count("fail")} failed`] : []),
    ...(count("skip") ? [`${count("skip")} skipped`] : []),
  ];
  return `${checks.map(doctorLine).join("\n")}\n\n${parts.join(", ")}\n`;
}

// ---- The app's side ----

/** How to fix GitHub refusing the app itself (`GET /app` with its JWT). */
export function appAuthFix(status: number | undefined): string {
  if (status === 401)
    return "APP_ID and the private key must be the same app's: APP_ID is the numeric App ID on the app's settings page, and the key a .pem generated there (PRIVATE_KEY_PATH, or PRIVATE_KEY with its newlines); generate a new key if the old one was revoked";
  if (status === 404)
    return "GitHub knows no app with this APP_ID at this API URL: check APP_ID, and GHE_HOST / GHE_PROTOCOL for GitHub Enterprise Server";
  if (status === undefined)
    return "the host must reach GitHub's API: check the network or proxy, and GHE_HOST / GHE_PROTOCOL for GitHub Enterprise Server";
  return "see GitHub's message; retry later if GitHub is having trouble (https://www.githubstatus.com)";
}

/** What a task's run is minted with (src/app/actions-token.ts), so what the app must hold: app.yml asks for these. */
export const RUN_PERMISSIONS = {
  contents: "write",
  issues: "write",
  pull_requests: "write",
  actions: "write",
} as const;

/** The permissions the app was registered with (`GET /app`) against what Fleet's runs use. */
export function appPermissionsCheck(held: Readonly<Record<string, string>>): CheckResult {
  const missing = Object.keys(RUN_PERMISSIONS).filter((p) => held[p] !== "write");
  if (missing.length)
    return failed(
      "app.permissions",
      "app permissions",
      `the app lacks ${missing.map((p) => `${p}: write`).join(", ")}`,
      TOKEN_MINT_FIX,
    );
  return passed(
    "app.permissions",
    "app permissions",
    `${Object.keys(RUN_PERMISSIONS).join(", ")}: write${held.workflows === "write" ? ", and workflows: write (agents' workflow changes need allow_workflow_changes: true as well)" : ""}`,
  );
}

/** How to fix an installation token GitHub would not mint with the permissions Fleet's runs use. */
export const TOKEN_MINT_FIX =
  "the app needs contents, issues, pull requests and actions: write (app.yml lists them): grant them on the app's settings page (Permissions & events), then accept the new permissions on each installation (Settings -> GitHub Apps -> Fleet -> Review request)";

export function webhookSecretCheck(secret: string | undefined): CheckResult {
  const title = "webhook secret";
  if (!secret)
    return failed(
      "app.webhook-secret",
      title,
      "WEBHOOK_SECRET is not set, so every delivery would be refused",
      "set WEBHOOK_SECRET (environment or .env) to the secret on the app's settings page (Webhook secret); set a new random one there if it is unknown",
    );
  return passed("app.webhook-secret", title, "WEBHOOK_SECRET is set");
}

/** What probing `<FLEET_PUBLIC_URL>/fleet/actions-token` found: its HTTP answer, or why there was none. */
export type PublicUrlProbe = { status: number; body: string } | { error: string };

const LOOPBACK = /^(localhost|127(\.\d+){3}|\[::1\])$/;

/**
 * Whether the app's URL, as runners reach it, is set and answers as Fleet's token exchange: needed as
 * soon as one installed repository uses `dispatch: actions` (the default).
 */
export function publicUrlCheck(o: {
  url: string | undefined;
  /** Installed repositories using dispatch: actions (owner/name). */
  actionsRepos: readonly string[];
  /** Undefined when it was not probed (not set, not a URL, or not asked for). */
  probe?: PublicUrlProbe;
  tokenPath: string;
}): CheckResult {
  const id = "app.public-url";
  const title = "FLEET_PUBLIC_URL";
  const some = o.actionsRepos.slice(0, 3).join(", ") + (o.actionsRepos.length > 3 ? ", ..." : "");
  const fix = `set FLEET_PUBLIC_URL to this app's https URL as the runners reach it (e.g. https://fleet.example.com, behind your TLS proxy); runs exchange their OIDC token at <FLEET_PUBLIC_URL>${o.tokenPath}`;
  if (!o.url) {
    if (o.actionsRepos.length === 0)
      return passed(id, title, "not set; no installed repository uses dispatch: actions");
    return failed(
      id,
      title,
      `not set, and ${o.actionsRepos.length} installed repositor${o.actionsRepos.length === 1 ? "y uses" : "ies use"} dispatch: actions (${some}): their runs could not get the app's token`,
      fix,
    );
  }
  let parsed: URL;
  try {
    parsed = new URL(o.url);
    if (parsed.protocol !== "https:" && parsed.protocol !== "http:") throw new Error(parsed.protocol);
  } catch {
    return failed(id, title, `"${o.url}" is not an http(s) URL`, fix);
  }
  if (!o.probe) return passed(id, title, `${o.url} (not probed)`);
  const where = `${o.url.replace(/\/$/, "")}${o.tokenPath}`;
  if ("error" in o.probe)
    return failed(
      id,
      title,
      `${where} did not answer (${o.probe.error})`,
      "the URL must reach this app from the runners: check DNS, the TLS proxy in front of `fleet serve` (HOST/PORT), and firewalls",
    );
  // Fleet's exchange answers a GET with 405 and says to POST: anything else is not Fleet behind that URL.
  if (o.probe.status !== 405 || !o.probe.body.includes(o.tokenPath))
    return failed(
      id,
      title,
      `${where} answered ${o.probe.status}, not as Fleet's token exchange`,
      "the URL must lead to this app (a proxy forwarding the whole path, not only /api/github/webhooks)",
    );
  if (parsed.protocol === "http:" && !LOOPBACK.test(parsed.hostname))
    return warned(
      id,
      title,
      `${o.url} answers, over plain http`,
      "serve it over https (a TLS proxy in front of fleet serve): runners send their OIDC token and get the app's token back",
    );
  return passed(id, title, `${o.url} answers as Fleet's token exchange`);
}

// ---- The worker's side ----

export function gitCheck(probe: { version: string } | { error: string }): CheckResult {
  if ("error" in probe)
    return failed(
      "host.git",
      "git",
      probe.error,
      "install git (Debian/Ubuntu: `apt-get install git`) and put it on PATH",
    );
  return passed("host.git", "git", probe.version);
}

export function sandboxCheck(
  mode: "bubblewrap" | "none",
  probe: { ok: true } | { error: string } | undefined,
): CheckResult {
  const title = "bubblewrap sandbox";
  if (mode === "none")
    return warned(
      "host.sandbox",
      title,
      "`sandbox: none` in .github/fleet.yml: agents run uncontained, with this worker's view of the machine",
      "remove `sandbox: none` once bubblewrap works here",
    );
  if (!probe || "error" in probe)
    return failed(
      "host.sandbox",
      title,
      probe ? probe.error : "not checked",
      "see the message: install bubblewrap and let it create user namespaces (docs/deploy.md lists the sysctls and container capabilities)",
    );
  return passed("host.sandbox", title, "bwrap starts a sandbox with no capability and /proc/sys read-only");
}

/** Which network forwarder each sandbox starts before its agent: perl's where this machine's perl has what it uses. */
export function forwarderCheck(kind: "perl" | "node"): CheckResult {
  const title = "sandbox network forwarder";
  if (kind === "node")
    return warned(
      "host.forwarder",
      title,
      "node's: /usr/bin/perl with its Socket module was not found, so each sandbox starts node's forwarder (~0.1 s more CPU and ~13 MB more memory per sandbox than perl's)",
      "install perl (Debian/Ubuntu: `apt-get install perl-base`)",
    );
  return passed("host.forwarder", title, "perl's (/usr/bin/perl)");
}

/** What the node flags of `fleet serve` or `fleet run` come to on this machine (src/cli/doctor/node-flags.ts). */
export interface NodeFlagsProbe {
  command: "serve" | "run";
  /** FLEET_SERVE_NODE_FLAGS or FLEET_RUN_NODE_FLAGS. */
  variable: string;
  /** The variable is set (its flags replace the command's own). */
  given: boolean;
  /** The flags the command would run with; undefined when the variable is refused (`error`). */
  flags?: readonly string[];
  /** Why the variable is refused (a word that is not a flag, a flag that makes node do something else). */
  error?: string;
  /** What node said refusing the flags (a flag it does not know). */
  refused?: string;
  /** This node can start itself again with flags (process.execve, not Windows). */
  restarts: boolean;
  node: string;
  platform: string;
}

/** Whether `fleet serve`/`fleet run` will start, and on which node flags (scripts/node-flags.mjs, bin/fleet.js). */
export function nodeFlagsCheck(p: NodeFlagsProbe): CheckResult {
  const id = `${p.command === "serve" ? "app" : "host"}.node-flags`;
  const title = `node flags of \`fleet ${p.command}\``;
  const fix = `fix ${p.variable} (node's flags separated by spaces, e.g. --max-old-space-size=512) or unset it for Fleet's own`;
  const flags = p.flags ?? [];
  const shown = flags.length ? flags.join(" ") : "none (node's defaults)";
  const from = p.given ? `from ${p.variable}` : `Fleet's own; ${p.variable} unset`;
  // Where node cannot start again with flags, `fleet` runs the command as it is: nothing to refuse.
  if (!p.restarts)
    return flags.length || p.given
      ? warned(
          id,
          title,
          `not applied: ${p.platform === "win32" ? "on Windows" : `node ${p.node} has no process.execve`}, so \`fleet ${p.command}\` runs on node's defaults`,
          p.platform === "win32"
            ? "run Fleet on Linux or macOS for its node flags (or leave them: it runs on node's defaults)"
            : "run Fleet on Node 22.15 or later (24 is what it is tested on)",
        )
      : passed(id, title, shown);
  if (p.error) return failed(id, title, p.error, fix);
  if (p.refused) return failed(id, title, `node refuses the flags in ${p.variable}: ${p.refused}`, fix);
  return passed(id, title, `${shown} (${from})`);
}

export function cgroupCheck(found: { kind: string; why?: string }): CheckResult {
  const title = "cgroup limits";
  if (found.kind === "none")
    return warned(
      "host.cgroups",
      title,
      `not enforced: ${found.why ?? "no writable cgroup"}; runs get no memory, process or CPU limit`,
      "run the worker as a systemd service with Delegate=yes (cgroup v2) or as root; in a container, give it a writable cgroup (docs/deploy.md)",
    );
  return passed(
    "host.cgroups",
    title,
    `enforced with ${found.kind === "cgroup2" ? "cgroup v2" : "cgroup v1"}`,
  );
}

/** What was found of one coder on this worker. */
export interface CoderProbe {
  coder: string;
  binary: string;
  /** The CLI's path, when found: on PATH, else in Fleet's install (as a run finds it). */
  path?: string;
  /** Found in Fleet's install, not on PATH. */
  installedWithFleet?: boolean;
  /** Fleet's install's executables folder, looked in when the CLI is not on PATH. */
  fleetBin?: string;
  /** Its `--version`, when it ran. */
  version?: string;
  /** Why it did not run, when found but failing. */
  runError?: string;
  /** The variables `coders.<coder>.credentials` names (plus the CLI's own), in order. */
  credentialNames: readonly string[];
  /** The first of them with a value here. */
  credentialFound?: string;
  /** The npm package the CLI installs from, when it is on npm. */
  npmPackage?: string;
}

/**
 * A coder is usable here when its CLI runs and one of its credentials is set. Half set up (a CLI
 * without a credential or the other way round) fails: its tasks would fail at their first run. Neither
 * is a warning: this worker is not meant for that coder, but its tasks would still land here.
 */
export function coderCheck(p: CoderProbe): CheckResult {
  const id = `coder.${p.coder}`;
  const title = `coder ${p.coder}`;
  const install = p.npmPackage
    ? `install it: \`npm install -g ${p.npmPackage}\``
    : `put its \`${p.binary}\` CLI on PATH`;
  const names = p.credentialNames.join(" or ");
  const setCredential = `set ${names} in this worker's environment (the model API key or login token)`;
  const off = `or turn it off for this repository: \`coders: { ${p.coder}: { enabled: false } }\` in .github/fleet.yml`;
  const cli = p.path
    ? p.runError
      ? `${p.binary} at ${p.path} does not run (${p.runError})`
      : `${p.binary} ${p.version ?? ""}`.trim() + (p.installedWithFleet ? " (installed with Fleet)" : "")
    : `${p.binary} not found on PATH${p.fleetBin ? ` or in Fleet's install (${p.fleetBin})` : ""}`;
  const credential = p.credentialFound ? `credential ${p.credentialFound} set` : `no ${names} set`;
  const usableCli = p.path !== undefined && !p.runError;
  if (usableCli && p.credentialFound) return passed(id, title, `${cli}, ${credential}`);
  if (!usableCli && !p.credentialFound)
    return warned(
      id,
      title,
      `${cli}, ${credential}: its tasks would fail on this worker`,
      `${install} and ${setCredential}, ${off}`,
    );
  if (!usableCli)
    return failed(
      id,
      title,
      `${cli}, ${credential}`,
      p.runError ? `reinstall it (${install.replace(/^install it: /, "")})` : install,
    );
  return failed(id, title, `${cli}, ${credential}`, setCredential);
}

/** At least one coder must be usable, and the one split labels run (`default_coder`) should be. */
export function codersSummary(checks: readonly CheckResult[], defaultCoder: string): CheckResult | undefined {
  const usable = checks.filter((c) => c.status === "ok").map((c) => c.id.replace(/^coder\./, ""));
  if (usable.length === 0)
    return failed(
      "coder.any",
      "coders",
      "no coder is usable on this worker: every task would fail",
      "install a coder's CLI and set its credential (e.g. `npm install -g @anthropic-ai/claude-code` and ANTHROPIC_API_KEY)",
    );
  if (!usable.includes(defaultCoder) && checks.some((c) => c.id === `coder.${defaultCoder}`))
    return warned(
      "coder.default",
      "default coder",
      `default_coder is ${defaultCoder}, which is not usable here (usable: ${usable.join(", ")})`,
      `set it up here, or set default_coder to one of ${usable.join(", ")} in .github/fleet.yml`,
    );
  return undefined;
}

/** Reading the repository's state branch. */
export function stateCheck(
  where: string,
  branch: string,
  probe: { tasks: number; exists: boolean } | { error: string; corrupt?: boolean; status?: number },
): CheckResult {
  const id = `state.read:${where}`;
  const title = `state branch (${where})`;
  if ("error" in probe) {
    const fix = probe.corrupt
      ? `the state document on ${branch} does not parse: fix or revert the last commit on ${branch}, or delete the branch to start over`
      : probe.status === 401 || probe.status === 403
        ? "the token must read the repository's contents (a fine-grained token: Contents read and write; the app: contents: write)"
        : probe.status === 404
          ? "check the repository name and that the token (or the app's installation) can see it"
          : `${branch} must be readable over git (git on PATH, the host reachable) or the REST API (FLEET_STATE_TRANSPORT=api)`;
    return failed(id, title, `${branch} could not be read: ${probe.error}`, fix);
  }
  return passed(
    id,
    title,
    probe.exists
      ? `${branch} read: ${probe.tasks} task${probe.tasks === 1 ? "" : "s"}`
      : `${branch} is not there yet (created at the first task)`,
  );
}
