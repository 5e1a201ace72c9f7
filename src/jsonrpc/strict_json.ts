/**
 * Strict JSON parsing for JSON-RPC input.
 *
 * `JSON.parse` is fast but lenient in ways a protocol server must not be: it
 * silently keeps the last of duplicate keys, has no value budget and no depth
 * limit, and rounds integers beyond 2^53. A message that is canonical JSON
 * (what serde and `JSON.stringify` write) is taken on a native fast path:
 * parsed, serialised again and compared — equal text has no duplicate keys
 * and no inexact integers — and its values counted. Anything else gets a
 * structural scan first (linear time; long strings are skipped with native
 * `indexOf`), enforcing those rules with messages in the wording the
 * reference server uses, then `JSON.parse` builds the value (keeping
 * integers beyond 2^53 exact as `bigint`).
 *
 * @module
 */

/** Limits applied while scanning one JSON text. */
export interface StrictJsonLimits {
  /** Maximum number of JSON values (object keys do not count). */
  readonly maxValues: number;
  /** Maximum nesting depth of objects and arrays. */
  readonly maxDepth: number;
}

/** Default limits, matching the reference exec-server. */
export const DEFAULT_JSON_LIMITS: StrictJsonLimits = {
  maxValues: 262_144,
  maxDepth: 128,
};

/** Result of {@linkcode parseStrictJson}. */
export type StrictJsonResult =
  | {
    readonly ok: true;
    readonly value: unknown;
    /** Source text of the top-level `"id"` member when it is a number. */
    readonly idSource: string | undefined;
  }
  | { readonly ok: false; readonly message: string };

