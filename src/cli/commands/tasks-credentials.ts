import { credentialRows } from "../../economy/credential-windows.ts";
import { credentialFigures, renderCredentialWindowsText } from "../../render/credential-windows.ts";
import { json, out } from "../io.ts";
import type { Target } from "../target.ts";

/**
 * `fleet tasks --credentials`: each credential of the coders in use, its state (open, near a limit,
 * cooling) and, per rate-limit window, how much is used and when it resets, as the workers' gateways
 * last recorded them in the repository state; and what Fleet sent on it this hour. A credential not set
 * in this environment, where the workers run, says so instead of showing as open.
 */
export async function showCredentialWindows(target: Target, asJson: boolean): Promise<number> {
  const { doc } = await target.store.read();
  const config = await target.config(doc);
  // Workers of local mode and of `dispatch: local` run here, with this environment's credentials;
  // with dispatch: actions they are the repository's secrets, which cannot be read from here.
  const here = target.kind === "local" || config.dispatch === "local";
  const rows = credentialRows(doc, config).map((r) =>
    here ? { ...r, set: Boolean(process.env[r.name]) } : r,
  );
  const now = new Date();
  if (asJson) json(rows.map((r) => credentialFigures(r, now, config.credential_near_limit_pct)));
  else out(renderCredentialWindowsText(rows, now, config.credential_near_limit_pct));
  return 0;
}
