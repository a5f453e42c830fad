/**
 * What the host's admission calls run: a reconciler's `validate`, `default` (`defaultOther`) and
 * `convert` on the JSON text the host sends, shared by the component export and
 * `@wasmop/guest/testing` so that tests run the code the component runs.
 * @module
 */
import type { Context } from "./context.js";
import { ReconcileError, messageOf, parseObject } from "./errors.js";
import type { Reconciler } from "./reconciler.js";
import { Verdict, type AdmissionRequest } from "./webhook.js";

/** Whether `request` is about the reconciler's primary kind (in any of its versions). */
function isPrimary<P>(reconciler: Reconciler<P>, request: AdmissionRequest<string>): boolean {
  const primary = reconciler.config().primary;
  return request.kind.group === primary.group && request.kind.kind === primary.kind;
}

/**
 * Runs `reconciler.validate` on `request` (its objects JSON text): decoded with `decode` for the
 * primary's kind (one that does not decode is denied), parsed for other kinds.
 */
export function validate<P>(reconciler: Reconciler<P>, request: AdmissionRequest<string>, ctx: Context): Verdict {
  if (reconciler.validate === undefined) return Verdict.deny(`plugin ${reconciler.config().name} does not implement validate`);
  const primary = isPrimary(reconciler, request);
  let objects: [P | undefined, P | undefined];
  try {
    const parse = (text: string | undefined): P | undefined => {
      if (text === undefined) return undefined;
      const object = parseObject(text, "the object");
      return primary && reconciler.decode !== undefined ? reconciler.decode(object) : (object as P);
    };
    objects = [parse(request.object), parse(request.oldObject)];
  } catch (error) {
    return Verdict.deny(messageOf(error));
  }
  const verdict = reconciler.validate({ ...request, object: objects[0], oldObject: objects[1] }, ctx);
  if (!(verdict instanceof Verdict)) throw new TypeError("validate must return a Verdict");
  return verdict;
}

/** A deep copy of `value` as plain JSON. */
function json(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value ?? null));
}

/**
 * Runs `reconciler.default` (`defaultOther` for another kind) on `request`'s object (JSON text)
 * and returns the object as it should be stored, as JSON text. Only what `default` changed in
 * the decoded primary is changed in the object sent, so fields `decode` drops are kept. Throws a
 * {@link ReconcileError} to deny (the handler's, or a primary that does not decode); anything
 * else the handler throws is thrown as it is.
 */
export function defaultObject<P>(reconciler: Reconciler<P>, request: AdmissionRequest<string>, ctx: Context): string {
  const name = reconciler.config().name;
  if (request.object === undefined) throw ReconcileError.invalid(`a ${request.operation} request has no object to default`);
  const sent = parseObject(request.object, "the object");
  if (!isPrimary(reconciler, request)) {
    if (reconciler.defaultOther === undefined) throw ReconcileError.permanent(`plugin ${name} does not implement defaultOther`);
    reconciler.defaultOther(sent, ctx);
    return JSON.stringify(sent);
  }
  if (reconciler.default === undefined) throw ReconcileError.permanent(`plugin ${name} does not implement default`);
  // A second copy, for `decode` and `default` to have as their own.
  const fresh = parseObject(request.object, "the object");
  let typed: P;
  try {
    typed = reconciler.decode === undefined ? (fresh as P) : reconciler.decode(fresh);
  } catch (error) {
    throw error instanceof ReconcileError ? error : ReconcileError.invalid(messageOf(error));
  }
  const before = json(typed);
  reconciler.default(typed, ctx);
  applyChanges(sent, before, json(typed));
  return JSON.stringify(sent);
}

/**
 * Runs `reconciler.convert` on each of `objects` (JSON text) not already of `desiredApiVersion`,
 * in order; each converted one gets it as its `apiVersion`. Throws a {@link ReconcileError}
 * naming what failed, whatever the handler threw.
 */
export function convert<P>(reconciler: Reconciler<P>, objects: string[], desiredApiVersion: string, ctx: Context): string[] {
  const convertOne = reconciler.convert;
  if (convertOne === undefined) throw ReconcileError.permanent(`plugin ${reconciler.config().name} does not implement convert`);
  return objects.map((text) => {
    const object = parseObject(text, "an object to convert");
    if (object.apiVersion === desiredApiVersion) return JSON.stringify(object);
    let converted: unknown;
    try {
      converted = convertOne.call(reconciler, object, desiredApiVersion, ctx);
    } catch (error) {
      throw ReconcileError.permanent(messageOf(error));
    }
    if (typeof converted !== "object" || converted === null || Array.isArray(converted)) {
      throw ReconcileError.permanent(`the conversion to ${desiredApiVersion} did not give an object: ${JSON.stringify(converted)}`);
    }
    return JSON.stringify({ ...converted, apiVersion: desiredApiVersion });
  });
}

/** `value` is a JSON object (not an array, not null). */
function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Whether two JSON values are equal. */
function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * Makes in `target` the changes that turn `before` into `after`, as a JSON merge patch from one
 * to the other would: changed values are set, fields that became `null` or went are removed, and
 * what did not change, or what `before` never had, is left as `target` has it.
 */
export function applyChanges(target: Record<string, unknown>, before: unknown, after: unknown): void {
  if (!isObject(before) || !isObject(after)) return;
  for (const [key, now] of Object.entries(after)) {
    const was = before[key];
    if (key in before && same(was, now)) continue;
    const into = target[key];
    if (now === null) delete target[key];
    else if (isObject(was) && isObject(now) && isObject(into)) applyChanges(into, was, now);
    else target[key] = now;
  }
  for (const key of Object.keys(before)) {
    if (!(key in after)) delete target[key];
  }
}
