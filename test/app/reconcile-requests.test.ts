// What a reconcile sweep costs a repository where nothing changed since the last: GitHub's rate limits
// are the bound of a bot, and a sweep runs for every repository every few minutes.
import { afterAll, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "../support/harness.ts";

describe("a reconcile sweep that finds nothing changed", () => {
  let h: Harness | undefined;
  afterAll(async () => {
    await h?.stop();
  });

  it("reads the state once: its missed labels and its scheduling pass, with nothing to do, decide on that read", async () => {
    h = await startHarness({ files: { ".github/fleet.yml": "dispatch: local\nmax_concurrent: 1\n" } });
    // One task holds the slot, one waits for it: the pass has a candidate and no room.
    for (const title of ["First", "Second"]) await h.label(await h.newIssue(title), "fleet:claude");
    expect((await h.tasks()).map((t) => t.state).sort()).toEqual(["dispatched", "queued"]);
    await h.app.reconcile();
    await h.settle();
    const head = h.gh.gitRequests.mark();
    const rest = h.gh.requests.mark();
    await h.app.reconcile();
    const git = h.gh.gitRequests.entries
      .filter((e) => e.seq > head)
      .map((e) => `${e.method} ${e.path.replace(/^.*\.git\//, "")}`);
    // One fetch that finds the branch unmoved: before, the missed-labels step read it again, and the
    // scheduling pass, finding nothing to start on cached state, a third time.
    expect(git).toEqual(["GET info/refs"]);
    expect(h.gh.requests.entries.filter((e) => e.seq > rest).map((e) => `${e.method} ${e.path}`)).toEqual([
      "GET /app/installations",
      "GET /installation/repositories",
      "GET /repos/octo-org/widgets/issues",
    ]);
    expect((await h.tasks()).map((t) => t.state).sort()).toEqual(["dispatched", "queued"]);
  }, 60_000);

  // A sweep that finds something to do (here a label removed while no webhook got through) writes, and
  // its later steps must then decide on the state as written, not on its first read.
  it("after a move, its missed labels and its scheduling pass decide on the state it wrote", async () => {
    await h!.app.reconcile();
    await h!.settle();
    const [first, second] = [...(await h!.tasks())].sort((a, b) => a.issue - b.issue);
    expect([first!.state, second!.state]).toEqual(["dispatched", "queued"]);
    h!.gh.setWebhookUrl(undefined);
    await h!.unlabel(first!.issue, "fleet:claude");
    h!.gh.setWebhookUrl(h!.app.webhookUrl);
    const head = h!.gh.gitRequests.mark();
    await h!.app.reconcile();
    await h!.settle();
    const git = h!.gh.gitRequests.entries
      .filter((e) => e.seq > head)
      .map((e) => `${e.method} ${e.path.replace(/^.*\.git\//, "")}`);
    // The sweep's read (the branch unmoved), then the cancel's commit, which dispatches the waiting task
    // in the same push. Before, the missed-labels step read the state again after any move.
    expect(git).toEqual(["GET info/refs", "GET info/refs", "POST git-receive-pack"]);
    const after = Object.fromEntries((await h!.tasks()).map((t) => [t.issue, t.state]));
    // The cancel freed the slot: the waiting task is dispatched into it in the same sweep, once.
    expect(after).toEqual({ [first!.issue]: "cancelled", [second!.issue]: "dispatched" });
  }, 60_000);
});
