/**
 * {@link Check}: a condition the host evaluates on an object (JOSDK's workflow conditions), for
 * dependents' `readyWhen` and `reconcileWhen`.
 * @module
 */

/** A condition the host evaluates; build one with the static functions of {@link Check}. */
export type Check =
  | { readonly type: "fieldEquals"; readonly path: string; readonly value: string }
  | { readonly type: "fieldsEqual"; readonly left: string; readonly right: string }
  | { readonly type: "conditionTrue"; readonly conditionType: string }
  | { readonly type: "plugin"; readonly name: string };

/**
 * The conditions the host can evaluate.
 *
 * @example
 * ```ts
 * Check.fieldsEqual("status.readyReplicas", "spec.replicas");
 * Check.fieldEquals("spec.exposed", true);
 * Check.conditionTrue("Available");
 * Check.plugin("has-endpoints"); // decided by the reconciler's `check`
 * ```
 */
export const Check = {
  /**
   * The value at `path` (dot-separated, `[n]` indexes lists) equals `value`; a missing path
   * equals `null`.
   */
  fieldEquals(path: string, value: unknown): Check {
    return { type: "fieldEquals", path, value: JSON.stringify(value ?? null) };
  },
  /** The values at both paths are equal (and present). */
  fieldsEqual(left: string, right: string): Check {
    return { type: "fieldsEqual", left, right };
  },
  /** `status.conditions` has an entry of this type with status `"True"`. */
  conditionTrue(conditionType: string): Check {
    return { type: "conditionTrue", conditionType };
  },
  /** The reconciler's `check` decides; `name` names the condition for it. */
  plugin(name: string): Check {
    return { type: "plugin", name };
  },
};
