/**
 * Which environment variables a worker may hand to a model provider as a coder's credential.
 * `coders.<coder>.credentials` in .github/fleet.yml names them, but the worker holds other secrets
 * too (its GitHub token, the app's key): a name is usable only when the worker allows it, and Fleet's
 * own variables never are, whatever the config or the operator says.
 */

/** Fleet's own secrets and those of the platforms it runs on: never a coder's credential. */
const FLEET_OWN = [
  /^GITHUB_/,
  /^GH_/,
  /^GHE_/,
  /^FLEET_/,
  /^ACTIONS_/,
  /^RUNNER_/,
  /^INPUT_/,
  /^(APP_ID|PRIVATE_KEY|PRIVATE_KEY_PATH|WEBHOOK_SECRET|WEBHOOK_PROXY_URL|CLIENT_ID|CLIENT_SECRET)$/,
  /^(AWS|AZURE|GOOGLE_APPLICATION|GCP|NPM|NODE_AUTH|SSH|GPG)_/,
];

export const isFleetOwnVariable = (name: string): boolean => FLEET_OWN.some((p) => p.test(name));

export type CredentialNameCheck = { ok: true } | { ok: false; why: string };

/**
 * Whether `name` may be handed to a model provider: it is in `allowed` (the coders' own credential
 * variables plus what the operator allowed) and is none of Fleet's own variables.
 */
export function checkCredentialName(name: string, allowed: ReadonlySet<string>): CredentialNameCheck {
  if (isFleetOwnVariable(name))
    return {
      ok: false,
      why: `${name} is one of Fleet's own secrets (or its platform's), never a coder's credential; name a model API key in coders.<coder>.credentials`,
    };
  if (!allowed.has(name))
    return {
      ok: false,
      why: `${name} is not a credential this worker hands to agents (it allows ${[...allowed].sort().join(", ")}); if it really is a model API key, start the worker with --credential-env ${name}`,
    };
  return { ok: true };
}
