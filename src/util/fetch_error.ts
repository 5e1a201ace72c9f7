/**
 * Readable causes for failed `fetch` calls: Deno reports `fetch failed`
 * with the real reason in `cause` (`error sending request for url (…):
 * client error (Connect): tcp connect error: Connection refused (os error
 * 111)`); this names the URL and keeps only the reason.
 *
 * @module
 */

/** `cannot reach URL: REASON` for an error thrown by `fetch(url)`. */
export function describeFetchFailure(url: string, error: unknown, timeoutMs?: number): string {
  const e = error as { name?: string; message?: string; cause?: { message?: unknown } };
  if (e?.name === "TimeoutError") {
    return `cannot reach ${url}: no answer within ${timeoutMs ?? "the"} ms`;
  }
  let reason = typeof e?.cause?.message === "string" ? e.cause.message : String(e?.message ?? e);
  reason = reason.replace(/^error sending request for url \([^)]*\): /, "");
  reason = reason.replace(/^client error \(\w+\): /, "");
  return `cannot reach ${url}: ${reason}`;
}
