import { createHash, type KeyObject, randomBytes, randomUUID, sign, timingSafeEqual } from "node:crypto";
import { processKeyPair } from "./auth.ts";
import type { EmulatorState, Repo, WorkflowRun } from "./state.ts";

/**
 * GitHub Actions' OpenID Connect provider, as a job on a runner meets it.
 *
 * - The issuer has GitHub Enterprise Server's form, `https://HOSTNAME/_services/token`, with
 *   `/.well-known/openid-configuration` and `/.well-known/jwks` under it:
 *   https://docs.github.com/en/enterprise-server@latest/actions/reference/security/oidc#oidc-token-claims
 * - A job with `permissions: id-token: write` gets `ACTIONS_ID_TOKEN_REQUEST_URL` and
 *   `ACTIONS_ID_TOKEN_REQUEST_TOKEN`; `GET <url>&audience=<aud>` with `Authorization: bearer <token>`
 *   answers `{ "value": "<JWT>" }`. That is what `core.getIDToken(audience)` of @actions/core sends:
 *   https://docs.github.com/en/actions/reference/security/oidc#methods-for-requesting-the-oidc-token
 * - The JWT is RS256, header `typ`/`alg`/`kid`, with the claims of
 *   https://docs.github.com/en/actions/reference/security/oidc#custom-claims-provided-by-github
 *   (ids as strings, as in the example token of
 *   https://docs.github.com/en/actions/concepts/security/openid-connect#understanding-the-oidc-token).
 *
 * None of these is a REST API route: they bypass the REST pipeline (no OpenAPI check, no rate limit,
 * no request log), like git smart HTTP.
 */
export const OIDC_ISSUER_PATH = "/_services/token";

/** Where a job asks for its ID token: one URL per run's job (GitHub's is a pipelines service URL of the same shape). */
const ID_TOKEN_PATH =
  /^\/_services\/pipelines\/_apis\/distributedtask\/hubs\/Actions\/plans\/(\d+)\/jobs\/(\d+)\/idtoken$/;

/**
 * Lifetime around the issue time, as in GitHub's example tokens (docs above): `nbf` ten minutes
 * before `iat`, `exp` five minutes after it.
 */
const NOT_BEFORE_SKEW_S = 600;
const LIFETIME_S = 300;

/** The claims GitHub's discovery document lists in `claims_supported` (docs above). */
const CLAIMS_SUPPORTED = [
  "sub",
  "aud",
  "exp",
  "iat",
  "iss",
  "jti",
  "nbf",
  "ref",
  "sha",
  "repository",
  "repository_id",
  "repository_owner",
  "repository_owner_id",
  "run_id",
  "run_number",
  "run_attempt",
  "actor",
  "actor_id",
  "workflow",
  "workflow_ref",
  "workflow_sha",
  "head_ref",
  "base_ref",
  "event_name",
  "ref_type",
  "ref_protected",
  "environment",
  "job_workflow_ref",
  "job_workflow_sha",
  "repository_visibility",
  "runner_environment",
];

export interface OidcReply {
  status: number;
  body: unknown;
  headers: Record<string, string>;
}

const b64url = (b: Buffer | string) => Buffer.from(b).toString("base64url");

export class OidcProvider {
  private readonly privateKey: KeyObject;
  /** The signing key as a JWK (RSA public part), with its `kid`. */
  readonly jwk: { kty: "RSA"; kid: string; alg: "RS256"; use: "sig"; n: string; e: string };
  /** Each run's ID-token request token (`ACTIONS_ID_TOKEN_REQUEST_TOKEN`), random per run. */
  private readonly requestTokens = new Map<number, string>();
  private readonly state: EmulatorState;
  private readonly baseUrl: () => string;

  constructor(state: EmulatorState, baseUrl: () => string) {
    this.state = state;
    this.baseUrl = baseUrl;
    const { privateKey, publicKey } = processKeyPair("oidc");
    this.privateKey = privateKey;
    const { n, e } = publicKey.export({ format: "jwk" }) as { n: string; e: string };
    // The key id is the key's RFC 7638 thumbprint: stable for the key (one per process, see processKeyPair).
    const kid = b64url(
      createHash("sha256")
        .update(JSON.stringify({ e, kty: "RSA", n }))
        .digest(),
    );
    this.jwk = { kty: "RSA", kid, alg: "RS256", use: "sig", n, e };
  }

  get issuer(): string {
    return `${this.baseUrl()}${OIDC_ISSUER_PATH}`;
  }

  /** `ACTIONS_ID_TOKEN_REQUEST_URL` and `ACTIONS_ID_TOKEN_REQUEST_TOKEN` of a run's job. */
  requestFor(run: WorkflowRun): { url: string; token: string } {
    let token = this.requestTokens.get(run.id);
    if (!token) {
      token = randomBytes(32).toString("base64url");
      this.requestTokens.set(run.id, token);
    }
    const path = `/_services/pipelines/_apis/distributedtask/hubs/Actions/plans/${run.id}/jobs/${run.jobId}/idtoken`;
    // GitHub's URL carries a query (`api-version`), so getIDToken can append `&audience=`.
    return { url: `${this.baseUrl()}${path}?api-version=2.0`, token };
  }

