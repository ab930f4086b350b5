import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";

const tracking = (h: Harness, issue: number) =>
  h.botComments(issue).filter((c) => c.body.includes("fleet:tracking"));

describe("duplicate deliveries and a missing signature", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": "dispatch: local\nmax_concurrent: 2\n" } });
  });
  afterAll(async () => {
    await h?.stop();
  });

  it("a label delivered three times (twice at once) makes one task and one tracking comment", async () => {
    const issue = await h.newIssue("Dup");
    await h.label(issue, "fleet:claude");
    await waitFor("the task", async () => (await h.tasks()).some((t) => t.issue === issue));
    const d = h.gh.deliveries().findLast((x) => x.event === "issues" && x.action === "labeled")!;
    await Promise.all([h.gh.redeliver(d.id), h.gh.redeliver(d.id)]);
    await h.settle();
    await new Promise((r) => setTimeout(r, 500));
    expect((await h.tasks()).filter((t) => t.issue === issue)).toHaveLength(1);
    expect(tracking(h, issue)).toHaveLength(1);
  }, 60_000);

  it("a label delivered again after its task ended does not run the issue again", async () => {
    const issue = await h.newIssue("Late redelivery");
    await h.label(issue, "fleet:claude");
    await h.comment(issue, "/fleet cancel changed my mind");
    const d = h.gh.deliveries().findLast((x) => x.event === "issues" && x.action === "labeled")!;
    expect((d.payload as { issue: { number: number } }).issue.number).toBe(issue);
    await h.gh.redeliver(d.id);
    await h.settle();
    const tasks = (await h.tasks()).filter((t) => t.issue === issue);
    expect(tasks).toHaveLength(1);
    expect(tasks[0]!.state).toBe("cancelled");
    expect(tracking(h, issue)).toHaveLength(1);
  }, 60_000);

  it("rejects a delivery without a signature and writes nothing", async () => {
    const issue = await h.newIssue("Unsigned");
    const before = h.gh.counts().total;
    const res = await fetch(h.app.webhookUrl, {
      method: "POST",
      headers: { "content-type": "application/json", "x-github-event": "issues", "x-github-delivery": "u-1" },
      body: JSON.stringify({ action: "labeled", label: { name: "fleet:claude" }, issue: { number: issue } }),
    });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(h.gh.counts().total).toBe(before);
    expect(h.botComments(issue)).toHaveLength(0);
  });

  it("ignores a label added by a bot (Fleet's own token) and queues nothing", async () => {
    const issue = await h.newIssue("Bot label");
    const { botClient } = await import("../support/bot-client.ts");
    const bot = await botClient(h.gh, h.full);
    await bot.rest.issues.addLabels({
      owner: h.owner,
      repo: h.name,
      issue_number: issue,
      labels: ["fleet:claude"],
    });
    await h.settle();
    expect((await h.tasks()).some((t) => t.issue === issue)).toBe(false);
    expect(h.botComments(issue)).toHaveLength(0);
  });
});
