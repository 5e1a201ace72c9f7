/**
 * `edit_file`'s text surgery: each edit replaces one `oldText` with
 * `newText`. An exact match must be unique; failing that, a line-by-line
 * match ignoring leading/trailing whitespace is tried and the replacement is
 * re-indented to the matched lines' indentation. Line endings are kept.
 *
 * @module
 */

/** One replacement. */
export interface TextEdit {
  /** Text to find. */
  readonly oldText: string;
  /** Replacement. */
  readonly newText: string;
}

/** An edit that cannot be applied (a tool error, not a crash). */
export class EditError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "EditError";
  }
}

function occurrences(haystack: string, needle: string): number[] {
  const found: number[] = [];
  for (let at = haystack.indexOf(needle); at !== -1; at = haystack.indexOf(needle, at + 1)) {
    found.push(at);
    if (found.length > 1) break;
  }
  return found;
}

function indentOf(line: string): string {
  return /^[ \t]*/.exec(line)![0];
}

function fuzzyReplace(content: string, edit: TextEdit): string {
  const lines = content.split("\n");
  const want = edit.oldText.split("\n");
  while (want.length > 1 && want.at(-1)!.trim() === "") want.pop();
  const matches: number[] = [];
  for (let i = 0; i + want.length <= lines.length; i++) {
    if (want.every((w, j) => lines[i + j]!.trim() === w.trim())) matches.push(i);
  }
  const first = edit.oldText.split("\n")[0]!.trim();
  if (matches.length === 0) throw new EditError(`could not find the text to replace: ${first}`);
  if (matches.length > 1) {
    throw new EditError(
      `the text to replace matches ${matches.length} places (ignoring whitespace); include more context: ${first}`,
    );
  }
  const at = matches[0]!;
  const base = indentOf(lines[at]!);
  const oldBase = indentOf(want[0]!);
  const replacement = edit.newText.split("\n").map((line) =>
    line.startsWith(oldBase) ? base + line.slice(oldBase.length) : line
  );
  lines.splice(at, want.length, ...replacement);
  return lines.join("\n");
}

/** Applies `edits` in order to `original`; throws {@linkcode EditError}. */
export function applyEdits(original: string, edits: readonly TextEdit[]): string {
  const crlf = original.includes("\r\n");
  let content = crlf ? original.replaceAll("\r\n", "\n") : original;
  for (const raw of edits) {
    const edit = {
      oldText: raw.oldText.replaceAll("\r\n", "\n"),
      newText: raw.newText.replaceAll("\r\n", "\n"),
    };
    if (edit.oldText === "") throw new EditError("oldText must not be empty");
    const exact = occurrences(content, edit.oldText);
    if (exact.length === 1) {
      const at = exact[0]!;
      content = content.slice(0, at) + edit.newText + content.slice(at + edit.oldText.length);
    } else if (exact.length > 1) {
      throw new EditError(
        `the text to replace occurs more than once; include more context: ${
          edit.oldText.split("\n")[0]
        }`,
      );
    } else {
      content = fuzzyReplace(content, edit);
    }
  }
  return crlf ? content.replaceAll("\n", "\r\n") : content;
}
