/**
 * The wasmop guest SDK for TypeScript: write a Kubernetes reconciler that the wasmop host runs as
 * a WebAssembly component (`wasmop:plugin@0.8.1`). The same concepts and names as the Rust SDK
 * (`wasmop-guest`), in TypeScript's spelling.
 *
 * A plugin's `plugin.ts` default-exports a {@link Reconciler}; `wasmop-guest build` bundles it
 * into a component, and `@wasmop/guest/testing` runs it in plain Node.
 * @module
 */
export { Check } from "./check.js";
export * as conditions from "./conditions.js";
export {
  Config,
  DEFAULT_FILTERS,
  DEFAULT_RETRY,
  PRIMARY_NAME_ANNOTATION,
  PRIMARY_NAMESPACE_ANNOTATION,
  Watch,
  type Filters,
  type Finalizer,
  type Mapper,
  type RateLimit,
  type Retry,
  type Sharding,
} from "./config.js";
export { Context, type Host, type Level } from "./context.js";
export { Crd, schema, type Common, type ListChecks, type NumberChecks, type Rule, type Schema, type StringChecks } from "./crd.js";
export { Cleanup, Dependent, DependentState, Desired, type Phase } from "./dependent.js";
export { requireFields, type FieldType } from "./decode.js";
export { changed, diff, type Change, type ChangeOp } from "./diff.js";
export { DurationError, formatDuration, formatNanos, parseDuration, parseNanos } from "./duration.js";
export { ReconcileError, type ErrorKind } from "./errors.js";
export { External, ExternalDependent, Polling, Tracked, type Tracking } from "./external.js";
export * as http from "./http.js";
export { HttpGrant, Inbound, Origin, SecretKey, type SecretHeader } from "./grant.js";
export { Kind } from "./kind.js";
export { Event, Outcome, type EventType, type Readiness } from "./outcome.js";
export { Predicate, type EventKind, type PredicateTerm } from "./predicate.js";
export type { PrimaryState, Reconciler } from "./reconciler.js";
export { Quantity, QuantityError, type QuantityFormat } from "./quantity.js";
export { PrimaryRef, SecondaryRef } from "./refs.js";
export type { KubeObject, ObjectMeta, OwnerReference, Resource } from "./resource.js";
export { AdmissionRequest, Verdict, Webhook, type FailurePolicy, type Operation, type WebhookType } from "./webhook.js";
