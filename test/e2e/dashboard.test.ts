import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FleetServer } from "../../src/app/server.ts";
import { parseFleetConfig } from "../../src/core/config.ts";
import { recordLedger } from "../../src/core/state-doc.ts";
import { recordCooling } from "../../src/economy/credentials.ts";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import { createDashboardPublisher, dashboardIssueOf } from "../../src/queue/dashboard.ts";
import { DASHBOARD_MARKER } from "../../src/render/dashboard.ts";
import { createGitHubStateStore } from "../../src/state/github-store.ts";
import { botClient, waitFor } from "../support/bot-client.ts";
import { type Harness, startAppInstance, startHarness } from "../support/harness.ts";

const FLEET_YML = [
  "dispatch: local",
  "max_concurrent: 1",
  "plan_phase: false",
  "dashboard: true",
  "dashboard_interval_seconds: 0",
  "coders:",
  "  claude:",
  "    credentials: [KEY_A, KEY_B]",
  "",
].join("\n");

describe("the dashboard issue, kept current by the real app", () => {
  let h: Harness;
  let replica: FleetServer | undefined;

  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": FLEET_YML } });
  });

  afterAll(async () => {
    await replica?.stop();
    await h?.stop();
  });

  const dashboards = async (state: "open" | "closed" | "all" = "open") => {
    const all = await h.mona.paginate(h.mona.rest.issues.listForRepo, {
      owner: h.owner,
      repo: h.name,
      state,
      per_page: 100,
    });
    return all.filter((i) => i.body?.includes(DASHBOARD_MARKER));
  };

  it("shows running and queued tasks, slots, credentials, spend and dependencies, edited in place", async () => {
    // Earlier spend and a cooling credential, as runs left them in the state.
    const now = new Date();
    const day = now.toISOString().slice(0, 10);
    const until = new Date(now.getTime() + 3_600_000).toISOString();
    const store = createGitHubStateStore({ github: githubOverOctokit(h.mona), owner: h.owner, repo: h.name });
    await store.update(({ doc }) => ({
      doc: recordCooling(
        recordLedger(doc, { day, coder: "claude", costUsd: 1.5, usage: { input: 40_000, output: 2_000 } }),
        "claude",
        "KEY_A",
        until,
        now,
      ),
      message: "earlier runs",
    }));

    const first = await h.newIssue("Build the base");
    const dependent = await h.newIssue("Build on the base", `Depends on #${first}`);
    const other = await h.newIssue("Something else");
    await h.label(first, "fleet:claude");
    await h.label(dependent, "fleet:claude");
    await h.label(other, "fleet:claude:opus");

    const dash = await waitFor("the dashboard to show the third task", async () => {
      const [d] = await dashboards();
      return d?.body?.includes(`#${other} Something else`) ? d : undefined;
    });
    expect(await dashboards()).toHaveLength(1);
    expect(dash.title).toBe("Fleet dashboard");
    expect(dash.user?.type).toBe("Bot");
    expect(h.gh.issue(h.full, dash.number)?.pinned).toBe(true);
    const body = dash.body!;
    const tasks = await h.tasks();
    const idOf = (issue: number) => tasks.find((t) => t.issue === issue)!.id;
    expect(body).toContain("## Running (1 of 1 slots busy: claude 1)");
    expect(body).toContain(
      `| 1 | #${first} Build the base | \`${idOf(first)}\` | \`claude:sonnet\` | dispatched | — |`,
    );
    expect(body).toContain(
      `| 1 | #${other} Something else | \`${idOf(other)}\` | \`claude:opus\` | p2 | a free slot |`,
    );
    expect(body).toContain(
      `| — | #${dependent} Build on the base | \`${idOf(dependent)}\` | \`claude:sonnet\` | p2 | blocked by #${first} |`,
    );
    expect(body).toContain(`| claude | \`KEY_A\` | 🧊 cooling until ${until} |`);
    expect(body).toContain("| claude | `KEY_B` | ✅ open |");
    expect(body).toContain(`| ${day} | claude | 1 | 42,000 | $1.50 |`);
    expect(body).toContain(`  i${first} --> i${dependent}`);
    // The state knows the dashboard, so a restarted or second replica edits this one.
    expect(dashboardIssueOf((await store.read()).doc)).toBe(dash.number);

    // The first task is cancelled and the next one takes its slot: the dashboard is edited, not re-posted.
    await h.comment(first, "/fleet cancel");
    const edited = await waitFor("the dashboard to drop the cancelled task", async () => {
      const [d] = await dashboards();
      return d && !d.body?.includes(`\`${idOf(first)}\` | \`claude:sonnet\` | dispatched`) ? d : undefined;
    });
    expect(edited.number).toBe(dash.number);
    expect(await dashboards("all")).toHaveLength(1);

    // A replica (or a restarted app) with no memory of the issue finds it through the state.
    replica = await startAppInstance(h.gh, {});
    const late = await h.newIssue("Arrives at the replica");
    await h.mona.rest.issues.addLabels({
      owner: h.owner,
      repo: h.name,
      issue_number: late,
      labels: ["fleet:claude"],
    });
    await h.gh.waitForDeliveries();
    await replica.idle();
    const byReplica = await waitFor("the replica's edit", async () => {
      const [d] = await dashboards();
      return d?.body?.includes(`#${late} Arrives at the replica`) ? d : undefined;
    });
    expect(byReplica.number).toBe(dash.number);
    expect(await dashboards("all")).toHaveLength(1);
  }, 120_000);

  it("is created once when two replicas publish at the same moment, and not at all when off", async () => {
    const { owner } = h;
    await h.gh.createRepo({ owner, name: "race", files: { "README.md": "# race\n" } });
    const parsed = parseFleetConfig(FLEET_YML);
    if (!parsed.ok) throw new Error("config");
    const config = parsed.config;
    const replicaOf = async () => {
      const github = githubOverOctokit(await botClient(h.gh, `${owner}/race`));
      const store = createGitHubStateStore({ github, owner, repo: "race" });
      return {
        store,
        publisher: createDashboardPublisher({ github, repo: { owner, repo: "race" }, store }),
      };
    };
    const a = await replicaOf();
    const b = await replicaOf();
    const doc = (await a.store.read()).doc;

    // Off: nothing is written.
    a.publisher.update(doc, { ...config, dashboard: false });
    await a.publisher.flush();
    expect(a.publisher.edits).toBe(0);

    a.publisher.update(doc, config);
    b.publisher.update(doc, config);
    await Promise.all([a.publisher.flush(), b.publisher.flush()]);
    const issues = await h.mona.paginate(h.mona.rest.issues.listForRepo, {
      owner,
      repo: "race",
      state: "all",
      per_page: 100,
    });
    const open = issues.filter((i) => i.state === "open" && i.body?.includes(DASHBOARD_MARKER));
    expect(open).toHaveLength(1);
    expect(dashboardIssueOf((await a.store.read()).doc)).toBe(open[0]!.number);
    // A loser's duplicate, if both created one, is closed and points at the winner.
    for (const dup of issues.filter((i) => i.state === "closed"))
      expect(dup.body).toContain(`A duplicate of #${open[0]!.number}`);

    // Throttled: within the window the latest state waits; flush writes it.
    const slow = { ...config, dashboard_interval_seconds: 3600 };
    const before = a.publisher.edits;
    const withTask = {
      ...doc,
      ledger: {
        "2025-03-01": {
          claude: {
            runs: 1,
            usage: { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, reasoning: 0 },
            costUsd: 0.01,
          },
        },
      },
    };
    a.publisher.update(withTask, slow);
    a.publisher.update({ ...withTask }, slow);
    await new Promise((r) => setTimeout(r, 200));
    expect(a.publisher.edits).toBe(before);
    await a.publisher.flush();
    expect(a.publisher.edits).toBe(before + 1);
    const shown = await h.mona.rest.issues.get({ owner, repo: "race", issue_number: open[0]!.number });
    expect(shown.data.body).toContain("| 2025-03-01 | claude | 1 | 2 | $0.01 |");

    // The recorded issue answers 404 (deleted or transferred): the state forgets it, and the next write
    // finds the open dashboard again by its marker rather than creating another.
    h.gh.faults.inject({ route: "PATCH /repos/{owner}/{repo}/issues/{issue_number}", status: 404, times: 1 });
    const c = await replicaOf();
    const moreSpend = {
      ...withTask,
      ledger: { ...withTask.ledger, "2025-03-02": withTask.ledger["2025-03-01"] },
    };
    c.publisher.update(moreSpend, config);
    await c.publisher.flush();
    expect(c.publisher.edits).toBe(0);
    expect(dashboardIssueOf((await c.store.read()).doc)).toBeUndefined();
    c.publisher.update({ ...moreSpend }, config);
    await c.publisher.flush();
    expect(c.publisher.edits).toBe(1);
    expect(dashboardIssueOf((await c.store.read()).doc)).toBe(open[0]!.number);
    const after = await h.mona.paginate(h.mona.rest.issues.listForRepo, {
      owner,
      repo: "race",
      state: "open",
    });
    expect(after.filter((i) => i.body?.includes(DASHBOARD_MARKER)).map((i) => i.number)).toEqual([
      open[0]!.number,
    ]);
  }, 60_000);
});
