import { type GitHubEmulator, startGitHubEmulator } from "@fleet/github-emulator";
import { Octokit } from "@octokit/rest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { emptyStateDoc, serializeStateDoc } from "../../src/core/state-doc.ts";
import { newTask } from "../../src/core/task.ts";
import { githubOverOctokit } from "../../src/github/octokit-port.ts";
import { createGitHubStateStore } from "../../src/state/github-store.ts";
import { FLEET_APP } from "../support/fleet-app.ts";

// Over 1 MB the contents API answers without content and the store reads the blob instead.
describe("a state document over 1 MB (thousands of tasks)", () => {
  let gh: GitHubEmulator;
  let octo: Octokit;
  const n = 5_000;

  beforeAll(async () => {
    gh = await startGitHubEmulator(FLEET_APP);
    await gh.createRepo({ owner: "octo", name: "big", files: { "README.md": "x\n" } });
    octo = new Octokit({ baseUrl: gh.url, auth: gh.userToken("octo") });
    const doc = emptyStateDoc();
    for (let i = 1; i <= n; i++) {
      const t = newTask({
        id: `fl-${i.toString(36)}`,
        repo: "octo/big",
        issue: i,
        title: `Task ${i} with a reasonably long title to take some room`,
        coder: "claude",
        model: "default",
        now: "2026-01-01T00:00:00.000Z",
      });
      doc.tasks[t.id] = t;
    }
    const text = serializeStateDoc(doc);
    expect(text.length).toBeGreaterThan(1024 * 1024);
    const tree = await octo.rest.git.createTree({
      owner: "octo",
      repo: "big",
      tree: [{ path: ".fleet/state.json", mode: "100644", type: "blob", content: text }],
    });
    const commit = await octo.rest.git.createCommit({
      owner: "octo",
      repo: "big",
      message: "seed",
      tree: tree.data.sha,
      parents: [],
    });
    await octo.rest.git.createRef({
      owner: "octo",
      repo: "big",
      ref: "refs/heads/fleet/state",
      sha: commit.data.sha,
    });
  });
  afterAll(async () => {
    await gh?.stop();
  });

  it("is read whole and can still be updated", async () => {
    const store = createGitHubStateStore({ github: githubOverOctokit(octo), owner: "octo", repo: "big" });
    const snap = await store.read();
    expect(Object.keys(snap.doc.tasks)).toHaveLength(n);
    const r = await store.update(({ doc }) => ({
      doc: { ...doc, config: { max_concurrent: 4 } },
      message: "config",
    }));
    expect(r.applied).toBe(true);
    const again = createGitHubStateStore({ github: githubOverOctokit(octo), owner: "octo", repo: "big" });
    const fresh = await again.read();
    expect(Object.keys(fresh.doc.tasks)).toHaveLength(n);
    expect(fresh.doc.config.max_concurrent).toBe(4);
  });
});
