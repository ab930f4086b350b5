import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { Ajv, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";

// ajv-formats is CommonJS; its default export arrives wrapped under NodeNext interop.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

type Json = Record<string, unknown>;

interface Parameter {
  name: string;
  in: "path" | "query" | "header" | "cookie";
  required?: boolean;
  schema?: Json;
}

interface Operation {
  method: string;
  template: string;
  segments: string[];
  operationId: string;
  parameters: Parameter[];
  bodySchema?: Json;
  bodyRequired: boolean;
}

export interface RouteMatch {
  operation: Operation;
  params: Record<string, string>;
}

export interface ValidationError {
  status: number;
  message: string;
  errors: Array<{ resource?: string; field?: string; code: string; message?: string }>;
}

const specPath = createRequire(import.meta.url).resolve("@octokit/openapi/generated/api.github.com.json");

/** OpenAPI 3.0 `nullable` is not JSON Schema: rewrite it in place so Ajv understands it. */
function rewriteNullable(node: unknown): void {
  if (Array.isArray(node)) {
    for (const item of node) rewriteNullable(item);
    return;
  }
  if (!node || typeof node !== "object") return;
  const o = node as Json;
  for (const key of Object.keys(o)) rewriteNullable(o[key]);
  if (o.nullable === true) {
    delete o.nullable;
    if (typeof o.type === "string") {
      o.type = [o.type, "null"];
      if (Array.isArray(o.enum) && !o.enum.includes(null)) o.enum = [...o.enum, null];
    } else if (o.anyOf || o.oneOf || o.allOf || o.$ref) {
      // Move the composite into a branch so `null` can be its sibling alternative.
      const inner: Json = {};
      for (const k of ["anyOf", "oneOf", "allOf", "$ref"]) {
        if (k in o) {
          inner[k] = o[k];
          delete o[k];
        }
      }
      o.anyOf = [{ type: "null" }, inner];
    }
  } else if (o.nullable === false) {
    delete o.nullable;
  }
}

interface LoadedSpec {
  byMethod: Map<string, Operation[]>;
  components: Json;
}

// Loaded once per process: the file is 13 MB and parsing it dominates the first start.
let specPromise: Promise<LoadedSpec> | undefined;

function loadSpecOnce(): Promise<LoadedSpec> {
  specPromise ??= (async () => {
    const raw = JSON.parse(await readFile(specPath, "utf8")) as {
      paths: Record<string, Record<string, Json>>;
      components: Json & { parameters: Record<string, Parameter> };
    };
    const byMethod = new Map<string, Operation[]>();
    const resolveParam = (p: Parameter | { $ref: string }): Parameter => {
      if ("$ref" in p) {
        const name = p.$ref.split("/").pop()!;
        return raw.components.parameters[name]!;
      }
      return p;
    };
    for (const [template, item] of Object.entries(raw.paths)) {
      const shared = (item.parameters as unknown as Parameter[] | undefined) ?? [];
      for (const [method, opRaw] of Object.entries(item)) {
        if (method === "parameters" || typeof opRaw !== "object") continue;
        const op = opRaw as Json;
        const params = [...shared, ...((op.parameters as Parameter[] | undefined) ?? [])].map(resolveParam);
        const rb = op.requestBody as Json | undefined;
        const content = rb?.content as Record<string, { schema?: Json }> | undefined;
        const bodySchema = content?.["application/json"]?.schema;
        const M = method.toUpperCase();
        const list = byMethod.get(M) ?? [];
        list.push({
          method: M,
          template,
          segments: template.split("/").slice(1),
          operationId: String(op.operationId),
          parameters: params,
          bodySchema,
          bodyRequired: rb?.required === true,
        });
        byMethod.set(M, list);
      }
    }
    rewriteNullable(raw.components.schemas);
    rewriteNullable(raw.components.parameters);
    for (const list of byMethod.values()) {
      for (const op of list) {
        rewriteNullable(op.bodySchema);
        rewriteNullable(op.parameters);
      }
    }
    return { byMethod, components: raw.components };
  })();
  return specPromise;
}

/**
 * Match a concrete path to a spec template. Literal segments beat parameters, and the last
 * parameter of a template may swallow the rest of the path, because clients send refs and
 * file paths (`heads/fleet/x`, `docs/a.md`) both encoded and unencoded.
 */
export function matchRoute(spec: LoadedSpec, method: string, pathname: string): RouteMatch | undefined {
  const rawSegs = pathname.split("/").slice(1);
  if (rawSegs.length > 0 && rawSegs[rawSegs.length - 1] === "") rawSegs.pop();
  let segs: string[];
  try {
    segs = rawSegs.map((s) => decodeURIComponent(s));
  } catch {
    return undefined;
  }
  let best: { op: Operation; params: Record<string, string>; score: number[] } | undefined;
  for (const op of spec.byMethod.get(method === "HEAD" ? "GET" : method) ?? []) {
    const t = op.segments;
    if (t.length > segs.length) continue;
    const params: Record<string, string> = {};
    const score: number[] = [];
    let ok = true;
    for (let i = 0; i < t.length; i++) {
      const ts = t[i]!;
      const isParam = ts.startsWith("{") && ts.endsWith("}");
      if (!isParam) {
        if (ts !== segs[i]) {
          ok = false;
          break;
        }
        score.push(1);
        continue;
      }
      score.push(0);
      const name = ts.slice(1, -1);
      if (i === t.length - 1 && segs.length > t.length) {
        params[name] = segs.slice(i).join("/");
        score.push(-1);
      } else {
        if (segs[i] === "") {
          ok = false;
          break;
        }
        params[name] = segs[i]!;
      }
    }
    if (!ok) continue;
    if (t.length < segs.length && !t[t.length - 1]?.startsWith("{")) continue;
    if (!best || compareScore(score, best.score) > 0) best = { op, params, score };
  }
  return best ? { operation: best.op, params: best.params } : undefined;
}

function compareScore(a: number[], b: number[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? -2) - (b[i] ?? -2);
    if (d !== 0) return d;
  }
  return 0;
}