class ScanError extends Error {
  constructor(readonly detail: string, readonly pos: number) {
    super(detail);
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

function isWhitespace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

class Scanner {
  pos = 0;
  values = 0;
  idSource: string | undefined = undefined;
  /** An integer literal that may lie beyond `Number.MAX_SAFE_INTEGER` was seen. */
  wideIntegers = false;
  /** The last string scanned contains escapes. */
  escapedString = false;

  constructor(readonly text: string, readonly limits: StrictJsonLimits) {}

  fail(detail: string, pos = this.pos): never {
    throw new ScanError(detail, pos);
  }

  skipWhitespace(): void {
    const text = this.text;
    let pos = this.pos;
    while (pos < text.length && isWhitespace(text.charCodeAt(pos))) pos++;
    this.pos = pos;
  }

  countValue(): void {
    if (++this.values > this.limits.maxValues) {
      this.fail(
        `JSON-RPC message exceeds the limit of ${this.limits.maxValues} JSON values`,
      );
    }
  }

  /** Scans one value starting at the current (non-whitespace) position. */
  value(depth: number): void {
    const text = this.text;
    if (this.pos >= text.length) this.fail("EOF while parsing a value");
    const c = text.charCodeAt(this.pos);
    this.countValue();
    if (c === QUOTE) {
      this.string();
    } else if (c === 0x7b /* { */) {
      this.object(depth + 1);
    } else if (c === 0x5b /* [ */) {
      this.array(depth + 1);
    } else if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) {
      this.number();
    } else if (text.startsWith("true", this.pos)) {
      this.pos += 4;
    } else if (text.startsWith("false", this.pos)) {
      this.pos += 5;
    } else if (text.startsWith("null", this.pos)) {
      this.pos += 4;
    } else {
      this.fail("expected value", this.pos + 1);
    }
  }

  /** Index of the first backslash at or after `from` (-1: none); cached. */
  #nextBackslash = -2;
  nextBackslash(from: number): number {
    if (this.#nextBackslash === -1) return -1;
    if (this.#nextBackslash < from) {
      // Positions only grow during a scan, so successive searches never
      // overlap: the total cost stays linear in the text length.
      this.#nextBackslash = this.text.indexOf("\\", from);
    }
    return this.#nextBackslash;
  }

  /**
   * Scans a string starting at its opening quote; returns the end of its
   * raw contents (they start one past the quote) and sets
   * {@linkcode escapedString}.
   */
  string(): number {
    const text = this.text;
    const start = this.pos + 1;
    const firstBackslash = this.nextBackslash(start);
    let search = start;
    for (;;) {
      const end = text.indexOf('"', search);
      if (end === -1) this.fail("EOF while parsing a string", text.length);
      const escaped = firstBackslash !== -1 && firstBackslash < end;
      if (!escaped) {
        this.pos = end + 1;
        this.escapedString = false;
        return end;
      }
      // Count the backslashes right before the quote: an odd number escapes it.
      let backslashes = 0;
      let k = end - 1;
      while (k >= start && text.charCodeAt(k) === BACKSLASH) {
        backslashes++;
        k--;
      }
      if (backslashes % 2 === 0) {
        this.pos = end + 1;
        this.escapedString = true;
        return end;
      }
      search = end + 1;
    }
  }

  number(): void {
    const text = this.text;
    let pos = this.pos;
    if (text.charCodeAt(pos) === 0x2d) pos++;
    const digit = (i: number) => {
      const c = text.charCodeAt(i);
      return c >= 0x30 && c <= 0x39;
    };
    if (pos >= text.length) this.fail("EOF while parsing a value", pos);
    if (text.charCodeAt(pos) === 0x30) {
      pos++;
    } else if (digit(pos)) {
      const first = pos;
      while (pos < text.length && digit(pos)) pos++;
      // 2^53 has 16 digits: shorter integers are always exact as numbers.
      if (pos - first >= 16) this.wideIntegers = true;
    } else {
      this.fail("invalid number", pos + 1);
    }
    if (text.charCodeAt(pos) === 0x2e /* . */) {
      pos++;
      if (!digit(pos)) this.fail("invalid number", pos + 1);
      while (pos < text.length && digit(pos)) pos++;
    }
    const e = text.charCodeAt(pos);
    if (e === 0x65 || e === 0x45) {
      pos++;
      const sign = text.charCodeAt(pos);
      if (sign === 0x2b || sign === 0x2d) pos++;
      if (!digit(pos)) this.fail("invalid number", pos + 1);
      while (pos < text.length && digit(pos)) pos++;
    }
    this.pos = pos;
  }

  object(depth: number): void {
    if (depth > this.limits.maxDepth) this.fail("recursion limit exceeded");
    const text = this.text;
    this.pos++; // {
    this.skipWhitespace();
    if (text.charCodeAt(this.pos) === 0x7d /* } */) {
      this.pos++;
      return;
    }
    let keys: string[] | Set<string> = [];
    for (;;) {
      this.skipWhitespace();
      if (this.pos >= text.length) this.fail("EOF while parsing an object");
      if (text.charCodeAt(this.pos) !== QUOTE) {
        this.fail("key must be a string", this.pos + 1);
      }
      const keyPos = this.pos;
      const ks = keyPos + 1;
      const ke = this.string();
      let key = text.slice(ks, ke);
      if (this.escapedString) {
        try {
          key = JSON.parse(text.slice(ks - 1, ke + 1));
        } catch {
          this.fail("invalid escape", ke);
        }
      }
      if (Array.isArray(keys)) {
        if (keys.includes(key)) {
          this.fail(`duplicate JSON object key \`${key}\``, keyPos + 1);
        }
        keys.push(key);
        if (keys.length > 16) keys = new Set(keys);
      } else {
        if (keys.has(key)) {
          this.fail(`duplicate JSON object key \`${key}\``, keyPos + 1);
        }
        keys.add(key);
      }
      this.skipWhitespace();
      if (text.charCodeAt(this.pos) !== 0x3a /* : */) {
        if (this.pos >= text.length) this.fail("EOF while parsing an object");
        this.fail("expected `:`", this.pos + 1);
      }
      this.pos++;
      this.skipWhitespace();
      const valueStart = this.pos;
      this.value(depth);
      if (depth === 1 && key === "id") {
        const c = text.charCodeAt(valueStart);
        if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
          this.idSource = text.slice(valueStart, this.pos);
        }
      }
      this.skipWhitespace();
      const c = text.charCodeAt(this.pos);
      if (c === 0x2c /* , */) {
        this.pos++;
        continue;
      }
      if (c === 0x7d /* } */) {
        this.pos++;
        return;
      }
      if (this.pos >= text.length) this.fail("EOF while parsing an object");
      this.fail("expected `,` or `}`", this.pos + 1);
    }
  }

  array(depth: number): void {
    if (depth > this.limits.maxDepth) this.fail("recursion limit exceeded");
    const text = this.text;
    this.pos++; // [
    this.skipWhitespace();
    if (text.charCodeAt(this.pos) === 0x5d /* ] */) {
      this.pos++;
      return;
    }
    for (;;) {
      this.skipWhitespace();
      this.value(depth);
      this.skipWhitespace();
      const c = text.charCodeAt(this.pos);
      if (c === 0x2c) {
        this.pos++;
        continue;
      }
      if (c === 0x5d) {
        this.pos++;
        return;
      }
      if (this.pos >= text.length) this.fail("EOF while parsing a list");
      this.fail("expected `,` or `]`", this.pos + 1);
    }
  }
}

/** Line and column (1-based line, column counted in characters) of `pos`. */
function lineColumn(text: string, pos: number): [number, number] {
  let line = 1;
  let lineStart = 0;
  let nl = text.indexOf("\n");
  while (nl !== -1 && nl < pos) {
    line++;
    lineStart = nl + 1;
    nl = text.indexOf("\n", lineStart);
  }
  return [line, Math.max(0, pos - lineStart)];
}

/**
 * A `JSON.parse` reviver keeping integer literals beyond the safe range
 * exact, as `bigint` (from the literal's source text).
 */
function exactIntegers(
  this: unknown,
  _key: string,
  value: unknown,
  context?: { source?: string },
): unknown {
  if (typeof value !== "number" || Number.isSafeInteger(value)) return value;
  const source = context?.source;
  return source !== undefined && /^-?\d+$/.test(source) ? BigInt(source) : value;
}

/**
 * Parses `text` as one JSON value, rejecting duplicate object keys, more than
 * `limits.maxValues` values, nesting deeper than `limits.maxDepth`, and
 * trailing characters. Integer literals beyond `Number.MAX_SAFE_INTEGER`
 * are returned as `bigint` (exact); other numbers as `number`. Never throws.
 */
export function parseStrictJson(
  text: string,
  limits: StrictJsonLimits = DEFAULT_JSON_LIMITS,
): StrictJsonResult {
  return (text.length <= CANONICAL_MAX ? parseCanonical(text, limits) : undefined) ??
    parseScanned(text, limits);
}

/** Longest text tried as canonical JSON first (a request, not a file's contents). */
const CANONICAL_MAX = 64 * 1024;

/**
 * The fast path, for text that is exactly what `JSON.stringify` makes of
 * its own value — compact, canonical numbers, keys once each (a duplicate
 * key is dropped by `JSON.parse`, so its text can never be that), integers
 * exact — as serde and `JSON.stringify` clients send: native parse and
 * serialise, then a walk of the value for the budget and depth. Undefined
 * for anything else (the scan decides, with its precise errors).
 */
function parseCanonical(text: string, limits: StrictJsonLimits): StrictJsonResult | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (JSON.stringify(value) !== text) return undefined;
  if (countValues(value, 1, limits) < 0) return undefined;
  const id = typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>).id
    : undefined;
  // Canonical: a number's text is its serialisation.
  return { ok: true, value, idSource: typeof id === "number" ? String(id) : undefined };
}

