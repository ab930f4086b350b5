// What a delivery holds while its handling waits (a burst of labels holds thousands: README, the app's
// RSS): its payload without the REST API's hypermedia links, and the installation's one client instead
// of the Octokit Probot made for it.
import { generateKeyPairSync } from "node:crypto";
import type { Context } from "probot";
import { Probot } from "probot";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AppDeps, HandlerDeps } from "../../src/app/handler-deps.ts";
import { eventSteps } from "../../src/app/index.ts";
import { createRepoQueues, type RepoQueues } from "../../src/app/repo-queues.ts";
import { isApiLink, withoutApiLinks } from "../../src/app/webhook-intake.ts";
import { parseFleetConfig } from "../../src/core/config.ts";
import { type Harness, startHarness } from "../support/harness.ts";

/** Every path to a field in `value`, as `a.b.0.c`, with its value. */
function leaves(value: unknown, at = ""): Array<[string, unknown]> {
  if (value === null || typeof value !== "object") return [[at, value]];
  return Object.entries(value).flatMap(([k, v]) => leaves(v, at ? `${at}.${k}` : k));
}
const paths = (value: unknown) => leaves(value).map(([p]) => p);

describe("a delivery's payload", () => {
  let h: Harness;
  let queues: RepoQueues;
  beforeAll(async () => {
    h = await startHarness({
      files: { ".github/fleet.yml": "dispatch: local\n" },
      app: {
        onReady: (q) => {
          queues = q;
        },
      },
    });
  });
  afterAll(async () => h?.stop());

  it("reaches the handlers without its API links, everything else as GitHub sent it", async () => {
    const seen: Array<Record<string, unknown>> = [];
    h.app.probot.on("issues.labeled", async (context) => {
      seen.push(context.payload as unknown as Record<string, unknown>);
    });
    const issue = await h.newIssue("Links");
    await h.mona.rest.issues.addLabels({
      owner: h.owner,
      repo: h.name,
      issue_number: issue,
      labels: ["fleet:claude"],
    });
    await h.gh.waitForDeliveries();
    await h.app.idle();
    const sent = h.gh.deliveries().findLast((d) => d.event === "issues" && d.action === "labeled")!
      .payload as Record<string, unknown>;
    const got = seen.at(-1)!;
    expect((got.issue as { number: number }).number).toBe(issue);
    const sentPaths = paths(sent);
    const links = leaves(sent)
      .filter(([p, v]) => isApiLink(p.split(".").at(-1)!, v))
      .map(([p]) => p);
    // GitHub's payloads carry dozens of them (the emulator's as GitHub's): the repository's, the users', the issue's.
    expect(links.length).toBeGreaterThan(60);
    expect(links).toContain("repository.issues_url");
    expect(links).toContain("issue.user.repos_url");
    expect(links).toContain("issue.url");
    // What is left is exactly the rest, html_url included, with the same values.
    expect(paths(got).sort()).toEqual(sentPaths.filter((p) => !links.includes(p)).sort());
    expect((got.repository as { html_url: string }).html_url).toBe(
      (sent.repository as { html_url: string }).html_url,
    );
    expect(JSON.stringify(got).length).toBeLessThan(JSON.stringify(sent).length / 2);
    // The task was queued from the slimmer payload as ever.
    expect((await h.tasks()).find((t) => t.issue === issue)?.state).toBe("dispatched");
    // The repository's handle acts through the installation's one client too.
    const installed = await queues.forInstalledRepo(h.owner, h.name);
    expect(installed?.github).toBe((await queues.installationClient(installed!.installationId)).github);
  });

  it("keeps fields whose keys people choose as sent, and values deeper than any payload as parsed", () => {
    const parsed = JSON.parse(
      '{"repository":{"url":"u","custom_properties":{"docs_url":"d"}},"inputs":{"fleet_url":"f"},"client_payload":{"x":{"url":"c"}}}',
    );
    expect(JSON.stringify(withoutApiLinks(parsed))).toBe(
      '{"repository":{"custom_properties":{"docs_url":"d"}},"inputs":{"fleet_url":"f"},"client_payload":{"x":{"url":"c"}}}',
    );
    // 10,000 levels (JSON.parse reads them): copied to 64, the rest as parsed, no stack overflow.
    const deep = JSON.parse(`${'{"a":'.repeat(10_000)}{"url":"u"}${"}".repeat(10_000)}`);
    const copied = withoutApiLinks({ url: "top", deep }) as { url?: string; deep: unknown };
    expect(copied.url).toBeUndefined();
    let levels = 0;
    let at: unknown = copied.deep;
    while (at !== null && typeof at === "object" && "a" in at && levels < 20_000) {
      at = (at as { a: unknown }).a;
      levels++;
    }
    expect(levels).toBe(10_000);
    expect(at).toEqual({ url: "u" });
    let list = withoutApiLinks(JSON.parse(`${"[".repeat(10_000)}1${"]".repeat(10_000)}`));
    for (levels = 0; Array.isArray(list); levels++) list = list[0];
    expect([levels, list]).toEqual([10_000, 1]);
  });

  it("copies a `__proto__` field as a field, and keeps arrays, nulls and links that are not strings", () => {
    const parsed = JSON.parse(
      '{"__proto__":{"polluted":true},"a":[{"url":"u","x":1},null,"s"],"events_url":null,"html_url":"h","n":{"b_url":"x"}}',
    );
    const copied = withoutApiLinks(parsed) as Record<string, unknown>;
    expect(Object.getPrototypeOf(copied)).toBe(Object.prototype);
    expect((copied as { polluted?: boolean }).polluted).toBeUndefined();
    expect(Object.hasOwn(copied, "__proto__")).toBe(true);
    expect(JSON.stringify(copied)).toBe(
      '{"__proto__":{"polluted":true},"a":[{"x":1},null,"s"],"events_url":null,"html_url":"h","n":{}}',
    );
  });
});