  /** Answers a request under `/_services/`; undefined for any other path. */
  handle(method: string, url: URL, authorization: string | undefined): OidcReply | undefined {
    if (!url.pathname.startsWith("/_services/")) return undefined;
    const json = (status: number, body: unknown): OidcReply => ({
      status,
      body,
      headers: { "content-type": "application/json; charset=utf-8", "cache-control": "no-store" },
    });
    if (method !== "GET" && method !== "HEAD") return json(405, { message: "Method Not Allowed" });

    // Discovery, with the `claims_supported` GitHub lists there:
    // https://docs.github.com/en/enterprise-server@latest/actions/reference/security/oidc#oidc-token-claims
    if (url.pathname === `${OIDC_ISSUER_PATH}/.well-known/openid-configuration`) {
      return json(200, {
        issuer: this.issuer,
        jwks_uri: `${this.issuer}/.well-known/jwks`,
        subject_types_supported: ["public", "pairwise"],
        response_types_supported: ["id_token"],
        claims_supported: CLAIMS_SUPPORTED,
        id_token_signing_alg_values_supported: ["RS256"],
        scopes_supported: ["openid"],
      });
    }
    if (url.pathname === `${OIDC_ISSUER_PATH}/.well-known/jwks`) return json(200, { keys: [this.jwk] });

    const m = ID_TOKEN_PATH.exec(url.pathname);
    if (!m) return json(404, { message: "Not Found" });
    const found = this.findRun(Number(m[1]));
    // The request token is a bearer credential of one job
    // (https://docs.github.com/en/actions/reference/security/oidc#methods-for-requesting-the-oidc-token):
    // no token, another one, or another run's answers 401.
    const unauthorized = json(401, {
      message: "The ID token request token is missing, not valid, or not this job's.",
    });
    if (!found || found.run.jobId !== Number(m[2])) return unauthorized;
    const bearer = /^bearer\s+(\S+)$/i.exec(authorization?.trim() ?? "")?.[1];
    const expected = this.requestTokens.get(found.run.id);
    if (!bearer || !expected || !sameToken(bearer, expected)) return unauthorized;
    // Job credentials end with the job, as its GITHUB_TOKEN does ("expires when a job finishes",
    // https://docs.github.com/en/actions/concepts/security/github_token): a finished run gets no ID token.
    if (found.run.status === "completed") return unauthorized;
    // `aud` defaults to the URL of the repository owner; getIDToken(audience) sets another:
    // https://docs.github.com/en/actions/reference/security/oidc#standard-audience-issuer-and-subject-claims
    const audience = url.searchParams.get("audience") || `https://github.com/${found.repo.owner.login}`;
    return json(200, { value: this.idToken(found.repo, found.run, audience) });
  }

  /** The signed ID token of a run's job, for `audience`. */
  idToken(repo: Repo, run: WorkflowRun, audience: string): string {
    const header = { typ: "JWT", alg: "RS256", kid: this.jwk.kid };
    const payload = this.claims(repo, run, audience, Math.floor(Date.now() / 1000));
    const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(payload))}`;
    const signature = sign("RSA-SHA256", Buffer.from(input), this.privateKey);
    return `${input}.${b64url(signature)}`;
  }

  /** The claims GitHub puts in a job's token, from the run's data (https://docs.github.com/en/actions/reference/security/oidc). */
  private claims(repo: Repo, run: WorkflowRun, audience: string, iat: number): Record<string, unknown> {
    const ref = run.ref ?? `refs/heads/${run.headBranch}`;
    const pull =
      run.event === "pull_request" ? repo.issues.get(run.pullRequests?.[0] ?? -1)?.pull : undefined;
    // `sub`: the pull_request context for pull request runs, else the ref (no environments are
    // emulated); a `:` inside a value becomes `%3A`
    // (https://docs.github.com/en/actions/reference/security/oidc#example-subject-claims).
    const esc = (v: string) => v.replace(/:/g, "%3A");
    const context = run.event === "pull_request" ? "pull_request" : `ref:${esc(ref)}`;
    const workflowRef = `${repo.fullName}/${run.workflowPath}@${ref}`;
    return {
      jti: randomUUID(),
      sub: `repo:${esc(repo.fullName)}:${context}`,
      aud: audience,
      ref,
      sha: run.headSha,
      repository: repo.fullName,
      repository_owner: repo.owner.login,
      repository_owner_id: String(repo.owner.id),
      repository_visibility: repo.private ? "private" : "public",
      repository_id: String(repo.id),
      run_id: String(run.id),
      run_number: String(run.runNumber),
      run_attempt: String(run.runAttempt ?? 1),
      // Fleet's workflow runs on self-hosted runners.
      runner_environment: "self-hosted",
      actor: run.actor.login,
      actor_id: String(run.actor.id),
      workflow: run.name,
      workflow_ref: workflowRef,
      workflow_sha: run.headSha,
      head_ref: pull ? pull.headRef : "",
      base_ref: pull ? pull.baseRef : "",
      event_name: run.event,
      ref_protected: "false",
      ref_type: ref.startsWith("refs/tags/") ? "tag" : "branch",
      // No reusable workflows: the job's workflow is the run's.
      job_workflow_ref: workflowRef,
      job_workflow_sha: run.headSha,
      iss: this.issuer,
      nbf: iat - NOT_BEFORE_SKEW_S,
      exp: iat + LIFETIME_S,
      iat,
    };
  }

  private findRun(runId: number): { repo: Repo; run: WorkflowRun } | undefined {
    for (const repo of this.state.repos.values()) {
      const run = repo.runs.find((r) => r.id === runId);
      if (run) return { repo, run };
    }
    return undefined;
  }
}

function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
