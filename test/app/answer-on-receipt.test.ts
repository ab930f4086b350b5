import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startAppInstance, startHarness } from "../support/harness.ts";

// The app answers a delivery once it knows it is GitHub's and readable, and handles it after
// (GitHub's 10-second window; a burst's answers no longer wait for each other's state commits).

const PERMISSION = "GET /repos/{owner}/{repo}/collaborators/{username}/permission";

describe("webhook deliveries are answered on receipt and handled after", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": "dispatch: local\nmax_concurrent: 2\n" } });
  });
  afterAll(async () => {
    h.gh.faults.clear();
    await h?.stop();
  });

  /** A labeled issue whose delivery is recorded, not sent: the test posts it itself. */
  async function labeledDelivery(title: string) {
    const issue = await h.newIssue(title);
    h.gh.setWebhookUrl(undefined);
    await h.mona.rest.issues.addLabels({
      owner: h.owner,
      repo: h.name,
      issue_number: issue,
      labels: ["fleet:claude"],
    });
    const d = h.gh.deliveries().findLast((x) => x.event === "issues" && x.action === "labeled")!;
    return { issue, body: JSON.stringify(d.payload), id: d.id };
  }

  const post = (url: string, delivery: { body: string; id: string }, signWith = h.gh.webhookSecret) =>
    fetch(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-github-event": "issues",
        "x-github-delivery": delivery.id,
        "x-hub-signature-256": `sha256=${createHmac("sha256", signWith).update(delivery.body).digest("hex")}`,
      },
      body: delivery.body,
    });

  const taskOf = async (issue: number) => (await h.tasks()).find((t) => t.issue === issue);

  it("answers 200 while the handler still waits on GitHub, and queues the task after", async () => {
    const d = await labeledDelivery("Answered first");
    // The labeler's permission takes 1.5 s to come back: the answer must not wait for it.
    h.gh.faults.inject({ route: PERMISSION, latencyMs: 1_500 });
    try {
      const res = await post(h.app.webhookUrl, d);
      expect(res.status).toBe(200);
      expect(await res.text()).toBe("ok\n");
      expect(await taskOf(d.issue)).toBeUndefined();
      await h.app.idle();
      expect((await taskOf(d.issue))?.state).toBe("dispatched");
    } finally {
      h.gh.faults.clear();
    }
  });

  it("still refuses a wrong signature and a body that is not JSON, and handles nothing", async () => {
    const d = await labeledDelivery("Forged");
    const forged = await post(h.app.webhookUrl, d, "not-the-secret");
    expect(forged.status).toBe(401);
    const broken = await post(h.app.webhookUrl, { ...d, body: `${d.body.slice(0, -1)},` });
    expect(broken.status).toBe(400);
    await h.app.idle();
    expect(await taskOf(d.issue)).toBeUndefined();
  });

  it("a signed body that is JSON but not an event object gets its error answer and leaves nothing in flight", async () => {
    const d = await labeledDelivery("Not an object");
    for (const body of ["null", "1", "[]", '"labeled"']) {
      const res = await post(h.app.webhookUrl, { ...d, body });
      expect(res.status, body).toBeGreaterThanOrEqual(400);
    }
    // Nothing counted as being handled: idle resolves (a leak would hang here until the test's timeout).
    await h.app.idle();
    expect(await taskOf(d.issue)).toBeUndefined();
  });

  /**
   * Labels a new issue and does `then` to it at once: the label's handler waits on the permission read
   * while the second delivery arrives (and is answered). The task the label queued, once all settled.
   */
  async function labelThen(
    title: string,
    then: (ref: { owner: string; repo: string; issue_number: number }) => Promise<unknown>,
  ) {
    const issue = await h.newIssue(title);
    h.gh.setWebhookUrl(h.app.webhookUrl);
    h.gh.faults.inject({ route: PERMISSION, latencyMs: 500, times: 1 });
    const ref = { owner: h.owner, repo: h.name, issue_number: issue };
    await h.mona.rest.issues.addLabels({ ...ref, labels: ["fleet:claude"] });
    await then(ref);
    await h.settle();
    return taskOf(issue);
  }

  it("handles one issue's deliveries in the order they came: a label removed right after it was added", async () => {
    const task = await labelThen("Label, then unlabel", (ref) =>
      h.mona.rest.issues.removeLabel({ ...ref, name: "fleet:claude" }),
    );
    expect(task?.state).toBe("cancelled");
  });

  it("a `/fleet cancel` right after the label cancels the task the label queued", async () => {
    const task = await labelThen("Label, then cancel", (ref) =>
      h.mona.rest.issues.createComment({ ...ref, body: "/fleet cancel" }),
    );
    expect(task?.state).toBe("cancelled");
  });

  it("a handler that fails is logged (not in the answer: that was 200) and the next delivery is handled", async () => {
    const failing = await labeledDelivery("GitHub fails");
    h.gh.faults.inject({ route: PERMISSION, status: 500, times: 1 });
    expect((await post(h.app.webhookUrl, failing)).status).toBe(200);
    await h.app.idle();
    expect(await taskOf(failing.issue)).toBeUndefined();
    const next = await labeledDelivery("Next one");
    expect((await post(h.app.webhookUrl, next)).status).toBe(200);
    await h.app.idle();
    expect(await taskOf(next.issue)).toBeDefined();
  });

  it("stopping the app finishes the deliveries it answered: an answered label is not dropped", async () => {
    const other = await startAppInstance(h.gh);
    const d = await labeledDelivery("Answered, then the app stops");
    h.gh.faults.inject({ route: PERMISSION, latencyMs: 1_000 });
    try {
      expect((await post(other.webhookUrl, d)).status).toBe(200);
      await other.stop();
      expect(await taskOf(d.issue)).toBeDefined();
    } finally {
      h.gh.faults.clear();
    }
  });
});
