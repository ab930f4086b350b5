import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { ArtifactStore } from "./artifact-store.ts";
import { type createGitHttpHandler, matchGitHttp } from "./git-http.ts";
import type { OidcProvider } from "./oidc.ts";

/** What shares the emulator's one port, as on github.com. */
export interface Endpoints {
  oidc: OidcProvider;
  artifacts: ArtifactStore;
  git: ReturnType<typeof createGitHttpHandler>;
  rest: (req: IncomingMessage, res: ServerResponse) => Promise<void>;
}

/**
 * Listens on 127.0.0.1: the Actions OIDC provider, signed artifact downloads, git smart HTTP, and the
 * REST pipeline for everything else.
 */
export async function listen(port: number, e: Endpoints): Promise<Server> {
  const server = createServer((req, res) => {
    // GitHub Enterprise Server serves the REST API under /api/v3 ("the base URL is
    // http(s)://HOSTNAME/api/v3", https://docs.github.com/en/enterprise-server@latest/rest/quickstart):
    // clients configured for it (Probot's GHE_HOST) reach the same API here.
    // Its GraphQL API is at /api/graphql.
    if (req.url?.startsWith("/api/v3/")) req.url = req.url.slice("/api/v3".length);
    else if (req.url === "/api/graphql") req.url = "/graphql";
    const url = new URL(req.url ?? "/", "http://emulator.invalid");
    // The Actions OIDC provider (discovery, keys, a job's ID token) is not part of the REST API.
    const oidcReply = e.oidc.handle(req.method ?? "GET", url, req.headers.authorization);
    if (oidcReply) {
      req.resume();
      res.writeHead(oidcReply.status, oidcReply.headers);
      res.end(req.method === "HEAD" ? undefined : JSON.stringify(oidcReply.body));
      return;
    }
    const git = matchGitHttp(url.pathname);
    // Signed artifact download URLs need no credentials (GitHub serves them from blob storage).
    const blob = req.method === "GET" ? e.artifacts.download(url.pathname) : undefined;
    if (blob) {
      req.resume();
      res.writeHead(blob.status, blob.headers);
      res.end(blob.body);
      return;
    }
    // Git smart HTTP shares the API's port, as on github.com, but not its pipeline (no JSON, no REST limits).
    const work = git ? e.git(req, res, git, url.searchParams) : e.rest(req, res);
    work.catch((err) => {
      process.stderr.write(`[github-emulator] ${err?.stack ?? err}\n`);
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  // Longer than clients' idle timeouts, so a client never reuses a socket the server is closing.
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve());
  });
  return server;
}
