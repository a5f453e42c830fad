/**
 * {@link ReconcileError}: how a reconcile (or another call) fails.
 * @module
 */
import { parseDuration } from "./duration.js";

/** How the host treats a failure: retried with backoff, not retried, or the primary is invalid. */
export type ErrorKind = "transient" | "permanent" | "invalid";

/**
 * A failed call. Throw it from a reconciler; the host retries `transient` errors with backoff,
 * does not retry `permanent` ones until the object changes, and treats `invalid` as a primary that
 * does not fit the plugin. Anything else a reconciler throws reaches the host as `transient`, with
 * the thrown error's name and message.
 *
 * Named `ReconcileError` rather than the Rust SDK's `Error` so it does not shadow JavaScript's
 * `Error`.
 *
 * @example
 * ```ts
 * if (!page.spec.html) throw ReconcileError.invalid("spec.html is required");
 * ```
 */
export class ReconcileError extends Error {
  protected constructor(
    /** How the host treats the failure. */
    readonly kind: ErrorKind,
    message: string,
    /** Milliseconds before the retry of a transient error, in place of the backoff; `undefined`: the backoff. */
    readonly delayMs: number | undefined = undefined,
  ) {
    super(message);
    this.name = "ReconcileError";
  }

  /** Something that may succeed later: retried with backoff (or after {@link ReconcileError.retryAfter}'s delay). */
  static transient(message: string): ReconcileError {
    return new ReconcileError("transient", message);
  }

  /**
   * This transient error retried after `delay` (milliseconds, or a Go duration such as `"30s"`)
   * instead of the retry policy's backoff, e.g. a rate-limited API's `Retry-After` (kopf's
   * `TemporaryError(delay=)`). The policy still bounds it: capped at `maxIntervalMs`, and the
   * retry counts toward `maxAttempts`. Permanent and invalid errors are not retried: they come
   * back as they are.
   *
   * @example
   * ```ts
   * throw ReconcileError.transient("the DNS API is rate limited").retryAfter("30s");
   * ```
   */
  retryAfter(delay: number | string): ReconcileError {
    if (this.kind !== "transient") return this;
    const ms = typeof delay === "string" ? parseDuration(delay) : delay;
    if (!(ms >= 0)) throw new RangeError(`a retry delay is a number of milliseconds, at least 0; got ${delay}`);
    return new ReconcileError("transient", this.message, ms);
  }

  /** Retrying will not help: no retry until the object changes. */
  static permanent(message: string): ReconcileError {
    return new ReconcileError("permanent", message);
  }

  /** The primary itself is invalid (e.g. its spec lacks a field): not retried. */
  static invalid(message: string): ReconcileError {
    return new ReconcileError("invalid", message);
  }

  /** Rebuilds an error of a given kind, e.g. one the host hands back to `errorStatus`. */
  static of(kind: ErrorKind, message: string): ReconcileError {
    return new ReconcileError(kind, message);
  }

  /**
   * `error` as a `ReconcileError`: itself when it is one, else a transient error carrying its
   * message (an `Error`'s `name: message`, a component error's payload, or the thrown value).
   */
  static from(error: unknown): ReconcileError {
    if (error instanceof ReconcileError) return error;
    return ReconcileError.transient(messageOf(error));
  }

  /** `kind: message`, as the Rust SDK displays errors. */
  override toString(): string {
    return `${this.kind}: ${this.message}`;
  }
}

/**
 * The message of anything thrown: a component error's `payload` (what the host's imports throw),
 * an `Error`'s `name: message` (or just the message of a {@link ReconcileError}), or the value
 * as text.
 */
export function messageOf(error: unknown): string {
  if (error instanceof ReconcileError) return error.message;
  if (typeof error === "object" && error !== null && "payload" in error) return String(error.payload);
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}

/** `text` as a JSON object, or throws a {@link ReconcileError} (invalid) naming `what` and why not. */
export function parseObject(text: string, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw ReconcileError.invalid(`${what} is not JSON: ${messageOf(error)}`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw ReconcileError.invalid(`${what} is not a JSON object`);
  }
  return value as Record<string, unknown>;
}
