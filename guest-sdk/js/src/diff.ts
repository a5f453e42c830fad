/**
 * What changed between two versions of an object (kopf's `diff` and `on.field`): the added,
 * changed and removed fields, each with its path and its old and new value, and whether one
 * field changed. The same rules as the Rust SDK's `diff`; both check themselves against
 * `core/vectors/diff.json`.
 *
 * Objects are compared key by key, recursively; any other value (a list, a string, a number) is
 * compared whole, so a changed list is one change at the list's path. An absent field and a
 * `null` one are the same, as in a merge patch.
 * @module
 */

/** What happened to a field. */
export type ChangeOp = "add" | "change" | "remove";

/** One field that differs, as kopf's diff items `(op, field, old, new)`. */
export interface Change {
  /** What happened to it. */
  op: ChangeOp;
  /** The keys down to it; empty for the value itself. */
  path: string[];
  /** Its old value; `undefined` when it was absent. */
  old: unknown;
  /** Its new value; `undefined` when it is absent. */
  new: unknown;
}

/**
 * The fields that differ between `old` and `new`, in key order, depth first.
 *
 * @example
 * ```ts
 * diff({ replicas: 1 }, { replicas: 2 }); // [{ op: "change", path: ["replicas"], old: 1, new: 2 }]
 * ```
 */
export function diff(old: unknown, now: unknown): Change[] {
  const changes: Change[] = [];
  walk([], present(old), present(now), changes);
  return changes;
}

/** Whether the value at `path` (dots between keys, `spec.replicas`; empty: the whole value) differs. */
export function changed(old: unknown, now: unknown, path: string): boolean {
  return !same(at(old, path), at(now, path));
}

function at(value: unknown, path: string): unknown {
  let current = present(value);
  for (const key of path.split(".").filter((k) => k !== "")) {
    current = isObject(current) ? present(current[key]) : undefined;
  }
  return current;
}

function present(value: unknown): unknown {
  return value === null ? undefined : value;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => same(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    return [...keys].every((k) => same(a[k], b[k]));
  }
  return false;
}

function walk(path: string[], old: unknown, now: unknown, changes: Change[]): void {
  if (old === undefined && now === undefined) return;
  if (isObject(old) && isObject(now)) {
    for (const key of [...new Set([...Object.keys(old), ...Object.keys(now)])].sort()) {
      walk([...path, key], present(old[key]), present(now[key]), changes);
    }
  } else if (old === undefined) {
    changes.push({ op: "add", path, old: undefined, new: now });
  } else if (now === undefined) {
    changes.push({ op: "remove", path, old, new: undefined });
  } else if (!same(old, now)) {
    changes.push({ op: "change", path, old, new: now });
  }
}
