// GitHub refuses a caller's requests beyond 100 in flight at once (a secondary rate limit) and asks for
// requests one after another. Fleet's GitHub clients keep a few in flight per token, however many a
// burst asks for, and answer each request as before.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type GitHubEmulator, startGitHubEmulator } from "@fleet/github-emulator";
import { afterEach, describe, expect, it } from "vitest";
import { limitRequestsPerToken, REQUESTS_IN_FLIGHT_PER_TOKEN } from "../../src/github/concurrency-limit.ts";
import { githubForToken } from "../../src/github/octokit-port.ts";

const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const s of stops.splice(0)) await s();
});

/** A server that holds each answer 50 ms and counts the requests in flight per Authorization header. */
async function countingServer() {
  const inFlight = new Map<string, number>();
  const peak = new Map<string, number>();
  let peakAll = 0;
  let all = 0;
  const server = createServer((req, res) => {
    const who = req.headers.authorization ?? "";
    const n = (inFlight.get(who) ?? 0) + 1;
    inFlight.set(who, n);
    peak.set(who, Math.max(peak.get(who) ?? 0, n));
    peakAll = Math.max(peakAll, ++all);
    setTimeout(() => {
      inFlight.set(who, inFlight.get(who)! - 1);
      all -= 1;
      if (req.url === "/empty") return void res.writeHead(204).end();
      res.writeHead(200, { "content-type": "text/plain", "x-asked": req.url ?? "" });
      // The body in two writes: the place is held until it is read whole.
      res.write(`answer to ${req.url} `);
      setTimeout(() => res.end("(end)"), 5);
    }, 50);
  });
  return { url: await serve(server), peak, peakAll: () => peakAll };
}

/** Listens on loopback until the test ends; the server's address. */
async function serve(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  stops.push(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe("requests in flight per token", () => {
  it("keeps each token to its limit while tokens go side by side, and answers every request whole", async () => {
    const s = await countingServer();
    const limited = limitRequestsPerToken(fetch, 4);
    const ask = (token: string, i: number) =>
      limited(`${s.url}/${token}/${i}`, { headers: { authorization: `token ${token}` } }).then(async (r) => ({
        status: r.status,
        asked: r.headers.get("x-asked"),
        text: await r.text(),
        url: r.url,
      }));
    const answers = await Promise.all([
      ...Array.from({ length: 20 }, (_, i) => ask("a", i)),
      ...Array.from({ length: 20 }, (_, i) => ask("b", i)),
    ]);
    expect(s.peak.get("token a")).toBe(4);
    expect(s.peak.get("token b")).toBe(4);
    // One token's queue does not hold the other's requests back.
    expect(s.peakAll()).toBe(8);
    expect(answers[7]).toEqual({
      status: 200,
      asked: "/a/7",
      text: "answer to /a/7 (end)",
      url: `${s.url}/a/7`,
    });
    expect(answers.map((a) => a.text)).toEqual([
      ...Array.from({ length: 20 }, (_, i) => `answer to /a/${i} (end)`),
      ...Array.from({ length: 20 }, (_, i) => `answer to /b/${i} (end)`),
    ]);
    const empty = await limited(`${s.url}/empty`, { headers: { authorization: "token a" } });
    expect(empty.status).toBe(204);
    expect(empty.body).toBeNull();
  });

  it("gives the place back when a request fails, so the requests behind it still go", async () => {
    const s = await countingServer();
    const limited = limitRequestsPerToken(fetch, 1);
    // Nothing listens on port 1: the first request fails at once.
    await expect(
      limited("http://127.0.0.1:1/x", { headers: { authorization: "token a" } }),
    ).rejects.toThrow();
    const r = await limited(`${s.url}/after`, { headers: { authorization: "token a" } });
    expect(await r.text()).toBe("answer to /after (end)");
  });

  it("a request that never gets its answer holds its place for a while only; one aborted in line leaves at once", async () => {
    const s = await countingServer();
    // A server that takes every request and never answers.
    const silentUrl = await serve(createServer(() => {}));
    const lost = new AbortController();
    // Aborted while in line behind a request that holds its place for a minute: it leaves the line at
    // once (waiting its turn would outlast the test's timeout).
    const patient = limitRequestsPerToken(fetch, 1, 60_000);
    const held = patient(`${silentUrl}/never`, {
      headers: { authorization: "token a" },
      signal: lost.signal,
    });
    held.catch(() => {});
    const impatient = new AbortController();
    const inLine = patient(`${s.url}/aborted`, {
      headers: { authorization: "token a" },
      signal: impatient.signal,
    });
    impatient.abort(new Error("given up"));
    await expect(inLine).rejects.toThrow("given up");
    // A place is held 300 ms at most: the next request goes then, while the first is still open.
    const limited = limitRequestsPerToken(fetch, 1, 300);
    const hung = limited(`${silentUrl}/never`, {
      headers: { authorization: "token a" },
      signal: lost.signal,
    });
    hung.catch(() => {});
    const t0 = Date.now();
    const next = await limited(`${s.url}/next`, { headers: { authorization: "token a" } });
    expect(await next.text()).toBe("answer to /next (end)");
    expect(Date.now() - t0).toBeGreaterThanOrEqual(250);
    lost.abort();
    await expect(hung).rejects.toThrow();
    await expect(held).rejects.toThrow();
  });

  it("a burst of 150 requests with one token through Fleet's GitHub client: all answered, none refused by GitHub's limit", async () => {
    const gh: GitHubEmulator = await startGitHubEmulator({});
    stops.push(() => gh.stop());
    await gh.createRepo({ owner: "octo-org", name: "widgets" });
    // Each request held 100 ms in the emulator, so an unlimited client would have all 150 in flight.
    gh.faults.inject({ route: "GET /repos/{owner}/{repo}/issues/{issue_number}", latencyMs: 100 });
    const github = await githubForToken({ token: gh.userToken("octo-org"), baseUrl: gh.url });
    const { number } = await github.issues.create(
      { owner: "octo-org", repo: "widgets" },
      { title: "t", body: "b" },
    );
    const answers = await Promise.all(
      Array.from({ length: 150 }, () => github.issues.get({ owner: "octo-org", repo: "widgets" }, number)),
    );
    expect(answers.every((a) => a.number === number)).toBe(true);
    expect(gh.peakConcurrentRequests()["user:octo-org"]).toBe(REQUESTS_IN_FLIGHT_PER_TOKEN);
  });
});
