import { stringify } from "yaml";
import { CONFIG_FIELDS, type FieldNode, type Fields, FLEET_CONFIG_PATH, type Leaf } from "./config-fields.ts";
import { DEFAULT_CODERS } from "./config-file.ts";

// `.github/fleet.yml` as `fleet init` writes it: every key of the field table with its default,
// commented out, so the file says what Fleet does without changing it. Made from the table, so a new
// key shows up here by itself.

const flow = (value: unknown): string =>
  stringify(value, { collectionStyle: "flow", flowCollectionPadding: false, lineWidth: 0 }).trim();

/** What a leaf is, and where it may be changed, after its value. */
function noteOf(leaf: Leaf): string {
  const where = leaf.set.scope === "file" ? `; file-only: ${leaf.set.why}` : "";
  return `${leaf.value.form}${where}`;
}

function leafLine(key: string, leaf: Leaf, indent: string): string {
  if (leaf.has === "default") return `# ${indent}${key}: ${flow(leaf.default)}  # ${noteOf(leaf)}`;
  // No value to show: a comment-only line (nothing to uncomment by mistake).
  return `# ${indent}${key}:  # not set by default: ${noteOf(leaf)}`;
}

/** The built-in coders: the first with each of its keys, the others on one line each. */
function codersLines(node: { perCoder: Fields }, indent: string): string[] {
  const lines = [`# ${indent}coders:  # merged over the built-in coders key by key`];
  const [first, ...rest] = Object.entries(DEFAULT_CODERS);
  if (!first) return lines;
  lines.push(`# ${indent}  ${first[0]}:`);
  for (const [key, child] of Object.entries(node.perCoder)) {
    const leaf = child as Leaf;
    const value = (first[1] as Record<string, unknown>)[key];
    lines.push(
      value === undefined
        ? leafLine(key, leaf, `${indent}    `)
        : `# ${indent}    ${key}: ${flow(value)}  # ${noteOf(leaf)}`,
    );
  }
  for (const [name, coder] of rest) lines.push(`# ${indent}  ${name}: ${flow(coder)}`);
  return lines;
}

function nodeLines(key: string, node: FieldNode, indent: string): string[] {
  if ("value" in node) return [leafLine(key, node, indent)];
  if ("perCoder" in node) {
    if (key === "coders") return codersLines(node, indent);
    const keys = Object.keys(node.perCoder).join(", ");
    return [`# ${indent}${key}: {}  # per coder (<coder>: { ${keys} }); none set by default`];
  }
  return [
    `# ${indent}${key}:`,
    ...Object.entries(node.group).flatMap(([k, child]) => nodeLines(k, child, `${indent}  `)),
  ];
}

/** The file `fleet init` writes: a header, then every key with its default, commented out. */
export function fleetYmlTemplate(): string {
  const header = [
    `# ${FLEET_CONFIG_PATH}: Fleet's settings for this repository, read from the default branch.`,
    "# Every key is shown with its default and commented out: Fleet uses these values as they are.",
    "# Uncomment a line to change it. Keys marked file-only are set here only: `/fleet config set`",
    "# (and `fleet config set`) may change the others, within what this file allows.",
    "",
  ];
  const body = Object.entries(CONFIG_FIELDS).flatMap(([key, node]) => nodeLines(key, node as FieldNode, ""));
  return `${[...header, ...body].join("\n")}\n`;
}
