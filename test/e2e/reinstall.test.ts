// The app uninstalled from an account and installed again: GitHub deletes the installation (its tokens
// stop working) and makes a new one with a new id. The running app keeps working on the repository with
// the new installation, not the client of the one that is gone. Real app, offline GitHub.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "../support/harness.ts";

describe("the app installed again on a repository it works on", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": "dispatch: local\n" } });
  });
  afterAll(async () => h?.stop());

  it("queues the next label with the new installation", async () => {
    const first = await h.newIssue("Before", "x");
    await h.label(first, "fleet:claude");
    expect(h.botComments(first)).toHaveLength(1);
    const before = h.gh.installationId(h.full);

    const after = h.gh.reinstallApp(h.full);
    await h.settle();
    expect(after).not.toBe(before);

    const second = await h.newIssue("After", "y");
    await h.label(second, "fleet:claude");
    expect((await h.tasks()).map((t) => t.issue).sort((a, b) => a - b)).toEqual([first, second]);
    expect(h.botComments(second)).toHaveLength(1);
    // Nothing the app sent after the reinstall used the deleted installation's token.
    const refused = h.gh.requests.entries.filter((e) => e.status === 401);
    expect(refused).toEqual([]);
  });
});
