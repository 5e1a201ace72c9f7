/**
 * Typed, strict decoding of untrusted params.
 *
 * Messages are the reference server's, word for word (`missing field
 * \`argv\``, `invalid type: number, expected a string`, `unknown variant
 * \`kill\`, expected \`interrupt\``): Codex copies them into its model's
 * context. Where the problem is (`envPolicy.inherit`) goes to the log only.
 * There is no coercion; unknown members are ignored; struct params may also
 * be given positionally as an array.
 *
 * @module
 */

import { JsonRpcCode, RpcError } from "../jsonrpc/errors.ts";
import { Base64Part, describeJsonType } from "../jsonrpc/message.ts";

/** A decoding failure; becomes a `-32602` error. */
export class DecodeError extends RpcError {
  /** Creates the error; `path` locates the offending member. */
  constructor(readonly detail: string, readonly path: string) {
    super(JsonRpcCode.InvalidParams, detail, path ? { logDetail: `at \`${path}\`` } : undefined);
    this.name = "DecodeError";
  }
}

/** Turns an unknown value into `T` or throws {@linkcode DecodeError}. */
export interface Decoder<T> {
  /** Decodes `value` found at `path`. */
  (value: unknown, path: string): T;
  /** True when the member may be absent (or null). */
  readonly optional?: boolean;
}

/** Decoders running inside {@linkcode buffered} (decoding is synchronous). */
let bufferedDepth = 0;

/**
 * How serde describes an unexpected value: a number as `number` when read
 * straight from the message, by its value (`integer \`5\``) inside
 * {@linkcode buffered}.
 */
export function describe(value: unknown): string {
  if (bufferedDepth > 0 && (typeof value === "number" || typeof value === "bigint")) {
    const kind = typeof value === "bigint" || Number.isInteger(value)
      ? "integer"
      : "floating point";
    return `${kind} \`${value}\``;
  }
  return describeJsonType(value);
}

/**
 * `inner`, for values the reference reads through a buffer (an untagged or
 * flattened member) first: its errors name a number's value.
 */
export function buffered<T>(inner: Decoder<T>): Decoder<T> {
  return (v, path) => {
    bufferedDepth++;
    try {
      return inner(v, path);
    } finally {
      bufferedDepth--;
    }
  };
}

/** Throws serde's `invalid type: …, expected …`. */
export function typeError(value: unknown, expected: string, path: string): never {
  throw new DecodeError(`invalid type: ${describe(value)}, expected ${expected}`, path);
}

/** The location of member `key` of the value at `path`. */
export function join(path: string, key: string): string {
  return path ? `${path}.${key}` : key;
}

/** A string. */
export const string: Decoder<string> = (v, path) =>
  typeof v === "string" ? v : typeError(v, "a string", path);

/** A non-empty string. */
export function nonEmptyString(message: string): Decoder<string> {
  return (v, path) => {
    const s = string(v, path);
    if (s.length === 0) throw new DecodeError(message, "");
    return s;
  };
}

/** A boolean. */
export const boolean: Decoder<boolean> = (v, path) =>
  typeof v === "boolean" ? v : typeError(v, "a boolean", path);

function unsigned(max: number, name: string): Decoder<number> {
  return (v, path) => {
    if (typeof v === "bigint") {
      if (v < 0n || v > 0xffff_ffff_ffff_ffffn) throw new DecodeError("invalid number", path);
      if (max < Number.MAX_SAFE_INTEGER) {
        throw new DecodeError(`invalid value: integer \`${v}\`, expected ${name}`, path);
      }
      // Larger than any meaningful offset or duration: clamp.
      return Number.MAX_SAFE_INTEGER;
    }
    if (typeof v !== "number") typeError(v, name, path);
    // Negative, fractional or beyond 64 bits: not a u64 at all.
    if (!Number.isInteger(v) || v < 0 || v >= 2 ** 64) {
      throw new DecodeError("invalid number", path);
    }
    if (v > max) throw new DecodeError(`invalid value: integer \`${v}\`, expected ${name}`, path);
    return Math.min(v, Number.MAX_SAFE_INTEGER);
  };
}

