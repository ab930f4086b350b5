export * from "./fleet-meta.ts";
export * from "./ids.ts";
export * from "./parse.ts";
export * from "./ready.ts";
export * from "./record.ts";
export * from "./rewrite.ts";
export * from "./serialize.ts";
export { isZeroTime, normalizeTime, parseRfc3339, toRfc3339, unixNano } from "./time.ts";
