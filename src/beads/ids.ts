import { createHash } from "node:crypto";
import { unixNano } from "./time.ts";

/**
 * Hash ids the way beads makes them (internal/idgen/hash.go, internal/storage/sqlite/
 * adaptive_length.go): `<prefix>-<base36>`, where the base36 part comes from
 * sha256("title|description|creator|unixNano|nonce") and its length grows with the number of
 * top-level issues so that the birthday-bound chance of any collision stays under 25%:
 *
 *   P(collision) ≈ 1 - exp(-n² / (2 · 36^len))  ≤  0.25
 *
 * which gives these thresholds (n = top-level issues with this prefix):
 *
 *   len 3: n ≤ 163    len 4: n ≤ 983     len 5: n ≤ 5,898
 *   len 6: n ≤ 35,389 len 7: n ≤ 212,339 len 8: n ≤ 1,274,035 (the cap; retries cover the rest)
 *
 * beads starts at 3 characters; Fleet starts at 4 because ids are minted by several bot replicas
 * and workers that only learn about each other's ids when their state commit races, and a 4-char
 * id costs one character while cutting that chance ~36×. A collision with a known id is retried
 * with nonce 0..9 at each length before growing the length, as beads does.
 */

export const DEFAULT_PREFIX = "fl";
export const DEFAULT_MIN_ID_LENGTH = 4;
export const MAX_ID_LENGTH = 8;
export const MAX_COLLISION_PROBABILITY = 0.25;
const NONCES_PER_LENGTH = 10;

const BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz";

/** Bytes of the digest used for each length, as beads uses them (enough bits for the length). */
function bytesForLength(length: number): number {
  if (length <= 3) return 2;
  if (length === 4) return 3;
  if (length <= 6) return 4;
  return 5;
}

/** Big-endian bytes as base36, left-padded with "0" / cut to the least significant `length` digits. */
export function encodeBase36(bytes: Uint8Array, length: number): string {
  let num = 0n;
  for (const byte of bytes) num = (num << 8n) | BigInt(byte);
  let digits = "";
  while (num > 0n) {
    digits = BASE36[Number(num % 36n)] + digits;
    num /= 36n;
  }
  if (digits.length < length) digits = "0".repeat(length - digits.length) + digits;
  return digits.slice(digits.length - length);
}

export interface HashIdInput {
  title: string;
  description?: string;
  creator?: string;
  /** RFC3339 (nanosecond precision kept) or a Date. */
  createdAt: string | Date;
}

/** One candidate id for a given length and nonce. */
export function hashId(
  input: HashIdInput,
  options: { prefix?: string; length: number; nonce: number },
): string {
  const prefix = (options.prefix ?? DEFAULT_PREFIX).replace(/-$/, "");
  const content = `${input.title}|${input.description ?? ""}|${input.creator ?? ""}|${unixNano(input.createdAt)}|${options.nonce}`;
  const digest = createHash("sha256").update(content, "utf8").digest();
  return `${prefix}-${encodeBase36(digest.subarray(0, bytesForLength(options.length)), options.length)}`;
}

/** P(any collision) among n ids of `length` base36 characters (birthday approximation). */
export function collisionProbability(n: number, length: number): number {
  return 1 - Math.exp(-(n * n) / (2 * 36 ** length));
}

/** The id length for a set that already holds `topLevelCount` top-level ids. */
export function adaptiveIdLength(
  topLevelCount: number,
  options: { minLength?: number; maxLength?: number; maxCollisionProbability?: number } = {},
): number {
  const min = options.minLength ?? DEFAULT_MIN_ID_LENGTH;
  const max = options.maxLength ?? MAX_ID_LENGTH;
  const threshold = options.maxCollisionProbability ?? MAX_COLLISION_PROBABILITY;
  for (let length = min; length <= max; length++) {
    if (collisionProbability(topLevelCount, length) <= threshold) return length;
  }
  return max;
}

export interface ParsedBeadId {
  prefix: string;
  hash: string;
  /** Child path: "fl-a3f.2.1" -> [2, 1]; empty for a top-level id. */
  children: number[];
}

const BEAD_ID = /^(.+)-([0-9a-z]+)((?:\.\d+)*)$/;

/** Split an id into prefix, hash and child path; undefined when it is not a beads id. */
export function parseBeadId(id: string): ParsedBeadId | undefined {
  const m = BEAD_ID.exec(id);
  if (!m) return undefined;
  const [, prefix, hash, path] = m;
  return { prefix: prefix!, hash: hash!, children: path ? path.slice(1).split(".").map(Number) : [] };
}

export const isChildId = (id: string): boolean => (parseBeadId(id)?.children.length ?? 0) > 0;

/** "fl-a3f.2.1" -> "fl-a3f.2"; undefined for a top-level id. */
export function parentIdOf(id: string): string | undefined {
  if (!isChildId(id)) return undefined;
  return id.slice(0, id.lastIndexOf("."));
}

/** The n-th child id of a parent ("fl-a3f" + 1 -> "fl-a3f.1"). */
export const childId = (parent: string, n: number): string => `${parent}.${n}`;

export class IdExhaustedError extends Error {
  constructor(prefix: string) {
    super(
      `could not mint a free "${prefix}-" id: every candidate up to ${MAX_ID_LENGTH} characters collided; ` +
        "pass a different createdAt or creator",
    );
    this.name = "IdExhaustedError";
  }
}

export interface NewIdOptions {
  prefix?: string;
  /** Ids already taken (any prefix; only top-level ids with this prefix count for the length). */
  existing: Iterable<string>;
  minLength?: number;
  maxLength?: number;
}

/** A fresh id not in `existing`, at the adaptive length for the current set. */
export function newBeadId(input: HashIdInput, options: NewIdOptions): string {
  const prefix = (options.prefix ?? DEFAULT_PREFIX).replace(/-$/, "");
  const taken =
    options.existing instanceof Set ? (options.existing as Set<string>) : new Set(options.existing);
  let topLevel = 0;
  for (const id of taken) {
    if (id.startsWith(`${prefix}-`) && !id.slice(prefix.length + 1).includes(".")) topLevel++;
  }
  const maxLength = options.maxLength ?? MAX_ID_LENGTH;
  const start = adaptiveIdLength(topLevel, { minLength: options.minLength, maxLength });
  for (let length = start; length <= maxLength; length++) {
    for (let nonce = 0; nonce < NONCES_PER_LENGTH; nonce++) {
      const id = hashId(input, { prefix, length, nonce });
      if (!taken.has(id)) return id;
    }
  }
  throw new IdExhaustedError(prefix);
}
