// A connection the server closes before answering (a kept-alive socket closed as the request went out):
// the token client (the worker's and the CLI's) sends a repeatable request once more, never a POST.
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { githubForToken } from "../../src/github/octokit-port.ts";

const repo = { owner: "octo-org", repo: "widgets" };

/** A server that drops the first `drops` requests' connections without a byte, then answers. */
async function droppingServer(drops: number) {
  const seen: string[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    seen.push(`${req.method} ${req.url}`);
    if (seen.length <= drops) {
      req.socket.destroy();
      return;
    }
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ number: 7, id: 7, title: "t", body: "b", state: "open", labels: [] }));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    stop: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

describe("the token client over a connection closed before its answer", () => {
  it("sends a GET once more and returns its answer", async () => {
    const s = await droppingServer(1);
    stop = s.stop;
    const github = await githubForToken({ token: "t", baseUrl: s.url });
    expect((await github.issues.get(repo, 7)).number).toBe(7);
    expect(s.seen).toEqual(["GET /repos/octo-org/widgets/issues/7", "GET /repos/octo-org/widgets/issues/7"]);
  });

  it("gives up after the second closed connection, with the error", async () => {
    const s = await droppingServer(2);
    stop = s.stop;
    const github = await githubForToken({ token: "t", baseUrl: s.url });
    await expect(github.issues.get(repo, 7)).rejects.toThrow();
    expect(s.seen).toHaveLength(2);
  });

  it("never sends a POST twice: it may have created what it asked for", async () => {
    const s = await droppingServer(1);
    stop = s.stop;
    const github = await githubForToken({ token: "t", baseUrl: s.url });
    await expect(github.issues.create(repo, { title: "t", body: "b" })).rejects.toThrow();
    expect(s.seen).toEqual(["POST /repos/octo-org/widgets/issues"]);
  });
});
