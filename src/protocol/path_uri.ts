/**
 * `file:` URIs, the only way paths travel on the wire.
 *
 * Parsing follows WHATWG URL rules (dot segments removed, `localhost`
 * dropped, percent-decoding), then the reference's validation: relative
 * input, other schemes, queries and fragments are `-32602`; a NUL byte is
 * `-32602`; a non-local host or a drive letter is `-32600`.
 *
 * @module
 */

import { JsonRpcCode, RpcError } from "../jsonrpc/errors.ts";
import { DecodeError, type Decoder, string } from "./decode.ts";

const utf8 = new TextDecoder();

function percentDecode(s: string): string {
  if (!s.includes("%")) return s;
  const bytes: number[] = [];
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (
      c === 37 /* % */ && i + 2 < s.length + 0 && /^[0-9a-fA-F]{2}$/.test(s.slice(i + 1, i + 3))
    ) {
      bytes.push(parseInt(s.slice(i + 1, i + 3), 16));
      i += 2;
    } else if (c < 0x80) {
      bytes.push(c);
    } else {
      bytes.push(...new TextEncoder().encode(s[i]!));
    }
  }
  return utf8.decode(new Uint8Array(bytes));
}

/**
 * Parses a `file:` URI into an absolute native path. Throws an
 * {@linkcode RpcError} with the reference's code and message otherwise.
 */
export function parsePathUri(uri: string, path = ""): string {
  // The common case, a plain absolute path, is its own parse: no URL object.
  if (PLAIN_FILE_URI.test(uri) && !uri.includes("/.", 7) && !uri.includes("//", 7)) {
    const native = uri.slice(7);
    return native.length > 1 && native.endsWith("/") ? native.slice(0, -1) : native;
  }
  return parsePathUriSlow(uri, path);
}

/**
 * `file:///` and then only characters the URL parser keeps as they are and
 * that need no percent-decoding; with no `.`/`..` segment and no empty
 * segment besides a trailing one, the path is the text after `file://`.
 */
const PLAIN_FILE_URI = /^file:\/\/\/[A-Za-z0-9_~+,=@\/.-]*$/;

/** {@linkcode parsePathUri} without the shortcut: through the URL parser. */
export function parsePathUriSlow(uri: string, path = ""): string {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    const hasScheme = /^[a-zA-Z][a-zA-Z0-9+.-]*:/.test(uri);
    throw new DecodeError(
      hasScheme && /^file:/i.test(uri)
        ? "invalid URI: invalid international domain name"
        : hasScheme
        ? "invalid URI: invalid URL"
        : "invalid URI: relative URL without a base",
      path,
    );
  }
  if (url.protocol !== "file:") {
    throw new DecodeError(`unsupported path URI scheme \`${url.protocol.slice(0, -1)}\``, path);
  }
  if (url.search !== "") {
    throw new DecodeError("query parameters are not allowed in path URIs", path);
  }
  if (url.hash !== "") throw new DecodeError("fragments are not allowed in path URIs", path);
  const native = percentDecode(url.pathname);
  if (native.includes("\0")) throw new DecodeError(`'${uri}' is invalid on 'linux'`, path);
  if (url.hostname !== "" || /^\/[A-Za-z]:(\/|$)/.test(url.pathname)) {
    throw new RpcError(JsonRpcCode.InvalidRequest, `'${uri}' is invalid on 'linux'`);
  }
  // `file:///a/` names the same file as `file:///a`.
  return native.length > 1 && native.endsWith("/") ? native.replace(/\/+$/, "") || "/" : native;
}

/** Formats an absolute native path as a canonical `file:` URI. */
export function pathToUri(path: string): string {
  let p = path.length > 1 ? path.replace(/\/+$/, "") : path;
  if (p === "") p = "/";
  const encoded = p.split("/").map((segment) =>
    encodeURIComponent(segment).replace(/%3A/gi, ":").replace(/%40/g, "@").replace(/%2B/gi, "+")
      .replace(/%24/g, "$").replace(/%26/g, "&").replace(/%3D/gi, "=").replace(/%2C/gi, ",")
  ).join("/");
  return `file://${encoded}`;
}

/** Converts a string path or `URL` into a `file:` URI (client side). */
export function toPathUri(path: string | URL): string {
  if (path instanceof URL) {
    if (path.protocol !== "file:") throw new TypeError(`not a file: URL: ${path.href}`);
    return path.href;
  }
  if (/^file:/i.test(path)) return path;
  if (!path.startsWith("/")) throw new TypeError(`path must be absolute: ${path}`);
  return pathToUri(path);
}

/** A `file:` URI member, decoded to an absolute native path. */
export const pathUri: Decoder<string> = (v, path) => parsePathUri(string(v, path), path);

/**
 * `process/start.cwd`: a path URI that names another host (or a drive) is
 * invalid params there, with the reference's wording (`cwd URI \`…\` is not
 * valid on this exec-server host: …`).
 */
export const cwdUri: Decoder<string> = (v, path) => {
  const uri = string(v, path);
  try {
    return parsePathUri(uri, path);
  } catch (error) {
    if (error instanceof RpcError && error.code === JsonRpcCode.InvalidRequest) {
      throw new RpcError(
        JsonRpcCode.InvalidParams,
        `cwd URI \`${uri}\` is not valid on this exec-server host: ${error.message}`,
      );
    }
    throw error;
  }
};