/** A u64 kept exact: a `number` up to 2^53 - 1, a `bigint` beyond. */
export type ExactU64 = number | bigint;

/** A u64 member that must stay exact (file offsets): see {@linkcode ExactU64}. */
export const exactU64: Decoder<ExactU64> = (v, path) => {
  if (typeof v !== "bigint") return unsigned(Number.MAX_SAFE_INTEGER, "u64")(v, path);
  if (v < 0n || v > 0xffff_ffff_ffff_ffffn) throw new DecodeError("invalid number", path);
  return v;
};

/** A non-negative integer (values beyond 2^53 are clamped). */
export const u64: Decoder<number> = unsigned(Number.MAX_SAFE_INTEGER, "u64");
/** A non-negative integer the reference reads as `usize` (its errors say so). */
export const usize: Decoder<number> = unsigned(Number.MAX_SAFE_INTEGER, "usize");
/** A 32-bit unsigned integer. */
export const u32: Decoder<number> = unsigned(0xffff_ffff, "u32");
/** A 16-bit unsigned integer. */
export const u16: Decoder<number> = unsigned(0xffff, "u16");

/** Any JSON value, unchecked. */
export const unknownValue: Decoder<unknown> = (v) => v;

/** Makes a member optional: absent or `null` decode to `undefined`. */
export function optional<T>(inner: Decoder<T>): Decoder<T | undefined> {
  const d =
    ((v: unknown, path: string) =>
      v === undefined || v === null ? undefined : inner(v, path)) as Decoder<T | undefined>;
  return Object.assign(d, { optional: true });
}

/**
 * serde's `#[serde(default)]`: an absent member takes `fallback`; `null` is
 * a value like any other, so it fails unless `inner` accepts it
 * (`invalid type: null, expected a boolean`).
 */
export function withDefault<T>(inner: Decoder<T>, fallback: T): Decoder<T> {
  const d = ((v: unknown, path: string) => v === undefined ? fallback : inner(v, path)) as Decoder<
    T
  >;
  return Object.assign(d, { optional: true });
}

/** An `Option<T>` member read with a default: absent or `null` take `fallback`. */
export function optionalOr<T>(inner: Decoder<T>, fallback: T): Decoder<T> {
  const d =
    ((v: unknown, path: string) =>
      v === undefined || v === null ? fallback : inner(v, path)) as Decoder<T>;
  return Object.assign(d, { optional: true });
}

/** Optional, but an explicit `null` is kept (for `T | null` members). */
export function nullable<T>(inner: Decoder<T>): Decoder<T | null | undefined> {
  const d =
    ((v: unknown, path: string) =>
      v === undefined ? undefined : v === null ? null : inner(v, path)) as Decoder<
        T | null | undefined
      >;
  return Object.assign(d, { optional: true });
}

/** Formats the accepted variants the way serde does. */
export function expectedVariants(variants: readonly string[]): string {
  const q = variants.map((v) => `\`${v}\``);
  if (q.length === 1) return q[0]!;
  if (q.length === 2) return `${q[0]} or ${q[1]}`;
  return `one of ${q.join(", ")}`;
}

/** One of a fixed set of strings. */
export function variant<const V extends string>(variants: readonly V[]): Decoder<V> {
  return (v, path) => {
    if (typeof v !== "string") typeError(v, "a string", path);
    if (!(variants as readonly string[]).includes(v)) {
      throw new DecodeError(
        `unknown variant \`${v}\`, expected ${expectedVariants(variants)}`,
        path,
      );
    }
    return v as V;
  };
}

/** An array whose items decode with `item`. */
export function array<T>(item: Decoder<T>): Decoder<T[]> {
  return (v, path) => {
    if (!Array.isArray(v)) typeError(v, "a sequence", path);
    return v.map((x, i) => item(x, `${path}[${i}]`));
  };
}

/** An object whose values decode with `value`. */
export function record<T>(value: Decoder<T>): Decoder<Record<string, T>> {
  return (v, path) => {
    if (v === null || typeof v !== "object" || Array.isArray(v)) typeError(v, "a map", path);
    // fromEntries defines own members: `__proto__` is a key like any other.
    return Object.fromEntries(
      Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, value(x, join(path, k))]),
    );
  };
}

