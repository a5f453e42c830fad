/**
 * Keeps a status's `conditions` the Kubernetes way (`metav1.Condition`): one condition per type,
 * and `lastTransitionTime` only moves when the condition's status changes. The host keeps
 * `Ready`, `Reconciling` and `Degraded` itself; these are for the plugin's own conditions.
 *
 * @example
 * ```ts
 * import { conditions } from "@wasmop/guest";
 * const current: conditions.Condition[] = [];
 * conditions.set(current, conditions.newCondition("Synced", true, "Pushed", "the record is up to date"));
 * conditions.isTrue(current, "Synced"); // true
 * ```
 * @module
 */

/** A status condition: `metav1.Condition`'s fields; conditions of other controllers may lack some. */
export interface Condition {
  type: string;
  /** `"True"`, `"False"` or `"Unknown"`. */
  status: string;
  reason?: string;
  message?: string;
  /** RFC 3339 time of the last change of `status`. */
  lastTransitionTime?: string;
  observedGeneration?: number;
  /** Fields of other controllers' conditions, kept as they are. */
  [field: string]: unknown;
}

/** A condition of `type` with a status, reason and message, its transition time now. */
export function newCondition(
  type: string,
  status: boolean | "True" | "False" | "Unknown",
  reason: string,
  message: string,
): Condition {
  const text = typeof status === "boolean" ? (status ? "True" : "False") : status;
  return { type, status: text, reason, message, lastTransitionTime: now() };
}

/**
 * Puts `condition` into `conditions`, replacing the one of its type; keeps that one's
 * `lastTransitionTime` when the status did not change. Returns whether the status changed (or
 * the condition is new).
 */
export function set(conditions: Condition[], condition: Condition): boolean {
  const index = conditions.findIndex((c) => c.type === condition.type);
  const existing = conditions[index];
  if (existing === undefined) {
    conditions.push(condition);
    return true;
  }
  const transition = existing.status !== condition.status;
  const lastTransitionTime = transition
    ? condition.lastTransitionTime
    : (existing.lastTransitionTime ?? condition.lastTransitionTime);
  conditions[index] = { ...condition, lastTransitionTime };
  return transition;
}

/** The condition of `type`, if any. */
export function get(conditions: readonly Condition[] | undefined, type: string): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

/** Whether the condition of `type` is there with status `"True"`. */
export function isTrue(conditions: readonly Condition[] | undefined, type: string): boolean {
  return get(conditions, type)?.status === "True";
}

/** Now, in seconds, as Kubernetes writes times (`2026-01-02T03:04:05Z`). */
export function now(): string {
  return new Date().toISOString().replace(/\.\d{3}Z$/, "Z");
}
