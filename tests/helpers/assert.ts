// std-style assertion names on top of node:assert/strict (JSR's @std/assert
// is unreachable here).
import nodeAssert from "node:assert/strict";

export function assert(condition: unknown, message?: string): asserts condition {
  nodeAssert.ok(condition, message);
}

export function assertEquals<T>(
  actual: unknown,
  expected: T,
  message?: string,
): asserts actual is T {
  nodeAssert.deepStrictEqual(actual, expected, message);
}

export function assertNotEquals(actual: unknown, expected: unknown, message?: string): void {
  nodeAssert.notDeepStrictEqual(actual, expected, message);
}

export function assertMatch(actual: string, expected: RegExp, message?: string): void {
  nodeAssert.match(actual, expected, message);
}

export function assertStringIncludes(actual: string, expected: string, message?: string): void {
  nodeAssert.ok(
    actual.includes(expected),
    message ??
      `expected ${JSON.stringify(actual).slice(0, 300)} to include ${JSON.stringify(expected)}`,
  );
}

export async function assertRejects<E extends Error = Error>(
  fn: () => Promise<unknown>,
  // deno-lint-ignore no-explicit-any
  errorClass?: new (...args: any[]) => E,
  messageIncludes?: string,
): Promise<E> {
  try {
    await fn();
  } catch (error) {
    if (errorClass) {
      nodeAssert.ok(error instanceof errorClass, `expected ${errorClass.name}, got ${error}`);
    }
    if (messageIncludes) {
      nodeAssert.ok(
        String((error as Error).message).includes(messageIncludes),
        `message ${JSON.stringify((error as Error).message)} lacks ${
          JSON.stringify(messageIncludes)
        }`,
      );
    }
    return error as E;
  }
  throw new Error("expected the promise to reject");
}

export function assertThrows(
  fn: () => unknown,
  // deno-lint-ignore no-explicit-any
  errorClass?: new (...args: any[]) => Error,
  messageIncludes?: string,
): Error {
  try {
    fn();
  } catch (error) {
    if (errorClass) {
      nodeAssert.ok(error instanceof errorClass, `expected ${errorClass.name}, got ${error}`);
    }
    if (messageIncludes) {
      nodeAssert.ok(
        String((error as Error).message).includes(messageIncludes),
        `message ${JSON.stringify((error as Error).message)} lacks ${
          JSON.stringify(messageIncludes)
        }`,
      );
    }
    return error as Error;
  }
  throw new Error("expected the function to throw");
}