/** Decoders for each member of `T`, in declaration (validation) order. */
export type FieldDecoders<T> = { [K in keyof T]-?: Decoder<T[K]> };

/**
 * A struct: an object (unknown members ignored, or refused with
 * `denyUnknownFields`, as serde's attribute) or a positional array in field
 * order. `null` is rejected.
 */
export function struct<T>(
  name: string,
  fields: FieldDecoders<T>,
  options: { denyUnknownFields?: boolean } = {},
): Decoder<T> {
  const keys = Object.keys(fields) as (keyof T & string)[];
  return (v, path) => {
    if (Array.isArray(v)) {
      if (v.length !== keys.length) {
        throw new DecodeError(
          `invalid length ${v.length}, expected struct ${name} with ${keys.length} elements`,
          path,
        );
      }
      const out = {} as T;
      keys.forEach((k, i) => {
        const decoded = fields[k](v[i], join(path, k));
        if (decoded !== undefined) out[k] = decoded;
      });
      return out;
    }
    if (v === null || v === undefined || typeof v !== "object") {
      typeError(v, `struct ${name}`, path);
    }
    const obj = v as Record<string, unknown>;
    if (options.denyUnknownFields) {
      const unknown = Object.keys(obj).find((k) => !(k in fields));
      if (unknown !== undefined) {
        throw new DecodeError(
          `unknown field \`${unknown}\`, expected one of ${keys.map((k) => `\`${k}\``).join(", ")}`,
          path,
        );
      }
    }
    const out = {} as T;
    for (const k of keys) {
      const decoder = fields[k];
      const member = obj[k];
      if (member === undefined && !decoder.optional) {
        throw new DecodeError(`missing field \`${k}\``, path);
      }
      const decoded = decoder(member, join(path, k));
      if (decoded !== undefined) out[k] = decoded;
    }
    return out;
  };
}

/** What decoder `D` gives. */
export type DecodedOf<D> = D extends Decoder<infer T> ? T : never;

/**
 * The object a struct of `fields` decodes to, inferred from the field
 * decoders: a member whose decoder may give `undefined` is optional.
 */
export type StructOf<F> =
  & { -readonly [K in keyof F as undefined extends DecodedOf<F[K]> ? never : K]: DecodedOf<F[K]> }
  & {
    -readonly [K in keyof F as undefined extends DecodedOf<F[K]> ? K : never]?: Exclude<
      DecodedOf<F[K]>,
      undefined
    >;
  };

/**
 * {@linkcode struct} with the decoded type inferred from `fields` (one
 * place for a shape that differs from the wire type: paths resolved,
 * bytes decoded, defaults applied).
 */
export function structOf<F extends Record<string, Decoder<unknown>>>(
  name: string,
  fields: F,
  options: { denyUnknownFields?: boolean } = {},
): Decoder<StructOf<F>> {
  return struct<StructOf<F>>(name, fields as unknown as FieldDecoders<StructOf<F>>, options);
}

/** Params of methods that take none: absent, `null` or `{}` (not `[]`). */
export const unit: Decoder<Record<never, never>> = (v, path) => {
  if (v === undefined || v === null) return {};
  if (typeof v === "object" && !Array.isArray(v) && Object.keys(v as object).length === 0) {
    return {};
  }
  return typeError(v, "unit", path);
};

const BASE64_VALUE = (() => {
  const table = new Int16Array(128).fill(-1);
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (let i = 0; i < alphabet.length; i++) table[alphabet.charCodeAt(i)] = i;
  return table;
})();

/**
 * Validates standard padded base64; returns null when valid, otherwise the
 * reason in the wording of Rust's `base64` crate.
 */
