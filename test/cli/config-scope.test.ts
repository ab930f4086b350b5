// `fleet config set` says what its override reaches: in local mode the whole local queue (one
// $FLEET_HOME serves every repository), checked against the file of the repository it runs in.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliEnv, fleet, tempGitRepo, tempHome } from "./cli-helpers.ts";

describe("fleet config set: its scope", () => {
  let repo: Awaited<ReturnType<typeof tempGitRepo>>;
  let other: Awaited<ReturnType<typeof tempGitRepo>>;
  let home: Awaited<ReturnType<typeof tempHome>>;
  beforeAll(async () => {
    // The repository it runs in allows `opus`; the other one's file does not.
    repo = await tempGitRepo({ ".github/fleet.yml": "coders: { claude: { models: [sonnet, opus] } }\n" });
    other = await tempGitRepo({ ".github/fleet.yml": "coders: { claude: { models: [sonnet] } }\n" });
    home = await tempHome();
  });
  afterAll(async () => {
    await repo?.cleanup();
    await other?.cleanup();
    await home?.cleanup();
  });

  it("local mode: says it applies to the whole local queue, and checks against the repository it runs in", async () => {
    const env = cliEnv({ FLEET_HOME: home.dir });
    const set = await fleet(["config", "set", "max_concurrent=3"], { cwd: repo.dir, env });
    expect(set.exitCode, set.stderr).toBe(0);
    expect(set.stdout).toContain(
      `on the local queue in ${home.dir}: every repository it serves, not only ${repo.dir}`,
    );
    const asJson = await fleet(["config", "set", "max_concurrent=2", "--json"], { cwd: repo.dir, env });
    expect(JSON.parse(asJson.stdout)).toMatchObject({ scope: "local-queue" });
    const shown = await fleet(["config", "show"], { cwd: other.dir, env });
    expect(shown.stdout).toContain("# overrides set here apply to the local queue");
    expect(shown.stdout).toContain("max_concurrent: 2");

    // The file checked is the one of the repository it runs in (or --repo-path).
    expect(
      (await fleet(["config", "set", "coders.claude.model=opus"], { cwd: repo.dir, env })).exitCode,
    ).toBe(0);
    const refused = await fleet(["config", "set", "coders.claude.model=opus"], { cwd: other.dir, env });
    expect(refused.exitCode).toBe(2);
    expect(refused.stderr).toContain("opus");
  });
});
