// Probot makes a Context (an authenticated Octokit and a logger) for every handler registered on an
// event: @octokit/webhooks runs Probot's transform once per handler. The app registers each event once,
// so a delivery costs one of them whatever the number of Fleet's steps it runs (a burst of labels holds
// them all while their state commits wait: README, the app's RSS).
import { generateKeyPairSync } from "node:crypto";
import { Octokit } from "@octokit/rest";
import type { Context } from "probot";
import { Probot } from "probot";
import { describe, expect, it } from "vitest";
import type { AppDeps, HandlerDeps } from "../../src/app/handler-deps.ts";
import { createFleetApp, eventSteps } from "../../src/app/index.ts";

const { privateKey } = generateKeyPairSync("rsa", {
  modulusLength: 2048,
  privateKeyEncoding: { type: "pkcs8", format: "pem" },
  publicKeyEncoding: { type: "spki", format: "pem" },
});

/** The event names the app registers, one entry per registration. */
async function registrations(): Promise<string[]> {
  const probot = new Probot({ appId: 1, privateKey, secret: "s", logLevel: "fatal" });
  const names: string[] = [];
  const on = probot.on.bind(probot);
  probot.on = ((name: string | string[], handler: never) => {
    names.push(...[name].flat());
    return on(name as never, handler);
  }) as typeof probot.on;
  await probot.load(createFleetApp({ reconcileMs: 0, appSlug: "fleet" }), {
    cwd: process.cwd(),
    addHandler: () => {},
  });
  return names;
}

describe("the app's event handlers", () => {
  it("are one registration per event, so a delivery builds one Context", async () => {
    const names = await registrations();
    const twice = names.filter((n, i) => names.indexOf(n) !== i);
    expect(twice).toEqual([]);
    // Every event Fleet acts on is still registered.
    expect([...names].sort()).toEqual([
      "installation.created",
      "installation_repositories.added",
      "issue_comment.created",
      "issues.closed",
      "issues.edited",
      "issues.labeled",
      "issues.unlabeled",
      "pull_request.closed",
      "pull_request.labeled",
      "pull_request.opened",
      "pull_request.ready_for_review",
      "pull_request_review.submitted",
      "push",
      "workflow_run.completed",
    ]);
  });
});

describe("an event's steps", () => {
  /** A Context as far as the steps read one: its Octokit (for the port), its logger, its sender. */
  function fakeContext(isBot = false) {
    const logged: unknown[] = [];
    const octokit = new Octokit({ baseUrl: "http://github.invalid" });
    const log = { error: (e: unknown) => logged.push(e) };
    // No installation: the steps act through the delivery's own client (test/app/delivery-memory.test.ts).
    const context = { octokit, isBot, payload: {}, log } as unknown as Context;
    return { context, logged };
  }
  const deps = { knownCoders: [], queues: {} } as unknown as AppDeps;

  it("all run on one port, whatever another's fate; the first failure is Probot's to log, the others are logged whole", async () => {
    const { steps } = eventSteps(deps, { error: () => {} });
    const ports = new Set<HandlerDeps["github"]>();
    const ran: string[] = [];
    const step = (name: string, fails: boolean) => async (_c: Context, d: HandlerDeps) => {
      ports.add(d.github);
      ran.push(name);
      if (fails) throw new Error(`${name} failed`);
    };
    const { context, logged } = fakeContext();
    await expect(steps(step("a", false), step("b", true), step("c", true))(context)).rejects.toThrow(
      "b failed",
    );
    expect(ran).toEqual(["a", "b", "c"]);
    expect(ports.size).toBe(1);
    expect(logged.map((e) => (e as Error).message)).toEqual(["c failed"]);
    // None failing: nothing thrown, nothing logged.
    const quiet = fakeContext();
    await steps(step("d", false))(quiet.context);
    expect(quiet.logged).toEqual([]);
  });

  it("a person's steps skip a bot's event; the others still see it", async () => {
    const { steps, human } = eventSteps(deps, { error: () => {} });
    const ran: string[] = [];
    const step = (name: string) => async () => void ran.push(name);
    await steps(human(step("human")), step("any"))(fakeContext(true).context);
    expect(ran).toEqual(["any"]);
  });
});