/** Validators are compiled on first use per operation: compiling all 1,000 would cost seconds. */
export class OpenApiChecker {
  private readonly bodyAjv: Ajv;
  private readonly paramAjv: Ajv;
  private readonly cache = new Map<string, { body?: ValidateFunction; params: ValidateFunction }>();
  readonly spec: LoadedSpec;

  constructor(spec: LoadedSpec) {
    this.spec = spec;
    const opts = {
      strict: false,
      allErrors: true,
      logger: false,
      validateFormats: true,
      validateSchema: false,
    } as const;
    this.bodyAjv = new Ajv(opts);
    // Path and query values arrive as strings; coerce them the way GitHub parses them.
    this.paramAjv = new Ajv({ ...opts, coerceTypes: "array" });
    for (const ajv of [this.bodyAjv, this.paramAjv]) {
      addFormats(ajv);
      ajv.addSchema({ $id: "github", components: spec.components }, "github");
    }
  }

  private validators(op: Operation) {
    const key = `${op.method} ${op.template}`;
    let v = this.cache.get(key);
    if (!v) {
      const properties: Record<string, unknown> = {};
      const required: string[] = [];
      for (const p of op.parameters) {
        if (p.in !== "path" && p.in !== "query") continue;
        properties[p.name] = fixRefs(p.schema ?? {});
        if (p.required) required.push(p.name);
      }
      const params = this.paramAjv.compile({ type: "object", properties, required });
      const body = op.bodySchema ? this.bodyAjv.compile(fixRefs(op.bodySchema) as object) : undefined;
      v = { body, params };
      this.cache.set(key, v);
    }
    return v;
  }

  /**
   * Validates path params, query and JSON body. Returns the coerced params/query or the
   * error GitHub would answer with.
   */
  check(
    match: RouteMatch,
    query: Record<string, string | string[]>,
    body: unknown,
    hasBody: boolean,
  ): { ok: true; params: Record<string, unknown> } | { ok: false; error: ValidationError } {
    const op = match.operation;
    const v = this.validators(op);
    const known = new Set(op.parameters.map((p) => p.name));
    // Unknown query parameters are ignored by GitHub, so they are dropped rather than refused.
    const input: Record<string, unknown> = { ...match.params };
    for (const [k, val] of Object.entries(query)) if (known.has(k)) input[k] = val;
    if (!v.params(input)) {
      const e = v.params.errors?.[0];
      const field = e?.instancePath.replace(/^\//, "") || String(e?.params?.missingProperty ?? "");
      return {
        ok: false,
        error: {
          status: 422,
          message: "Invalid request.",
          errors: [{ field, code: "invalid", message: `${field} ${e?.message ?? "is invalid"}` }],
        },
      };
    }
    if (op.bodySchema) {
      if (!hasBody) {
        if (op.bodyRequired) {
          return {
            ok: false,
            error: {
              status: 422,
              message: "Invalid request.",
              errors: [{ code: "missing", message: "Body is required" }],
            },
          };
        }
      } else if (!v.body!(body)) {
        const errs = (v.body!.errors ?? []).slice(0, 5).map((e) => {
          const field = e.instancePath.replace(/^\//, "").replaceAll("/", ".");
          return {
            resource: op.operationId.split("/")[0],
            field: field || String(e.params?.missingProperty ?? ""),
            code: e.keyword === "required" ? "missing_field" : "invalid",
            message: `${field || "body"} ${e.message ?? "is invalid"}`,
          };
        });
        const first = errs[0];
        const message =
          first && first.code === "missing_field"
            ? `Invalid request.\n\n"${first.field}" wasn't supplied.`
            : `Invalid request.\n\nFor '${first?.field || "body"}', ${JSON.stringify(pickValue(body, first?.field))} is not ${expected(v.body!.errors?.[0]?.params)}.`;
        return { ok: false, error: { status: 422, message, errors: errs } };
      }
    }
    return { ok: true, params: input };
  }
}

function pickValue(body: unknown, field: string | undefined): unknown {
  if (!field) return body;
  let cur: unknown = body;
  for (const k of field.split(".")) cur = (cur as Record<string, unknown> | undefined)?.[k];
  return cur;
}

function expected(params: Record<string, unknown> | undefined): string {
  if (params && typeof params.type === "string") return `a ${params.type}`;
  return "valid";
}

/** Spec refs are document-local (`#/components/...`); point them at the registered schema. */
function fixRefs(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(fixRefs);
  if (!node || typeof node !== "object") return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node as Json)) {
    out[k] = k === "$ref" && typeof v === "string" && v.startsWith("#/") ? `github${v}` : fixRefs(v);
  }
  return out;
}

export const loadSpec = loadSpecOnce;

// One checker per process too: its compiled validators are reused by every emulator started.
let checkerPromise: Promise<OpenApiChecker> | undefined;

export function sharedChecker(): Promise<OpenApiChecker> {
  checkerPromise ??= loadSpecOnce().then((spec) => new OpenApiChecker(spec));
  return checkerPromise;
}
