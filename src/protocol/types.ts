/**
 * Params, results and notification payloads of the exec-server protocol,
 * all families together (each is defined in its family file). Paths are
 * `file:` URI strings on the wire; byte fields are standard padded base64
 * strings.
 *
 * @module
 */

export type * from "./lifecycle.ts";
export type * from "./process.ts";
export type * from "./fs.ts";
export type * from "./http.ts";
export type * from "./network.ts";
export type * from "./sandbox.ts";
