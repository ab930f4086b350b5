// An installation token of the emulated app for a repository, as an operator would hand one to
// `fleet run` (GITHUB_TOKEN): minted with the app's JWT from the emulator, never from github.com.

import { createPrivateKey } from "node:crypto";
import type { GitHubEmulator } from "@fleet/github-emulator";
import { importPKCS8, SignJWT } from "jose";

export async function installationToken(gh: GitHubEmulator, fullName: string): Promise<string> {
  // The emulator's key may be PKCS#1; jose takes PKCS#8.
  const pkcs8 = createPrivateKey(gh.privateKey).export({ type: "pkcs8", format: "pem" }).toString();
  const now = Math.floor(Date.now() / 1000);
  const jwt = await new SignJWT({})
    .setProtectedHeader({ alg: "RS256" })
    .setIssuer(String(gh.appId))
    .setIssuedAt(now - 30)
    .setExpirationTime(now + 540)
    .sign(await importPKCS8(pkcs8, "RS256"));
  const res = await fetch(`${gh.url}/app/installations/${gh.installationId(fullName)}/access_tokens`, {
    method: "POST",
    headers: { authorization: `Bearer ${jwt}`, accept: "application/vnd.github+json" },
  });
  if (!res.ok) throw new Error(`installation token for ${fullName}: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { token: string }).token;
}