describe("an event's GitHub client", () => {
  const { privateKey } = generateKeyPairSync("rsa", {
    modulusLength: 2048,
    privateKeyEncoding: { type: "pkcs8", format: "pem" },
    publicKeyEncoding: { type: "spki", format: "pem" },
  });
  const probot = new Probot({ appId: 1, privateKey, secret: "s", logLevel: "fatal" });
  const queues = createRepoQueues(probot);
  const deps = { knownCoders: [], queues } as unknown as AppDeps;
  const delivery = async (installationId?: number) => {
    const own = await probot.auth(installationId);
    const payload = installationId === undefined ? {} : { installation: { id: installationId } };
    return { own, context: { octokit: own, payload, isBot: false, log: console } as unknown as Context };
  };

  it("is the installation's one client for all its deliveries; the delivery's own is let go", async () => {
    const { steps } = eventSteps(deps, { error: () => {} });
    const ports: Array<HandlerDeps["github"]> = [];
    const step = async (_c: Context, d: HandlerDeps) => void ports.push(d.github);
    const first = await delivery(7);
    const second = await delivery(7);
    const other = await delivery(8);
    for (const d of [first, second, other]) await steps(step)(d.context);
    const shared = await queues.installationClient(7);
    expect(ports[0]).toBe(shared.github);
    expect(ports[1]).toBe(shared.github);
    expect(ports[2]).toBe((await queues.installationClient(8)).github);
    expect(ports[2]).not.toBe(shared.github);
    // The Contexts now hold the shared client, not the one Probot made for each.
    expect(first.context.octokit).toBe(shared.octokit);
    expect(second.context.octokit).toBe(shared.octokit);
    expect(first.own).not.toBe(shared.octokit);
  });

  it("is made once however many ask at once, and dropped when its repositories' installation is replaced", async () => {
    const fresh = createRepoQueues(probot);
    const [a, b] = await Promise.all([fresh.installationClient(21), fresh.installationClient(21)]);
    expect(a).toBe(b);
    const parsed = parseFleetConfig("dispatch: local\n");
    if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
    const { config } = parsed;
    const event = (id: number) =>
      ({
        repo: () => ({ owner: "octo", repo: "widgets" }),
        payload: { installation: { id }, issue: { number: 1 } },
        log: { warn: () => {} },
      }) as unknown as Context;
    await fresh.forContext(event(21), config);
    expect(await fresh.installationClient(21)).toBe(a);
    // The app installed again on the repository: a new installation, a new client; the old one is dropped.
    await fresh.forContext(event(22), config);
    const again = await fresh.installationClient(21);
    expect(again).not.toBe(a);
    expect(again.octokit).not.toBe(a.octokit);
    await fresh.stop();
  });

  it("is the delivery's own for an event without an installation", async () => {
    const { steps } = eventSteps(deps, { error: () => {} });
    let port: HandlerDeps["github"] | undefined;
    const none = await delivery();
    await steps(async (_c: Context, d: HandlerDeps) => {
      port = d.github;
    })(none.context);
    expect(none.context.octokit).toBe(none.own);
    expect(port).toBeDefined();
    // Its port is over the delivery's own client: the installation clients are not asked for one.
    expect(await port!.token().catch((e: Error) => e.message)).toMatch(/no token|installation/i);
  });
});
