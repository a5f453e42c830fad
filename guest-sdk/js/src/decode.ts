/**
 * {@link requireFields}: a small check of the primary's shape for a reconciler's `decode`, so a
 * primary that lacks what the plugin reads is `invalid` rather than a crash in `reconcile`. For
 * richer schemas, write `decode` with the validation library of your choice.
 * @module
 */
import { ReconcileError } from "./errors.js";

/** The JSON types a field can be required to have. */
export type FieldType = "string" | "number" | "boolean" | "object" | "array";

function typeOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}

function show(value: unknown): string {
  const text = JSON.stringify(value);
  return text.length > 60 ? `${text.slice(0, 60)}...` : text;
}

/**
 * A `decode` that checks the fields at dot-separated paths have the given JSON types and then
 * takes the object as a `P`; it throws an `invalid` {@link ReconcileError} naming the first field
 * that does not fit.
 *
 * @example
 * ```ts
 * export default {
 *   decode: requireFields({ "spec.name": "string" }),
 *   // ...
 * } satisfies Reconciler<Resource<Spec>>;
 * ```
 */
export function requireFields<P>(fields: Readonly<Record<string, FieldType>>): (object: unknown) => P {
  return (object) => {
    for (const [path, type] of Object.entries(fields)) {
      const value = path.split(".").reduce<unknown>((at, key) => (typeOf(at) === "object" ? (at as Record<string, unknown>)[key] : undefined), object);
      if (value === undefined) throw ReconcileError.invalid(`${path}: missing`);
      if (typeOf(value) !== type) throw ReconcileError.invalid(`${path}: expected ${type === "array" ? "a list" : `a ${type}`}, got ${show(value)}`);
    }
    return object as P;
  };
}
