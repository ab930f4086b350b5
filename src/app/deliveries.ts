import type { Probot } from "probot";

/** The deliveries the app has answered and is still handling. */
export interface BackgroundDeliveries {
  /** Deliveries answered whose handlers have not finished. */
  readonly inFlight: number;
  /** Resolves when no delivery is being handled. */
  idle(): Promise<void>;
}

/**
 * Answers each webhook delivery as soon as it is known to be GitHub's (signature) and readable (JSON),
 * and handles it after the answer. GitHub gives a delivery 10 seconds and recommends exactly this:
 * "respond with a 2XX response ... process the payload in the background"
 * (https://docs.github.com/en/webhooks/using-webhooks/best-practices-for-using-webhooks#respond-within-10-seconds).
 * A handler that waited for its state commit (a push to GitHub, hundreds of milliseconds there) held
 * every answer of a burst behind the commits before it.
 *
 * Nothing is lost by answering first: a delivery whose handling dies with the process is what GitHub's
 * failed deliveries already were (GitHub does not resend them either), and the reconcile pass finds
 * labeled issues with no task. Handler errors are logged by Probot's error handler (get-webhooks.js).
 * A bad signature or body still gets its 400 from the original path.
 */
export function handleDeliveriesInBackground(app: Probot): BackgroundDeliveries {
  let inFlight = 0;
  let waiters: Array<() => void> = [];
  let installed = false;
  const install = () => {
    if (installed) return;
    installed = true;
    const webhooks = app.webhooks;
    const verifyAndReceive = webhooks.verifyAndReceive.bind(webhooks);
    webhooks.verifyAndReceive = async (event) => {
      const genuine = await webhooks.verify(event.payload, event.signature).catch(() => false);
      const payload = genuine ? parsedOrUndefined(event.payload) : undefined;
      if (payload === undefined) return verifyAndReceive(event);
      inFlight++;
      void webhooks
        .receive({ id: event.id, name: event.name, payload } as Parameters<typeof webhooks.receive>[0])
        // Already logged by Probot's onError handler; an unhandled rejection would stop the process.
        .catch(() => {})
        .finally(() => {
          if (--inFlight > 0) return;
          for (const w of waiters) w();
          waiters = [];
        });
    };
  };
  // Probot creates its webhooks when it makes the middleware (in `fleet serve` and startFleetServer alike).
  const original = app.getNodeMiddleware.bind(app);
  app.getNodeMiddleware = (async (options: Parameters<Probot["getNodeMiddleware"]>[0]) => {
    const middleware = await original(options);
    install();
    return middleware;
  }) as Probot["getNodeMiddleware"];
  return {
    get inFlight() {
      return inFlight;
    },
    idle: () => (inFlight === 0 ? Promise.resolve() : new Promise<void>((r) => waiters.push(r))),
  };
}

function parsedOrUndefined(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
