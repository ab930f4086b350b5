// A test-only stand-in for the offline emulator's git-data and contents routes, until those land in
// src/offline/github. In-memory, real HTTP on loopback, GitHub's status codes for CAS failures.
import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

interface Commit {
  sha: string;
  tree: string;
  parents: string[];
  message: string;
  date: string;
}

export interface FakeGitHub {
  url: string;
  requests: number;
  byRoute: Record<string, number>;
  refs: Map<string, string>;
  commits: Map<string, Commit>;
  /** Files of the commit a branch points at. */
  files(branch: string): Record<string, string>;
  filesAt(commit: string): Record<string, string>;
  /** Commit directly, as a person pushing would (no API request counted). */
  push(branch: string, files: Record<string, string>, message: string): string;
  close(): Promise<void>;
}

const sha1 = (s: string | Buffer) => createHash("sha1").update(s).digest("hex");
const blobSha = (text: string) => {
  const b = Buffer.from(text, "utf8");
  return sha1(Buffer.concat([Buffer.from(`blob ${b.length}\0`), b]));
};

export async function startFakeGitHub(): Promise<FakeGitHub> {
  const blobs = new Map<string, string>();
  const trees = new Map<string, Record<string, string>>(); // path -> blob sha
  const commits = new Map<string, Commit>();
  const refs = new Map<string, string>();
  let clock = 0;

  const putTree = (entries: Record<string, string>) => {
    const sorted = Object.fromEntries(Object.entries(entries).sort(([a], [b]) => a.localeCompare(b)));
    const sha = sha1(`tree ${JSON.stringify(sorted)}`);
    trees.set(sha, sorted);
    return sha;
  };
  const putBlob = (text: string) => {
    const sha = blobSha(text);
    blobs.set(sha, text);
    return sha;
  };
  const putCommit = (tree: string, parents: string[], message: string) => {
    const date = new Date(Date.UTC(2026, 0, 1, 0, 0, clock++)).toISOString();
    const sha = sha1(`commit ${tree} ${parents.join(",")} ${message} ${date}`);
    commits.set(sha, { sha, tree, parents, message, date });
    return sha;
  };
  const filesAt = (commitSha: string): Record<string, string> => {
    const c = commits.get(commitSha)!;
    return Object.fromEntries(Object.entries(trees.get(c.tree)!).map(([p, s]) => [p, blobs.get(s)!]));
  };

  const fake: FakeGitHub = {
    url: "",
    requests: 0,
    byRoute: {},
    refs,
    commits,
    files: (branch) => filesAt(refs.get(branch)!),
    filesAt,
    push(branch, files, message) {
      const entries = Object.fromEntries(Object.entries(files).map(([p, t]) => [p, putBlob(t)]));
      const sha = putCommit(putTree(entries), refs.has(branch) ? [refs.get(branch)!] : [], message);
      refs.set(branch, sha);
      return sha;
    },
    close: () => new Promise((r) => server.close(() => r())),
  };

  const etagOf = (body: string) => `"${sha1(body)}"`;

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : {};
    const url = new URL(req.url!, "http://x");
    const method = req.method!;
    const send = (status: number, data: unknown, conditional = false) => {
      const text = JSON.stringify(data);
      const etag = etagOf(text);
      if (conditional && req.headers["if-none-match"] === etag) {
        res.writeHead(304, { etag }).end();
        return;
      }
      res.writeHead(status, { "content-type": "application/json; charset=utf-8", etag }).end(text);
    };
    const fail = (status: number, message: string) => send(status, { message });
    const m = /^\/repos\/([^/]+)\/([^/]+)\/(.*)$/.exec(url.pathname);
    if (!m) return fail(404, "Not Found");
    const rest = decodeURIComponent(m[3]!);
    let route = `${method} ${rest}`;
    fake.requests++;
    res.on("finish", () => {
      fake.byRoute[route] = (fake.byRoute[route] ?? 0) + 1;
    });
    let mm: RegExpExecArray | null = null;
    const match = (re: RegExp): boolean => {
      mm = re.exec(rest);
      return mm !== null;
    };
    if (method === "GET" && match(/^git\/ref\/heads\/(.+)$/)) {
      route = "GET git/ref";
      const sha = refs.get(mm![1]!);
      if (!sha) fail(404, "Not Found");
      else send(200, { ref: `refs/heads/${mm![1]}`, object: { type: "commit", sha } }, true);
    } else if (method === "GET" && match(/^contents\/(.+)$/)) {
      route = "GET contents";
      const ref = url.searchParams.get("ref")!;
      const head = refs.get(ref) ?? (commits.has(ref) ? ref : undefined);
      const sha = head ? trees.get(commits.get(head)!.tree)![mm![1]!] : undefined;
      if (!sha) fail(404, "Not Found");
      else {
        const text = blobs.get(sha)!;
        send(
          200,
          {
            type: "file",
            path: mm![1],
            sha,
            encoding: "base64",
            content: Buffer.from(text).toString("base64"),
          },
          true,
        );
      }
    } else if (method === "PUT" && match(/^contents\/(.+)$/)) {
      route = "PUT contents";
      const path = mm![1]!;
      const head = refs.get(body.branch);
      if (!head) return fail(404, "Branch not found");
      const entries = { ...trees.get(commits.get(head)!.tree)! };
      if (entries[path] && !body.sha) return fail(422, 'Invalid request.\n\n"sha" wasn\'t supplied.');
      if (entries[path] !== body.sha) return fail(409, `${path} does not match ${body.sha}`);
      const text = Buffer.from(body.content, "base64").toString("utf8");
      entries[path] = putBlob(text);
      const tree = putTree(entries);
      const commit = putCommit(tree, [head], body.message);
      refs.set(body.branch, commit);
      send(200, { content: { path, sha: entries[path] }, commit: { sha: commit, tree: { sha: tree } } });
    } else if (method === "GET" && match(/^git\/commits\/([0-9a-f]+)$/)) {
      route = "GET git/commits";
      const c = commits.get(mm![1]!);
      if (!c) fail(404, "Not Found");
      else
        send(200, {
          sha: c.sha,
          tree: { sha: c.tree },
          parents: c.parents.map((sha) => ({ sha })),
          message: c.message,
        });
    } else if (method === "GET" && match(/^git\/blobs\/([0-9a-f]+)$/)) {
      route = "GET git/blobs";
      const b = blobs.get(mm![1]!);
      if (b === undefined) fail(404, "Not Found");
      else res.writeHead(200, { "content-type": "application/vnd.github.raw" }).end(b);
    } else if (method === "POST" && rest === "git/trees") {
      const entries: Record<string, string> = body.base_tree ? { ...trees.get(body.base_tree)! } : {};
      for (const e of body.tree as Array<{ path: string; content: string }>)
        entries[e.path] = putBlob(e.content);
      send(201, { sha: putTree(entries) });
    } else if (method === "POST" && rest === "git/commits") {
      send(201, { sha: putCommit(body.tree, body.parents, body.message) });
    } else if (method === "POST" && rest === "git/refs") {
      const name = String(body.ref).replace(/^refs\/heads\//, "");
      if (refs.has(name)) return fail(422, "Reference already exists");
      refs.set(name, body.sha);
      send(201, { ref: body.ref, object: { sha: body.sha } });
    } else if (method === "PATCH" && match(/^git\/refs\/heads\/(.+)$/)) {
      route = "PATCH git/refs";
      const head = refs.get(mm![1]!);
      if (!head) return fail(422, "Reference does not exist");
      if (!body.force && !commits.get(body.sha)!.parents.includes(head) && body.sha !== head) {
        return fail(422, "Update is not a fast forward");
      }
      refs.set(mm![1]!, body.sha);
      send(200, { ref: `refs/heads/${mm![1]}`, object: { sha: body.sha } });
    } else if (method === "GET" && rest === "commits") {
      route = "GET commits";
      const out: Commit[] = [];
      let sha = refs.get(url.searchParams.get("sha")!);
      const limit = Number(url.searchParams.get("per_page") ?? 30);
      while (sha && out.length < limit) {
        const c = commits.get(sha)!;
        out.push(c);
        sha = c.parents[0];
      }
      send(
        200,
        out.map((c) => ({ sha: c.sha, commit: { message: c.message, committer: { date: c.date } } })),
      );
    } else fail(404, `fake: no route ${method} ${rest}`);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((e) => res.writeHead(500).end(String(e)));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}
