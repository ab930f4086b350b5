import { generateKeyPairSync, type KeyObject, randomBytes, verify } from "node:crypto";
import { HttpError } from "./http-error.ts";
import { APP_PERMISSIONS } from "./installation-token.ts";
import type { Actor, EmulatorState, InstallationGrant, WorkflowTokenScope } from "./state.ts";

type TokenRecord =
  | { kind: "user"; login: string }
  | { kind: "installation"; installationId: number; expiresAt: number; grant: InstallationGrant }
  | { kind: "workflow"; installationId: number; scope: WorkflowTokenScope };

/**
 * The user a workflow's GITHUB_TOKEN acts as. Events it causes carry this sender:
 * https://docs.github.com/en/actions/security-for-github-actions/security-guides/automatic-token-authentication
 */
export const ACTIONS_BOT = "github-actions[bot]";

const keyPairs = new Map<string, { privateKey: KeyObject; publicKey: KeyObject }>();

/**
 * A 2048-bit RSA key pair for `use` ("app": the app's private key; "oidc": the Actions ID tokens'),
 * one per process: every emulator a process starts signs with the same, since generating one costs
 * ~60-130 ms of CPU and a test file may start an emulator per test. What tells emulators apart is
 * theirs alone: tokens, the OIDC issuer's URL.
 */
export function processKeyPair(use: "app" | "oidc"): { privateKey: KeyObject; publicKey: KeyObject } {
  let pair = keyPairs.get(use);
  if (!pair) {
    pair = generateKeyPairSync("rsa", { modulusLength: 2048 });
    keyPairs.set(use, pair);
  }
  return pair;
}

/** App credentials and the tokens the emulator has issued. */
export class Auth {
  readonly privateKey: string;
  private readonly publicKey: KeyObject;
  private readonly tokens = new Map<string, TokenRecord>();
  readonly appId: number;
  private readonly state: EmulatorState;
  private readonly botLogin: string;

  constructor(appId: number, state: EmulatorState, botLogin: string) {
    this.appId = appId;
    this.state = state;
    this.botLogin = botLogin;
    const { privateKey, publicKey } = processKeyPair("app");
    // PKCS#1 ("BEGIN RSA PRIVATE KEY") is the format GitHub hands out for app keys.
    this.privateKey = privateKey.export({ type: "pkcs1", format: "pem" }).toString();
    this.publicKey = publicKey;
  }

  userToken(login: string): string {
    for (const [t, rec] of this.tokens) if (rec.kind === "user" && rec.login === login) return t;
    const token = `ghp_${randomBytes(18).toString("hex")}`;
    this.tokens.set(token, { kind: "user", login });
    // Another app's bot ("renovate[bot]") acts as a Bot, as on GitHub.
    this.state.user(login, login.endsWith("[bot]") ? "Bot" : "User");
    return token;
  }

  /** An installation access token reaching `grant` (default: all repositories, all the app's permissions). */
  installationToken(
    installationId: number,
    grant: InstallationGrant = { permissions: { ...APP_PERMISSIONS } },
  ): { token: string; expiresAt: string } {
    const token = `ghs_${randomBytes(18).toString("hex")}`;
    const expiresAt = Date.now() + 3600_000;
    this.tokens.set(token, { kind: "installation", installationId, expiresAt, grant });
    return { token, expiresAt: new Date(expiresAt).toISOString().replace(/\.\d{3}Z$/, "Z") };
  }

  /**
   * A token like a workflow job's GITHUB_TOKEN: it acts as github-actions[bot] on one repository with
   * the permissions given (what the workflow's `permissions:` block grants).
   */
  /** The installation was deleted: GitHub revokes its tokens (installation and workflow ones). */
  revokeInstallation(installationId: number): void {
    for (const [t, rec] of this.tokens)
      if (rec.kind !== "user" && rec.installationId === installationId) this.tokens.delete(t);
  }

  workflowToken(installationId: number, scope: WorkflowTokenScope): string {
    const token = `ghs_${randomBytes(18).toString("hex")}`;
    this.tokens.set(token, { kind: "workflow", installationId, scope });
    this.state.user(ACTIONS_BOT, "Bot");
    return token;
  }

  /** Who is calling, from the Authorization header; 401 with GitHub's messages when invalid. */
  actor(header: string | undefined): Actor {
    if (!header) return { kind: "anonymous" };
    const m = /^(?:token|bearer)\s+(\S+)$/i.exec(header.trim());
    if (!m) throw new HttpError(401, "Bad credentials");
    const token = m[1]!;
    if (token.split(".").length === 3 && token.startsWith("eyJ")) {
      this.verifyJwt(token);
      return { kind: "app" };
    }
    const rec = this.tokens.get(token);
    if (!rec) throw new HttpError(401, "Bad credentials");
    if (rec.kind === "user") return { kind: "user", user: this.state.user(rec.login) };
    if (rec.kind === "workflow")
      return {
        kind: "installation",
        installationId: rec.installationId,
        user: this.state.user(ACTIONS_BOT, "Bot"),
        workflow: rec.scope,
      };
    if (rec.expiresAt < Date.now()) throw new HttpError(401, "Bad credentials");
    return {
      kind: "installation",
      installationId: rec.installationId,
      user: this.state.user(this.botLogin, "Bot"),
      grant: rec.grant,
    };
  }

  private verifyJwt(jwt: string): void {
    const [h, p, s] = jwt.split(".") as [string, string, string];
    const bad = (why: string) =>
      new HttpError(401, `'${why}' A JSON web token could not be decoded`, {
        documentation_url: "https://docs.github.com/rest",
      });
    let header: { alg?: string };
    let payload: { iss?: string | number; iat?: number; exp?: number };
    try {
      header = JSON.parse(Buffer.from(h, "base64url").toString());
      payload = JSON.parse(Buffer.from(p, "base64url").toString());
    } catch {
      throw bad("malformed");
    }
    if (header.alg !== "RS256") throw bad("alg");
    const ok = verify("RSA-SHA256", Buffer.from(`${h}.${p}`), this.publicKey, Buffer.from(s, "base64url"));
    if (!ok) throw bad("signature");
    const now = Math.floor(Date.now() / 1000);
    if (String(payload.iss) !== String(this.appId)) throw bad("Issuer claim ('iss') must be the app id");
    // GitHub refuses tokens living longer than 10 minutes and allows some clock drift.
    if (typeof payload.exp !== "number" || payload.exp < now - 30)
      throw bad("Expiration time' claim ('exp') is too far in the past");
    if (typeof payload.iat !== "number" || payload.exp - payload.iat > 660) {
      throw bad("Expiration time' claim ('exp') is too far in the future");
    }
  }
}
