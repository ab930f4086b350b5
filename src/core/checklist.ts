/**
 * The agent's own to-do list, read from its tool calls as the run goes: Claude's TaskCreate/TaskUpdate
 * (and the older TodoWrite), Codex's plan updates (its `todo_list` items, read as a `todo_list` call),
 * Gemini's write_todos and opencode's todowrite. The tracking comment shows it as a checklist.
 */

export type ChecklistStatus = "pending" | "in_progress" | "completed";

export interface ChecklistItem {
  id: string;
  text: string;
  status: ChecklistStatus;
}

/** At most this many items are kept (an agent's list is published: it is bounded). */
export const CHECKLIST_MAX_ITEMS = 30;
const TEXT_MAX = 160;

const record = (v: unknown): Record<string, unknown> =>
  v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
const text = (v: unknown): string | undefined => {
  if (typeof v !== "string") return undefined;
  const t = v.replace(/\s+/g, " ").trim();
  return t ? (t.length > TEXT_MAX ? `${t.slice(0, TEXT_MAX - 1)}…` : t) : undefined;
};

function statusOf(v: unknown, completed?: unknown): ChecklistStatus | "removed" {
  if (completed === true) return "completed";
  switch (v) {
    case "completed":
    case "done":
      return "completed";
    case "in_progress":
    case "in-progress":
    case "active":
      return "in_progress";
    case "deleted":
    case "cancelled":
      return "removed";
    default:
      return "pending";
  }
}

/** A whole list replaced at once: TodoWrite, todowrite, write_todos, Codex's todo_list. */
function wholeList(input: Record<string, unknown>): ChecklistItem[] | undefined {
  const todos = input.todos ?? input.items;
  if (!Array.isArray(todos)) return undefined;
  const items: ChecklistItem[] = [];
  todos.forEach((raw, i) => {
    const t = record(raw);
    const label = text(t.content ?? t.description ?? t.text ?? t.subject);
    const status = statusOf(t.status, t.completed);
    if (label && status !== "removed")
      items.push({ id: typeof t.id === "string" ? t.id : String(i + 1), text: label, status });
  });
  return items.slice(0, CHECKLIST_MAX_ITEMS);
}

/**
 * The list after one tool call of the agent's, or undefined when the call is not a to-do call (or
 * changes nothing). Claude numbers the tasks it creates from 1, as these ids do.
 */
export function checklistAfter(
  list: readonly ChecklistItem[],
  tool: string,
  rawInput: unknown,
): ChecklistItem[] | undefined {
  const input = record(rawInput);
  switch (tool) {
    case "TodoWrite":
    case "todowrite":
    case "write_todos":
    case "todo_list":
      return wholeList(input);
    case "TaskCreate": {
      const label = text(input.subject ?? input.description);
      if (!label || list.length >= CHECKLIST_MAX_ITEMS) return undefined;
      const id = String(list.reduce((n, i) => Math.max(n, Number(i.id) || 0), 0) + 1);
      return [...list, { id, text: label, status: "pending" }];
    }
    case "TaskUpdate": {
      const id = String(input.taskId ?? input.id ?? "");
      const at = list.findIndex((i) => i.id === id);
      if (at < 0) return undefined;
      const status = input.status === undefined ? list[at]!.status : statusOf(input.status);
      if (status === "removed") return list.filter((_, i) => i !== at);
      const label = text(input.subject) ?? list[at]!.text;
      return list.map((item, i) => (i === at ? { ...item, text: label, status } : item));
    }
    default:
      return undefined;
  }
}
