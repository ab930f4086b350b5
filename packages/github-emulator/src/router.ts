import type { Actor } from "./state.ts";

export interface Ctx {
  method: string;
  /** Spec route template, e.g. `/repos/{owner}/{repo}/issues/{issue_number}`. */
  template: string;
  /** The request path as received, without the query string. */
  path: string;
  /** Path and query parameters after OpenAPI validation and coercion. */
  params: Record<string, unknown>;
  query: URLSearchParams;
  body: unknown;
  actor: Actor;
  headers: Record<string, string | string[] | undefined>;
}

export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export type Handler = (ctx: Ctx) => Promise<Reply> | Reply;

/** A JSON request body as the handlers read it. */
export type Body = Record<string, unknown>;

/** The emulator's implemented operations, keyed exactly like the spec: "METHOD /template". */
export class Router {
  private readonly handlers = new Map<string, Handler>();

  on(route: string, handler: Handler): void {
    if (this.handlers.has(route)) throw new Error(`route registered twice: ${route}`);
    this.handlers.set(route, handler);
  }

  find(method: string, template: string): Handler | undefined {
    return (
      this.handlers.get(`${method} ${template}`) ??
      (method === "HEAD" ? this.handlers.get(`GET ${template}`) : undefined)
    );
  }

  routes(): string[] {
    return [...this.handlers.keys()];
  }
}
