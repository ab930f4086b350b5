import { createHmac, randomUUID } from "node:crypto";

export interface Delivery {
  id: string;
  event: string;
  action?: string;
  status: number | "pending" | "error" | "dropped";
  payload: unknown;
  body: string;
  queue: string;
  redelivery: boolean;
  attempts: number;
  error?: string;
}

/**
 * Signs and POSTs webhook deliveries. Deliveries for one repository go out one at a time in the
 * order they were made (GitHub does not promise that, but tests need determinism); different
 * repositories proceed in parallel.
 */
export class WebhookSender {
  url: string | undefined;
  private readonly all: Delivery[] = [];
  private readonly chains = new Map<string, Promise<void>>();
  private inFlight = 0;
  private waiters: Array<() => void> = [];
  private readonly secret: string;
  private readonly appId: number;

  constructor(secret: string, appId: number) {
    this.secret = secret;
    this.appId = appId;
  }

  deliveries(): Delivery[] {
    return this.all;
  }

  enqueue(queue: string, event: string, payload: Record<string, unknown>, drop = false): Delivery {
    const body = JSON.stringify(payload);
    const d: Delivery = {
      id: randomUUID(),
      event,
      action: typeof payload.action === "string" ? payload.action : undefined,
      status: drop ? "dropped" : "pending",
      payload,
      body,
      queue,
      redelivery: false,
      attempts: 0,
    };
    this.all.push(d);
    if (!drop) this.schedule(d);
    return d;
  }

  async redeliver(id: string): Promise<number> {
    const d = this.all.find((x) => x.id === id);
    if (!d) throw new Error(`no webhook delivery with id ${id}`);
    d.redelivery = true;
    d.status = "pending";
    await this.schedule(d);
    return typeof d.status === "number" ? d.status : 0;
  }

  waitForIdle(): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private schedule(d: Delivery): Promise<void> {
    this.inFlight += 1;
    const prev = this.chains.get(d.queue) ?? Promise.resolve();
    const next = prev
      .then(() => this.post(d))
      .finally(() => {
        this.inFlight -= 1;
        if (this.inFlight === 0) for (const w of this.waiters.splice(0)) w();
      });
    this.chains.set(d.queue, next);
    return next;
  }

  private async post(d: Delivery): Promise<void> {
    d.attempts += 1;
    if (!this.url) {
      // Nobody listening yet: GitHub would record a failed delivery, and so do we.
      d.status = "error";
      d.error = "no webhook URL configured";
      return;
    }
    const signature = `sha256=${createHmac("sha256", this.secret).update(d.body).digest("hex")}`;
    const installation = (d.payload as { installation?: { id?: number } }).installation;
    const headers: Record<string, string> = {
      "content-type": "application/json",
      "user-agent": "GitHub-Hookshot/emulator",
      "x-github-event": d.event,
      "x-github-delivery": d.id,
      "x-github-hook-id": "1",
      "x-hub-signature-256": signature,
      "x-github-hook-installation-target-type": "integration",
      "x-github-hook-installation-target-id": String(this.appId),
    };
    if (installation?.id) headers["x-github-installation-id"] = String(installation.id);
    try {
      const res = await fetch(this.url, {
        method: "POST",
        headers,
        body: d.body,
        signal: AbortSignal.timeout(30_000),
      });
      await res.arrayBuffer();
      d.status = res.status;
    } catch (err) {
      d.status = "error";
      d.error = err instanceof Error ? err.message : String(err);
    }
  }
}
