// Fleet's token clients (the worker's, the CLI's, the action's) do not print Octokit's request log: it
// writes every answer outside 2xx as an error, so each 304 of a conditional read of the state branch's
// ref (one a heartbeat) was an error line in the worker's and the job's log. A failed request is still
// thrown, for Fleet's code to say what it was doing.
import { type GitHubEmulator, startGitHubEmulator } from "@fleet/github-emulator";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { githubForToken } from "../../src/github/octokit-port.ts";

describe("the token client's log", () => {
  let gh: GitHubEmulator;
  beforeAll(async () => {
    gh = await startGitHubEmulator();
    await gh.createRepo({ owner: "acme", name: "quiet", files: { "README.md": "q\n" } });
    gh.addCollaborator("acme/quiet", "mona", "write");
  });
  afterAll(async () => {
    await gh?.stop();
  });

  it("prints no line for a 304 or a 404, which reach the caller as before", async () => {
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    const warnings = vi.spyOn(console, "warn").mockImplementation(() => {});
    try {
      const github = await githubForToken({ token: gh.userToken("mona"), baseUrl: gh.url });
      const repo = { owner: "acme", repo: "quiet" };
      const first = await github.git.getRef(repo, "heads/main");
      expect(first.etag).toBeTruthy();
      // Unchanged since: GitHub answers 304, which the port throws with its status.
      await expect(github.git.getRef(repo, "heads/main", first.etag)).rejects.toMatchObject({ status: 304 });
      await expect(github.git.getRef(repo, "heads/missing")).rejects.toMatchObject({ status: 404 });
      expect(errors).not.toHaveBeenCalled();
      expect(warnings).not.toHaveBeenCalled();
    } finally {
      errors.mockRestore();
      warnings.mockRestore();
    }
  });

  it("a log given to the client gets the request log", async () => {
    const lines: string[] = [];
    const keep = (m: string) => void lines.push(m);
    const github = await githubForToken({
      token: gh.userToken("mona"),
      baseUrl: gh.url,
      log: { debug: keep, info: keep, warn: keep, error: keep },
    });
    await expect(github.git.getRef({ owner: "acme", repo: "quiet" }, "heads/missing")).rejects.toMatchObject({
      status: 404,
    });
    expect(lines.some((l) => / - 404 with id .* in \d+ms$/.test(l))).toBe(true);
  });
});
