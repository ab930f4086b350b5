import { mkdir, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { localPullsPath, withLocalRecords } from "../../src/queue/local-github.ts";
import { cliEnv, fleet, fleetProcess, tempGitRepo, tempHome } from "./cli-helpers.ts";

// Local issues and pull requests share one series of numbers, as on GitHub. A worker opening a pull
// request holds $FLEET_HOME's records lock while it numbers it; `fleet bd create` numbers its issue
// under the same lock, so the two never take the same number.
describe("fleet bd create beside a pull request being opened", () => {
  let repo: Awaited<ReturnType<typeof tempGitRepo>>;
  let home: Awaited<ReturnType<typeof tempHome>>;
  beforeAll(async () => {
    repo = await tempGitRepo({ ".github/fleet.yml": "dispatch: local\n" });
    home = await tempHome();
  });
  afterAll(async () => {
    await repo?.cleanup();
    await home?.cleanup();
  });

  it("numbers its issue after a pull request numbered while it waited", async () => {
    const env = cliEnv({ FLEET_HOME: home.dir });
    const create = (title: string) => ["bd", "create", "--title", title, "--description", "d", "--json"];
    const first = await fleet(create("First"), { cwd: repo.dir, env });
    expect(first.exitCode, first.stderr).toBe(0);
    expect(JSON.parse(first.stdout).issue).toBe(1);

    let second: ReturnType<typeof fleetProcess> | undefined;
    await withLocalRecords(home.dir, async () => {
      const running = fleetProcess(create("Second"), { cwd: repo.dir, env });
      // Long enough for the command to have read the pull requests, had it read them without the lock.
      await new Promise((r) => setTimeout(r, 1_500));
      // What a worker opening the first task's pull request writes meanwhile: the next number, 2.
      await mkdir(dirname(localPullsPath(home.dir)), { recursive: true });
      await writeFile(
        localPullsPath(home.dir),
        JSON.stringify([
          {
            number: 2,
            head: "fleet/1-first",
            base: "main",
            title: "First",
            body: "",
            state: "open",
            url: "x",
          },
        ]),
      );
      second = running;
    });
    const result = await second!;
    expect(result.exitCode, String(result.stderr)).toBe(0);
    expect(JSON.parse(String(result.stdout)).issue).toBe(3);
  }, 60_000);
});
