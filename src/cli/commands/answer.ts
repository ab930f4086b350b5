import { boundAnswer } from "../../core/commands.ts";
import { parse, TARGET_HELP, TARGET_OPTIONS } from "../args.ts";
import { CliError, UsageError } from "../errors.ts";
import { json, out } from "../io.ts";
import { describeTarget, resolveTarget } from "../target.ts";
import { findTaskRef } from "../task-ref.ts";

export const ANSWER_USAGE = `Usage: fleet answer <id> <answer ...> [--json]

A task's agent may stop to ask a person a question (its ask_human tool): the task waits in
\`waiting\` and \`fleet task <id>\` shows the question. This answers it: the task goes back to the
queue, and its next run goes on with the answer (resuming the agent's session when the worker kept
it). The answer is the rest of the command line (quote it), or \`-\` to read it from standard input.
Against GitHub with dispatch: actions this posts \`/fleet answer <answer>\` on the issue for the Fleet app.

<id> is a task id (fl-a3f) or an issue (#12: its latest task).

${TARGET_HELP}`;

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

export async function answerCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, TARGET_OPTIONS, ANSWER_USAGE);
  const [ref, ...words] = positionals;
  if (!ref) throw new UsageError("fleet answer needs a task id or issue, then the answer.", ANSWER_USAGE);
  const given = words.length === 1 && words[0] === "-" ? await readStdin() : words.join(" ");
  const text = given.trim();
  if (!text)
    throw new UsageError(
      'fleet answer needs the answer after the task (e.g. fleet answer fl-a3f "Use the blue theme.").',
      ANSWER_USAGE,
    );
  const target = await resolveTarget(values);
  const { doc } = await target.store.read();
  const task = findTaskRef(doc, ref, describeTarget(target));
  if (task.state !== "waiting")
    throw new CliError(
      `Task ${task.id} (#${task.issue}) is ${task.state}; only a task whose agent asked a question (waiting) can be answered.`,
    );
  const config = await target.config(doc);
  if (target.kind === "github" && config.dispatch !== "local") {
    await target.github.issues.createComment(
      target.repo,
      task.issue,
      `/fleet answer ${task.id} ${boundAnswer(text)}`,
    );
    if (values.json) json({ id: task.id, issue: task.issue, requested: "answer", via: "comment" });
    else out(`posted the answer on #${task.issue} for the Fleet app (${task.id})`);
    return 0;
  }
  const queue = target.queue((await target.fileConfig()).config);
  const by = process.env.USER || process.env.LOGNAME || "cli";
  const after = await queue.answer(task.id, text, by);
  if (!after)
    throw new CliError(
      `Task ${task.id} changed state meanwhile; see \`fleet task ${task.id}\` and try again.`,
    );
  if (values.json) json((await target.store.read()).doc.tasks[task.id] ?? after);
  else out(`answered ${task.id} (#${task.issue}): now ${after.state}; \`fleet run\` goes on with the answer`);
  return 0;
}
