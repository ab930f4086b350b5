import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { knownCoders } from "../../src/agents/index.ts";
import { fleetLabelDefinitions } from "../../src/core/labels.ts";
import { waitFor } from "../support/bot-client.ts";
import { type Harness, startHarness } from "../support/harness.ts";

describe("Fleet's labels", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ name: "labelled" });
  });
  afterAll(async () => h?.stop());

  const repoLabels = async () =>
    new Map(
      (await h.mona.paginate(h.mona.rest.issues.listLabelsForRepo, { owner: h.owner, repo: h.name })).map(
        (l) => [l.name, { color: l.color, description: l.description }],
      ),
    );
  const labelCreates = (since: number) =>
    h.gh.counts({ since }).byRoute["POST /repos/{owner}/{repo}/labels"] ?? 0;

  it("are created with colours and descriptions when the app is installed, once, keeping a maintainer's own", async () => {
    // A maintainer already has their own fleet:claude label: it is kept as they made it.
    await h.mona.rest.issues.createLabel({
      owner: h.owner,
      repo: h.name,
      name: "fleet:claude",
      color: "ff00ff",
    });
    const expected = fleetLabelDefinitions(knownCoders);
    expect(expected.length).toBeGreaterThan(5);

    const mark = h.gh.requests.mark();
    h.gh.emitInstallation(h.full);
    await h.settle();
    const labels = await repoLabels();
    for (const def of expected) {
      if (def.name === "fleet:claude") continue;
      expect(labels.get(def.name), def.name).toEqual({ color: def.color, description: def.description });
    }
    expect(labels.get("fleet:claude")?.color).toBe("ff00ff");
    expect(labelCreates(mark)).toBe(expected.length - 1);

    // Installed again (or added to the repository again): nothing new, nothing duplicated.
    const again = h.gh.requests.mark();
    h.gh.emitInstallation(h.full);
    await h.settle();
    expect(labelCreates(again)).toBe(0);
    expect((await repoLabels()).size).toBe(labels.size);
  });

  it("are restored on demand by `/fleet labels`, with a reply naming what was created", async () => {
    await h.mona.rest.issues.deleteLabel({ owner: h.owner, repo: h.name, name: "fleet:p0" });
    const issue = await h.newIssue("Labels please");
    await h.comment(issue, "/fleet labels");
    const reply = await waitFor("the labels reply", async () =>
      h.botComments(issue).find((c) => c.body.includes("Created labels")),
    );
    expect(reply.body).toContain("`fleet:p0`");
    expect((await repoLabels()).has("fleet:p0")).toBe(true);

    await h.comment(issue, "/fleet labels");
    await waitFor("the second reply", async () =>
      h.botComments(issue).find((c) => c.body.includes("All Fleet labels exist")),
    );
  });
});