/**
 * The JSON values in `value` (itself included), or -1 when they exceed the
 * value budget or nest deeper than allowed (`depth`: its own nesting level
 * should it be an object or array), or hold an integer beyond 2^53.
 */
function countValues(value: unknown, depth: number, limits: StrictJsonLimits): number {
  if (typeof value !== "object" || value === null) {
    // An integer beyond 2^53 (even one a double holds exactly) is a
    // `bigint` from the scan: decoders tell u64 from a rounded number so.
    return typeof value === "number" && Number.isInteger(value) && !Number.isSafeInteger(value)
      ? -1
      : 1;
  }
  if (depth > limits.maxDepth) return -1;
  let n = 1;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const inner = countValues(value[i], depth + 1, limits);
      if (inner < 0 || (n += inner) > limits.maxValues) return -1;
    }
  } else {
    for (const key in value) {
      const inner = countValues((value as Record<string, unknown>)[key], depth + 1, limits);
      if (inner < 0 || (n += inner) > limits.maxValues) return -1;
    }
  }
  return n;
}

function parseScanned(text: string, limits: StrictJsonLimits): StrictJsonResult {
  const scanner = new Scanner(text, limits);
  try {
    scanner.skipWhitespace();
    scanner.value(0);
    scanner.skipWhitespace();
    if (scanner.pos < text.length) {
      scanner.fail("trailing characters", scanner.pos + 1);
    }
  } catch (error) {
    if (error instanceof ScanError) {
      const [line, column] = lineColumn(text, error.pos);
      return {
        ok: false,
        message: `${error.detail} at line ${line} column ${column}`,
      };
    }
    if (error instanceof RangeError) {
      return { ok: false, message: "recursion limit exceeded" };
    }
    throw error;
  }
  try {
    const value = scanner.wideIntegers ? JSON.parse(text, exactIntegers) : JSON.parse(text);
    return { ok: true, value, idSource: scanner.idSource };
  } catch (error) {
    // Structure was valid; the content of a string was not (bad escape or an
    // unescaped control character).
    return {
      ok: false,
      message: `invalid string: ${(error as Error).message}`,
    };
  }
}
