import { createHmac, randomUUID } from "node:crypto";
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_WEBHOOK_BYTES } from "../../src/app/webhook-intake.ts";
import { type Harness, startHarness } from "../support/harness.ts";

interface Sent {
  status: number;
  body: string;
  /** Body bytes this client had written when the answer came (or the connection closed). */
  written: number;
}

/**
 * POSTs to the app's webhook URL over real HTTP, writing `total` body bytes in 1 MB chunks (or only
 * `sendOnly` of them, then waiting), and resolves with the answer as soon as it arrives, whatever is
 * left to write: a server that answers before the body ends did not read it whole.
 */
function post(
  url: string,
  opts: { headers: Record<string, string>; total: number; sendOnly?: number; chunked?: boolean },
): Promise<Sent> {
  return new Promise((resolve, reject) => {
    const chunk = Buffer.alloc(1024 * 1024, "a");
    let written = 0;
    let answered = false;
    const req = request(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-github-event": "issues",
        "x-github-delivery": randomUUID(),
        ...(opts.chunked ? {} : { "content-length": String(opts.total) }),
        ...opts.headers,
      },
    });
    req.on("response", (res) => {
      answered = true;
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d) => {
        body += d;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body, written }));
      res.on("error", () => resolve({ status: res.statusCode ?? 0, body, written }));
    });
    // The server closing the connection mid-upload is expected; only no answer at all is a failure.
    req.on("error", (error) => {
      if (!answered) reject(error);
    });
    const limit = opts.sendOnly ?? opts.total;
    const pump = () => {
      while (!answered && written < limit) {
        const n = Math.min(chunk.length, limit - written);
        written += n;
        if (!req.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
          req.once("drain", pump);
          return;
        }
      }
      // Everything was sent: end the request (unless it is left open on purpose).
      if (!answered && opts.sendOnly === undefined) req.end();
    };
    pump();
  });
}

describe("webhook intake: the 25 MB cap and signatures, before the body is read", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ files: { ".github/fleet.yml": "dispatch: local\n" } });
  });
  afterAll(async () => h?.stop());

  const sign = (body: string) =>
    `sha256=${createHmac("sha256", h.gh.webhookSecret).update(body).digest("hex")}`;
  const fakeSignature = `sha256=${"0".repeat(64)}`;

  it("refuses a body declared over 25 MB after reading 1 MB of it", async () => {
    const sent = await post(h.app.webhookUrl, {
      headers: { "x-hub-signature-256": fakeSignature },
      total: MAX_WEBHOOK_BYTES + 1024 * 1024,
      sendOnly: 1024 * 1024,
    });
    expect(sent.status).toBe(413);
    expect(JSON.parse(sent.body).error).toContain("25 MB");
  });

  it("refuses a chunked body once it grows past 25 MB", async () => {
    const sent = await post(h.app.webhookUrl, {
      headers: { "x-hub-signature-256": fakeSignature },
      total: 40 * 1024 * 1024,
      chunked: true,
    });
    expect(sent.status).toBe(413);
    // Answered while the client still had megabytes to send: the rest was never read.
    expect(sent.written).toBeLessThan(40 * 1024 * 1024);
  });

  it("refuses an unsigned body, and a malformed signature, without reading it", async () => {
    const unsigned = await post(h.app.webhookUrl, { headers: {}, total: 5 * 1024 * 1024, sendOnly: 1024 });
    expect(unsigned.status).toBe(401);
    expect(JSON.parse(unsigned.body).error).toMatch(/Unsigned/);
    const malformed = await post(h.app.webhookUrl, {
      headers: { "x-hub-signature-256": "sha1=abc" },
      total: 5 * 1024 * 1024,
      sendOnly: 1024,
    });
    expect(malformed.status).toBe(401);
  });

  it("refuses a badly signed body and handles a well signed one; the app stays up", async () => {
    const issue = await h.newIssue("Still served");
    await h.settle();
    const payload = structuredClone(h.gh.deliveries().findLast((d) => d.event === "issues")!.payload) as {
      action: string;
    };
    const body = JSON.stringify({ ...payload, action: "opened" });
    const bad = await fetch(h.app.webhookUrl, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-github-event": "issues",
        "x-github-delivery": randomUUID(),
        "x-hub-signature-256": sign(`${body} `),
      },
      body,
    });
    expect(bad.status).toBe(401);
    const good = await fetch(h.app.webhookUrl, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-github-event": "issues",
        "x-github-delivery": randomUUID(),
        "x-hub-signature-256": sign(body),
      },
      body,
    });
    expect(good.status).toBe(200);
    // And the app still does its work: a label queues a task.
    await h.label(issue, "fleet:claude");
    expect((await h.tasks()).map((t) => t.issue)).toContain(issue);
  });
});
