// The Octokit Probot makes for a delivery is let go while the delivery's steps wait (a burst of labels
// held thousands: README, the app's RSS). A file of its own, in a worker of its own (vitest.config.ts):
// it turns on V8's --expose-gc for its process.
import { generateKeyPairSync } from "node:crypto";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { Probot } from "probot";
import { describe, expect, it } from "vitest";
import type { AppDeps } from "../../src/app/handler-deps.ts";
import { eventSteps } from "../../src/app/index.ts";
import { createRepoQueues } from "../../src/app/repo-queues.ts";

const { privateKey } = generateKeyPairSync("rsa", {
  modulusLength: 2048,
  privateKeyEncoding: { type: "pkcs8", format: "pem" },
  publicKeyEncoding: { type: "spki", format: "pem" },
});

describe("an event's GitHub client", () => {
  it("lets the Octokit Probot made for a delivery be collected while the delivery's steps wait", async () => {
    // A real Probot delivery: Probot's transform makes the Context and its Octokit, our steps replace it.
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const app = new Probot({ appId: 1, privateKey, secret: "s", logLevel: "fatal" });
    const { steps } = eventSteps({ knownCoders: [], queues: createRepoQueues(app) } as unknown as AppDeps, {
      error: () => {},
    });
    let release!: () => void;
    const waiting = new Promise<void>((r) => {
      release = r;
    });
    let reached!: () => void;
    const inStep = new Promise<void>((r) => {
      reached = r;
    });
    let own: WeakRef<object> | undefined;
    const handler = steps(async () => {
      reached();
      await waiting; // as a label waits for its state commit
    });
    app.on("issues.labeled", (context) => {
      own = new WeakRef(context.octokit);
      return handler(context);
    });
    const delivered = app.receive({
      id: "d1",
      name: "issues",
      payload: { action: "labeled", installation: { id: 31 }, sender: { type: "User", login: "mona" } },
    } as never);
    await inStep;
    // Not deref'd meanwhile: a WeakRef's target is kept for the rest of the job that deref'd it.
    for (let i = 0; i < 3; i++) {
      gc();
      await new Promise((r) => setImmediate(r));
    }
    expect(own?.deref()).toBeUndefined();
    release();
    await delivered;
  });
});
