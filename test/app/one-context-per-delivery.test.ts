// Probot makes a Context (an authenticated Octokit and a logger) for every handler registered on an
// event: @octokit/webhooks runs Probot's transform once per handler. The app registers each event once,
// so a delivery costs one of them whatever the number of Fleet's steps it runs (a burst of labels holds
// them all while their state commits wait: README, the app's RSS).
import { generateKeyPairSync } from "node:crypto";
import { Probot } from "probot";
import { describe, expect, it } from "vitest";
import { createFleetApp } from "../../src/app/index.ts";

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
