// `n` issues labeled fleet:claude on the emulator, queued by the real app: the label deliveries are
// recorded with the app's webhook URL off, then posted to it all at once (as GitHub sends them, without
// the emulator's per-repository ordering), signed with the webhook secret; resolves when the state holds
// a task for every issue.
import { createHmac } from "node:crypto";
import type { GitHubEmulator } from "@fleet/github-emulator";
import type { Octokit } from "@octokit/rest";

export async function labelBurst(o: {
  gh: GitHubEmulator;
  as: Octokit;
  owner: string;
  repo: string;
  webhookUrl: string;
  n: number;
  /** Tasks the state holds now (to wait for). */
  tasks: () => Promise<number>;
  title?: (i: number) => string;
}): Promise<number[]> {
  const { gh, owner, repo } = o;
  gh.setWebhookUrl(undefined);
  const issues: number[] = [];
  const before = gh.deliveries().length;
  for (let i = 1; i <= o.n; i++) {
    const title = o.title?.(i) ?? `Scale task ${i}`;
    const { data } = await o.as.rest.issues.create({ owner, repo, title, body: `${title}: write a file.` });
    await o.as.rest.issues.addLabels({ owner, repo, issue_number: data.number, labels: ["fleet:claude"] });
    issues.push(data.number);
  }
  const labeled = gh
    .deliveries()
    .slice(before)
    .filter((d) => d.event === "issues" && d.action === "labeled");
  gh.setWebhookUrl(o.webhookUrl);
  await Promise.all(
    labeled.map(async (d) => {
      const body = JSON.stringify(d.payload);
      const res = await fetch(o.webhookUrl, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-github-event": "issues",
          "x-github-delivery": `${d.id}-burst`,
          "x-hub-signature-256": `sha256=${createHmac("sha256", gh.webhookSecret).update(body).digest("hex")}`,
        },
        body,
      });
      await res.text();
    }),
  );
  const end = Date.now() + 300_000;
  while ((await o.tasks()) < o.n) {
    if (Date.now() > end) throw new Error(`the app queued ${await o.tasks()} of ${o.n} labels in 5 minutes`);
    await new Promise((r) => setTimeout(r, 250));
  }
  return issues;
}
