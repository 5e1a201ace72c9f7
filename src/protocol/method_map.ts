/**
 * The method table's types, as the client's parts import them (see
 * `spec.ts`, where they are defined).
 *
 * @module
 */

export type { EmptyResult, MethodMap, MethodParams, MethodResult, RequestFn } from "./spec.ts";
