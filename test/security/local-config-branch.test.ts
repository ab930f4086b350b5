// Local mode reads `.github/fleet.yml` as committed on the repository's default branch, as GitHub does:
// a task branch whose agent edited the file, checked out for review, cannot widen what the next
// `fleet run` gives agents (`sandbox: none`, `home: inherit`, credentials). The real CLI, real git.
import { mkdir, readFile, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { committedFile, localDefaultBranch } from "../../src/queue/local-branches.ts";
import { cliEnv, fleet, tempGitRepo, tempHome } from "../cli/cli-helpers.ts";

const SAFE = "plan_phase: false\n";
const WIDE = "plan_phase: false\nsandbox: none\ncoders:\n  claude:\n    home: inherit\n";

let home: { dir: string; cleanup: () => Promise<void> };
let repo: { dir: string; cleanup: () => Promise<void> };
/** PATH with node, git and sh, and no bwrap: `fleet run` starts only with `sandbox: none`. */
let bin: string;
const git = (...a: string[]) =>
  execa("git", ["-c", "user.name=t", "-c", "user.email=t@e", ...a], { cwd: repo.dir });

beforeAll(async () => {
  home = await tempHome();
  bin = join(home.dir, "bin");
  await mkdir(bin);
  for (const tool of ["node", "git", "sh"]) await symlink(`/usr/bin/${tool}`, join(bin, tool));
});
afterAll(async () => home?.cleanup());
beforeEach(async () => {
  repo = await tempGitRepo({ ".github/fleet.yml": SAFE });
});
afterEach(async () => repo?.cleanup());

/** What an agent's task branch holds, checked out for review. */
async function checkOutWideningTaskBranch() {
  await git("checkout", "-q", "-b", "fleet/1-tweak");
  await writeFile(join(repo.dir, ".github", "fleet.yml"), WIDE);
  await git("commit", "-q", "-am", "tweak the config");
}

const show = async (fleetHome: string) => {
  const r = await fleet(["config", "show", "--json"], {
    cwd: repo.dir,
    env: cliEnv({ FLEET_HOME: fleetHome }),
  });
  expect(r.exitCode, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as { config: { sandbox: string; coders: { claude: { home?: string } } } };
};

describe("local mode's .github/fleet.yml comes from the default branch", () => {
  it("a checked-out task branch's `sandbox: none` does not start a worker without bubblewrap", async () => {
    await checkOutWideningTaskBranch();
    const r = await fleet(["run", "--until-idle"], {
      cwd: repo.dir,
      env: cliEnv({ FLEET_HOME: join(home.dir, "run"), PATH: bin }),
    });
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toMatch(/bubblewrap \(bwrap\) is not installed on this machine/);
  }, 60_000);

  it("neither the task branch nor an uncommitted edit widens access; a commit on main does", async () => {
    await checkOutWideningTaskBranch();
    let shown = await show(join(home.dir, "show"));
    expect(shown.config.sandbox).toBe("bubblewrap");
    expect(shown.config.coders.claude.home).not.toBe("inherit");
    // On main, edited but not committed: still the committed file.
    await git("checkout", "-q", "main");
    await writeFile(join(repo.dir, ".github", "fleet.yml"), WIDE);
    shown = await show(join(home.dir, "show"));
    expect(shown.config.sandbox).toBe("bubblewrap");
    // Committed on the default branch: that is how access is widened.
    await git("commit", "-q", "-am", "widen");
    shown = await show(join(home.dir, "show"));
    expect(shown.config.sandbox).toBe("none");
    expect(shown.config.coders.claude.home).toBe("inherit");
  }, 60_000);

  it("the default branch: origin/HEAD's, else init.defaultBranch, main, master, else the branch checked out", async () => {
    expect(await localDefaultBranch(repo.dir)).toBe("main");
    await git("branch", "-q", "-m", "main", "trunk");
    expect(await localDefaultBranch(repo.dir)).toBe("trunk"); // checked out, not a task's
    await git("checkout", "-q", "-b", "fleet/2-x");
    expect(await localDefaultBranch(repo.dir)).toBeUndefined();
    await git("config", "init.defaultBranch", "trunk");
    expect(await localDefaultBranch(repo.dir)).toBe("trunk");
    await git("branch", "-q", "stable", "trunk");
    await git("update-ref", "refs/remotes/origin/stable", "stable");
    await git("symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/stable");
    expect(await localDefaultBranch(repo.dir)).toBe("stable");
  });

  it("a branch that names an annotated tag counts; one whose object is gone hides neither the others nor the committed file", async () => {
    await git("tag", "-a", "-m", "release", "v1", "main");
    await git("branch", "-q", "-m", "main", "trunk");
    // main names the tag object itself (git's own commands refuse to write that; a hand edit does not).
    const tag = (await git("rev-parse", "refs/tags/v1")).stdout.trim();
    await writeFile(join(repo.dir, ".git", "refs", "heads", "main"), `${tag}\n`);
    expect(await localDefaultBranch(repo.dir)).toBe("main");
    expect(await committedFile(repo.dir, ".github/fleet.yml")).toBe(SAFE);
    // A branch naming an object that is gone makes `git for-each-ref` refuse the whole repository.
    await writeFile(join(repo.dir, ".git", "refs", "heads", "zzz"), `${"1".repeat(40)}\n`);
    await writeFile(join(repo.dir, ".github", "fleet.yml"), WIDE); // uncommitted
    expect(await localDefaultBranch(repo.dir)).toBe("main");
    expect(await committedFile(repo.dir, ".github/fleet.yml")).toBe(SAFE);
  });

  it("a command reads the committed file once, though it asks for the config more than once", async () => {
    // git behind a wrapper that notes each read of a committed file.
    const traced = join(home.dir, "traced-bin");
    const reads = join(home.dir, "reads.log");
    await mkdir(traced, { recursive: true });
    await writeFile(
      join(traced, "git"),
      `#!/bin/sh\ncase "$*" in *"cat-file blob"*) echo "$*" >> ${reads};; esac\nexec /usr/bin/git "$@"\n`,
      { mode: 0o755 },
    );
    const env = cliEnv({ FLEET_HOME: join(home.dir, "once"), PATH: `${traced}:${process.env.PATH}` });
    // `bd create` reads the config for the task, then for scheduling it: each time the file's and the effective one.
    const created = await fleet(
      ["bd", "create", "--title", "One read", "--description", "Read it once.", "--coder", "claude"],
      {
        cwd: repo.dir,
        env,
      },
    );
    expect(created.exitCode, created.stderr).toBe(0);
    const lines = (await readFile(reads, "utf8")).split("\n").filter(Boolean);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain("refs/heads/main:.github/fleet.yml");
  });
});
