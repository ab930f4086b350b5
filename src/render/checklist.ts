import type { ChecklistItem } from "../core/checklist.ts";
import { neutraliseMentions } from "../core/published-text.ts";

/** HTML and brackets (a comment, a tag, a second task box, a link) are shown as text; mentions are made inert. */
const plain = (s: string) =>
  neutraliseMentions(
    s
      .replace(/</g, "&lt;")
      .replace(/>/g, "&gt;")
      .replace(/[[\]]/g, (c) => `\\${c}`),
    { untrusted: true },
  );

/** The agent's to-do list as a GitHub task list, the item in progress in bold; "" for an empty list. */
export function renderChecklist(items: readonly ChecklistItem[]): string {
  if (!items.length) return "";
  const done = items.filter((i) => i.status === "completed").length;
  return [
    `**Progress** (${done} of ${items.length} done)`,
    "",
    ...items.map((i) =>
      i.status === "completed"
        ? `- [x] ${plain(i.text)}`
        : i.status === "in_progress"
          ? `- [ ] **${plain(i.text)}** (in progress)`
          : `- [ ] ${plain(i.text)}`,
    ),
  ].join("\n");
}
