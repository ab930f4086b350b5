import { emptyUsage, type RunTotals, type TokenUsage } from "../core/usage.ts";
import type { AgentEvent } from "./types.ts";

/** A JSON object from an agent's output, read defensively. */
export type Json = Record<string, unknown>;

/** Parses one line into a JSON object, or null for blank lines, non-JSON and non-objects. */
export function parseJsonObject(line: string): Json | null {
  const trimmed = line.trim();
  if (!trimmed.startsWith("{")) return null;
  try {
    const v: unknown = JSON.parse(trimmed);
    return v && typeof v === "object" && !Array.isArray(v) ? (v as Json) : null;
  } catch {
    return null;
  }
}

/**
 * Wraps a line parser so it never throws and so unreadable lines become `unknown`; blank lines give
 * no events.
 */
export function safeParse(line: string, parse: (obj: Json) => AgentEvent[] | null): AgentEvent[] {
  if (line.trim() === "") return [];
  const obj = parseJsonObject(line);
  if (!obj) return [{ type: "unknown", raw: line }];
  try {
    return parse(obj) ?? [{ type: "unknown", raw: line }];
  } catch {
    return [{ type: "unknown", raw: line }];
  }
}

export const obj = (v: unknown): Json => (v && typeof v === "object" && !Array.isArray(v) ? (v as Json) : {});
export const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
export const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) ? v : 0);
export const optNum = (v: unknown): number | undefined =>
  typeof v === "number" && Number.isFinite(v) ? v : undefined;
export const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/** Text of a tool result's content, which agents give as a string or a list of text parts. */
export function contentText(v: unknown): string {
  if (typeof v === "string") return v;
  if (Array.isArray(v)) {
    return v
      .map((part) => (typeof part === "string" ? part : (str(obj(part).text) ?? JSON.stringify(part))))
      .join("\n");
  }
  return v === undefined || v === null ? "" : JSON.stringify(v);
}

export function totals(usage: Partial<TokenUsage>, rest: Partial<Omit<RunTotals, "usage">> = {}): RunTotals {
  return {
    usage: { ...emptyUsage(), ...usage },
    costUsd: rest.costUsd ?? null,
    turns: rest.turns ?? 0,
    durationMs: rest.durationMs ?? 0,
    model: rest.model ?? "",
  };
}

/** Epoch seconds or milliseconds, or an ISO string -> ISO string. */
export function isoTime(v: unknown): string | undefined {
  if (typeof v === "string" && !Number.isNaN(Date.parse(v))) return new Date(v).toISOString();
  if (typeof v === "number" && Number.isFinite(v) && v > 0) {
    return new Date(v < 1e12 ? v * 1000 : v).toISOString();
  }
  return undefined;
}

/** Whether an error message is about rate or usage limits (HTTP 429, quota, "usage limit"). */
export const looksRateLimited = (message: string): boolean =>
  /\b429\b|rate.?limit|usage limit|too many requests|quota|resource.?exhausted/i.test(message);
