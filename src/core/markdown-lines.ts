/**
 * The lines of a GitHub comment or issue body that a person wrote as live text: outside fenced code
 * blocks (``` or ~~~), not indented code, not quoted (`> ...`). Each comes with its index in the body.
 */
export function liveLines(body: string): Array<{ line: string; index: number }> {
  const out: Array<{ line: string; index: number }> = [];
  const lines = body.split(/\r?\n/);
  let fence: string | undefined;
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index]!;
    const fenceMatch = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (fence !== undefined) {
      // A fence closes with at least as many of the same character and nothing else on the line.
      if (
        fenceMatch &&
        fenceMatch[1]![0] === fence[0] &&
        fenceMatch[1]!.length >= fence.length &&
        line.trim() === fenceMatch[1]
      ) {
        fence = undefined;
      }
      continue;
    }
    if (fenceMatch) {
      fence = fenceMatch[1]!;
      continue;
    }
    if (/^ {0,3}>/.test(line) || /^( {4,}|\t)/.test(line)) continue;
    out.push({ line, index });
  }
  return out;
}