export function base64Problem(s: string): string | null {
  let end = s.length;
  let padding = 0;
  while (end > 0 && s.charCodeAt(end - 1) === 61 /* = */ && padding < 2) {
    end--;
    padding++;
  }
  for (let i = 0; i < end; i++) {
    const c = s.charCodeAt(i);
    if (c >= 128 || BASE64_VALUE[c] === -1) return `Invalid symbol ${c}, offset ${i}.`;
  }
  if (s.length % 4 !== 0) {
    if (end % 4 === 1) return `Invalid input length.`;
    return "Invalid padding";
  }
  if (padding > 0 && end % 4 === 0) return "Invalid padding";
  // Non-canonical trailing bits (e.g. "aGk=" vs "aGl=") are accepted.
  return null;
}

/** Decodes validated base64 to bytes. */
export function decodeBase64(s: string): Uint8Array {
  return Uint8Array.fromBase64(s, { lastChunkHandling: "loose" });
}

/**
 * Decodes standard padded base64 as Rust's `base64` crate would accept it;
 * the problem in its wording otherwise. The native decoder already refuses
 * foreign symbols and misplaced padding; the one thing it tolerates that
 * the crate does not, ASCII whitespace, makes its result shorter than the
 * length predicts. So valid input (nearly all of it) is decoded in one
 * native pass, and only the rest is scanned for the exact problem.
 */
export function decodeStrictBase64(s: string): Uint8Array | { problem: string } {
  if (s.length % 4 === 0) {
    const padding = s.endsWith("==") ? 2 : s.endsWith("=") ? 1 : 0;
    try {
      const decoded = decodeBase64(s);
      if (decoded.length === (s.length / 4) * 3 - padding) return decoded;
    } catch { /* the exact problem is found below */ }
  }
  const problem = base64Problem(s);
  // Not reached for input the native decoder refused or shortened.
  return problem === null ? decodeBase64(s) : { problem };
}

/** A base64 `ByteChunk`, decoded to bytes (by the transport already, for a large one). */
export const bytes: Decoder<Uint8Array> = (v, path) => {
  if (v instanceof Base64Part) return v.bytes;
  const decoded = decodeStrictBase64(string(v, path));
  if (decoded instanceof Uint8Array) return decoded;
  throw new DecodeError(decoded.problem, path);
};

/**
 * A base64 string validated later by its handler: the text as sent, or the
 * bytes when the transport decoded a large one (valid by then).
 */
export const base64Text: Decoder<string | Uint8Array> = (v, path) =>
  v instanceof Base64Part ? v.bytes : string(v, path);

/**
 * Decodes `params` with `decoder`, mapping failures to `-32602` RpcErrors.
 * Other RpcErrors raised by decoders (e.g. path rules) pass through.
 */
export function decodeParams<T>(decoder: Decoder<T>, params: unknown): T {
  return decoder(params, "");
}

/**
 * An internally tagged enum (serde `#[serde(tag = "type")]`): the `tag`
 * member names the variant, whose struct decoder reads the rest.
 */
export function tagged<T>(
  name: string,
  tag: string,
  variants: { readonly [variant: string]: Decoder<T> },
): Decoder<T> {
  const names = Object.keys(variants);
  return (v, path) => {
    if (v === null || typeof v !== "object" || Array.isArray(v)) {
      typeError(v, `internally tagged enum ${name}`, path);
    }
    const which = (v as Record<string, unknown>)[tag];
    if (which === undefined) throw new DecodeError(`missing field \`${tag}\``, path);
    const decoder = variants[variant(names)(which, join(path, tag))]!;
    return decoder(v, path);
  };
}

/** A serde unit-variant enum that also accepts the `{"variant": null}` map form. */
export function unitEnum<const V extends string>(variants: readonly V[]): Decoder<V> {
  const name = variant(variants);
  return (v, path) => {
    if (typeof v === "string") return name(v, path);
    if (v === null || typeof v !== "object" || Array.isArray(v)) {
      typeError(v, "string or map", path);
    }
    const entries = Object.entries(v as Record<string, unknown>);
    if (entries.length !== 1) {
      throw new DecodeError("invalid value: map, expected map with a single key", path);
    }
    const [key, inner] = entries[0]!;
    const chosen = name(key, path);
    if (inner !== null) typeError(inner, "unit", join(path, key));
    return chosen;
  };
}
