/**
 * The WIT types of `wasmop:plugin@0.8.1` as componentize-js hands them to JavaScript (records
 * with camelCase fields, `option` as `undefined`, `u64` as `bigint`, variants as
 * `{ tag, val }`, enums as kebab-case strings), and the conversions between them and the SDK's
 * types. Pure data: nothing here touches the host.
 * @module
 */
import type { Check } from "./check.js";
import type { Config, Mapper, Sharding, Watch } from "./config.js";
import type { Level } from "./context.js";
import { DependentState, type Cleanup, type Dependent, type Desired, type Phase } from "./dependent.js";
import { ReconcileError, type ErrorKind } from "./errors.js";
import { External, type ExternalDependent, type Polling } from "./external.js";
import type { HttpGrant, Inbound, Origin, SecretKey } from "./grant.js";
import { Kind } from "./kind.js";
import type { Event, Outcome } from "./outcome.js";
import type { EventKind, Predicate } from "./predicate.js";
import type { PrimaryRef, SecondaryRef } from "./refs.js";
import type { KubeObject } from "./resource.js";
import type { AdmissionRequest, Operation, Verdict, Webhook } from "./webhook.js";

export interface WitKindRef {
  group: string;
  version: string;
  kind: string;
  plural: string | undefined;
  namespaced: boolean;
}
export type WitPredicateTerm =
  | { tag: "plugin"; val: string }
  | { tag: "generation-changed" | "labels-changed" | "annotations-changed" | "and" | "or" | "not" };
export type WitMapper =
  | { tag: "owner-references"; val: "controller" | "any" }
  | { tag: "annotations" | "plugin" | "primary-references" };
export interface WitWatch {
  kind: WitKindRef;
  namespace: string | undefined;
  labelSelector: string | undefined;
  fieldSelector: string | undefined;
  cluster: string | undefined;
  mapper: WitMapper;
  projection: string[] | undefined;
  predicate: WitPredicateTerm[] | undefined;
}
export type WitCondition =
  | { tag: "field-equals"; val: { path: string; value: string } }
  | { tag: "fields-equal"; val: { left: string; right: string } }
  | { tag: "condition-true"; val: string }
  | { tag: "plugin"; val: string };
export interface WitDependent {
  name: string;
  kind: WitKindRef;
  readOnly: boolean;
  dependsOn: string[];
  readyWhen: WitCondition | undefined;
  reconcileWhen: WitCondition | undefined;
  ownership: "owner-reference" | "annotations";
  readyWhenEmpty: boolean;
  namespace: string | undefined;
  adopt: boolean;
}
export interface WitExternalDependent {
  name: string;
  dependsOn: string[];
  readyWhen: WitCondition | undefined;
  reconcileWhen: WitCondition | undefined;
  readyWhenEmpty: boolean;
  tracking: "config-map" | "secret";
}
export interface WitSecretKey {
  name: string;
  namespace: string | undefined;
  key: string;
}
export interface WitHttpGrant {
  origins: {
    scheme: string;
    host: string;
    port: number | undefined;
    secretHeaders: { header: string; secret: WitSecretKey; prefix: string | undefined }[];
  }[];
  connectTimeoutMs: bigint | undefined;
  timeoutMs: bigint | undefined;
  maxResponseBytes: bigint | undefined;
  maxConcurrent: number | undefined;
}
export interface WitPluginConfig {
  name: string;
  primary: WitKindRef;
  labelSelector: string | undefined;
  fieldSelector: string | undefined;
  filters: { onCreate: boolean; onUpdate: boolean; onDelete: boolean; onAnnotationChange: boolean; onLabelChange: boolean };
  generationAware: boolean;
  retry:
    | { maxAttempts: number; initialIntervalMs: bigint; multiplier: number; maxIntervalMs: bigint; jitter: number }
    | undefined;
  maxReconcileIntervalMs: bigint | undefined;
  rateLimit: { maxReconciles: number; periodMs: bigint } | undefined;
  maxConcurrentReconciles: number | undefined;
  watches: WitWatch[];
  resyncPeriodMs: bigint | undefined;
  finalizer: { tag: "derived" } | { tag: "named"; val: string } | { tag: "disabled" };
  cleanup: boolean;
  dependents: WitDependent[];
  conditions: boolean;
  projection: string[] | undefined;
  predicate: WitPredicateTerm[] | undefined;
  http: WitHttpGrant | undefined;
  polling: { mode: "per-resource" | "global"; periodMs: bigint } | undefined;
  inbound: { token: WitSecretKey; caching: boolean } | undefined;
  externalDependents: WitExternalDependent[];
  sharding: "uid" | "namespace" | "none" | undefined;
  webhooks: WitWebhook[];
}
export type WitOperation = "create" | "update" | "delete" | "connect";
export interface WitWebhook {
  webhookType: "validating" | "mutating" | "conversion";
  kinds: WitKindRef[];
  operations: WitOperation[];
  failurePolicy: "fail" | "ignore";
  timeoutMs: number | undefined;
}
export interface WitEvent {
  eventType: "normal" | "warning";
  reason: string;
  action: string;
  note: string | undefined;
}
export interface WitExternalObject {
  dependent: string;
  key: string;
  id: string | undefined;
  object: string;
}
export interface WitReconcileRequest {
  object: string;
  attempt: number;
  lastAttempt: boolean;
  dependents: { name: string; phase: "ready" | "not-ready" | "skipped" | "deleted"; objects: string[] }[];
  external: WitExternalObject[];
  inbound: string | undefined;
}
export interface WitOutcome {
  readiness: { ready: boolean; message: string } | undefined;
  status: string | undefined;
  labels: [string, string | undefined][];
  annotations: [string, string | undefined][];
  rescheduleAfterMs: bigint | undefined;
  events: WitEvent[];
}
export interface WitCleanupOutcome {
  keepFinalizer: boolean;
  rescheduleAfterMs: bigint | undefined;
  events: WitEvent[];
}
export interface WitDesiredObject {
  dependent: string;
  object: string;
  keep: boolean;
  key: string | undefined;
}
export interface WitObjectRef {
  namespace: string | undefined;
  name: string;
}
export interface WitSecondaryRef {
  kind: WitKindRef;
  namespace: string | undefined;
  name: string;
}
export type WitReconcileError = { tag: ErrorKind; val: string };
export type WitLogLevel = Level;
export type WitEventKind = EventKind;

const U64_MAX = 2n ** 64n - 1n;

/**
 * Milliseconds as a `u64`: rounded, too large (or infinite) as the largest `u64`. A negative
 * duration or one that is not a number is refused with a `RangeError`, as the Python SDK refuses
 * it: in `config()` the plugin then fails to load, in an outcome the call fails (transient).
 */
export function millis(ms: number): bigint {
  if (Number.isNaN(ms)) throw new RangeError(`a duration must be a number of milliseconds, got ${ms}`);
  if (ms < 0) throw new RangeError(`a duration cannot be negative, got ${ms}`);
  if (!Number.isFinite(ms)) return U64_MAX;
  const value = BigInt(Math.round(ms));
  return value > U64_MAX ? U64_MAX : value;
}

function optionalMillis(ms: number | undefined): bigint | undefined {
  return ms === undefined ? undefined : millis(ms);
}

export function kindToWit(kind: Kind): WitKindRef {
  return { group: kind.group, version: kind.version, kind: kind.kind, plural: kind.pluralName, namespaced: kind.namespaced };
}

function predicateToWit(predicate: Predicate | undefined): WitPredicateTerm[] | undefined {
  return predicate?.terms.map((term) => {
    switch (term.type) {
      case "plugin":
        return { tag: "plugin", val: term.name };
      case "generationChanged":
        return { tag: "generation-changed" };
      case "labelsChanged":
        return { tag: "labels-changed" };
      case "annotationsChanged":
        return { tag: "annotations-changed" };
      default:
        return { tag: term.type };
    }
  });
}

const MAPPERS: Record<Mapper, WitMapper> = {
  ControllerOwner: { tag: "owner-references", val: "controller" },
  AnyOwner: { tag: "owner-references", val: "any" },
  Annotations: { tag: "annotations" },
  Plugin: { tag: "plugin" },
  PrimaryReferences: { tag: "primary-references" },
};

function watchToWit(watch: Watch): WitWatch {
  return {
    kind: kindToWit(watch.kind),
    namespace: watch.namespaceName,
    labelSelector: watch.labelSelectorText,
    fieldSelector: watch.fieldSelectorText,
    cluster: watch.clusterName,
    mapper: MAPPERS[watch.mapper],
    projection: watch.projection,
    predicate: predicateToWit(watch.predicateValue),
  };
}

export function checkToWit(check: Check | undefined): WitCondition | undefined {
  switch (check?.type) {
    case undefined:
      return undefined;
    case "fieldEquals":
      return { tag: "field-equals", val: { path: check.path, value: check.value } };
    case "fieldsEqual":
      return { tag: "fields-equal", val: { left: check.left, right: check.right } };
    case "conditionTrue":
      return { tag: "condition-true", val: check.conditionType };
    case "plugin":
      return { tag: "plugin", val: check.name };
  }
}

function dependentToWit(dependent: Dependent): WitDependent {
  return {
    name: dependent.name,
    kind: kindToWit(dependent.kind),
    readOnly: dependent.isReadOnly,
    dependsOn: [...dependent.dependencies],
    readyWhen: checkToWit(dependent.readyCheck),
    reconcileWhen: checkToWit(dependent.reconcileCheck),
    ownership: dependent.annotationOwned ? "annotations" : "owner-reference",
    readyWhenEmpty: dependent.readyWhenEmpty,
    namespace: dependent.namespace,
    adopt: dependent.adopts,
  };
}

function externalDependentToWit(dependent: ExternalDependent): WitExternalDependent {
  return {
    name: dependent.name,
    dependsOn: [...dependent.dependencies],
    readyWhen: checkToWit(dependent.readyCheck),
    reconcileWhen: checkToWit(dependent.reconcileCheck),
    readyWhenEmpty: dependent.readyWhenEmpty,
    tracking: dependent.tracking === "Secret" ? "secret" : "config-map",
  };
}

function secretKeyToWit(secret: SecretKey): WitSecretKey {
  return { name: secret.name, namespace: secret.namespace, key: secret.key };
}

function originToWit(origin: Origin): WitHttpGrant["origins"][number] {
  return {
    scheme: origin.scheme,
    host: origin.host,
    port: origin.port,
    secretHeaders: origin.secretHeaders.map(({ header, secret, prefix }) => ({
      header,
      secret: secretKeyToWit(secret),
      prefix,
    })),
  };
}

function httpToWit(grant: HttpGrant | undefined): WitHttpGrant | undefined {
  if (grant === undefined) return undefined;
  return {
    origins: grant.origins.map(originToWit),
    connectTimeoutMs: optionalMillis(grant.connectTimeoutMs),
    timeoutMs: optionalMillis(grant.timeoutMs),
    maxResponseBytes: grant.responseLimit === undefined ? undefined : BigInt(Math.max(0, Math.round(grant.responseLimit))),
    maxConcurrent: grant.maxConcurrentRequests,
  };
}

function pollingToWit(polling: Polling | undefined): WitPluginConfig["polling"] {
  return polling && { mode: polling.global ? "global" : "per-resource", periodMs: millis(polling.periodMs) };
}

function inboundToWit(inbound: Inbound | undefined): WitPluginConfig["inbound"] {
  return inbound && { token: secretKeyToWit(inbound.token), caching: inbound.isCaching };
}

/** The plugin config as `describe` returns it; `cleanup`: whether the reconciler has a `cleanup`. */
export function configToWit(config: Config, cleanup: boolean): WitPluginConfig {
  const retry = config.retryPolicy;
  const rateLimit = config.rateLimitValue;
  const finalizer = config.finalizerValue;
  return {
    name: config.name,
    primary: kindToWit(config.primary),
    labelSelector: config.labelSelectorText,
    fieldSelector: config.fieldSelectorText,
    filters: { ...config.filterSettings },
    generationAware: config.isGenerationAware,
    retry: retry && {
      maxAttempts: retry.maxAttempts,
      initialIntervalMs: millis(retry.initialIntervalMs),
      multiplier: retry.multiplier,
      maxIntervalMs: millis(retry.maxIntervalMs),
      jitter: retry.jitter,
    },
    maxReconcileIntervalMs: optionalMillis(config.maxReconcileIntervalMs),
    rateLimit: rateLimit && { maxReconciles: rateLimit.maxReconciles, periodMs: millis(rateLimit.periodMs) },
    maxConcurrentReconciles: config.maxConcurrent,
    watches: config.watches.map(watchToWit),
    resyncPeriodMs: optionalMillis(config.resyncPeriodMs),
    finalizer:
      finalizer.type === "Named" ? { tag: "named", val: finalizer.name } : { tag: finalizer.type === "Derived" ? "derived" : "disabled" },
    cleanup,
    dependents: config.dependents.map(dependentToWit),
    conditions: config.conditions,
    projection: config.projection,
    predicate: predicateToWit(config.predicateValue),
    http: httpToWit(config.httpGrant),
    polling: pollingToWit(config.pollingValue),
    inbound: inboundToWit(config.inboundValue),
    externalDependents: config.externalDependents.map(externalDependentToWit),
    sharding: shardingToWit(config.shardingValue),
    webhooks: config.webhooks.map(webhookToWit),
  };
}

const OPERATIONS = { Create: "create", Update: "update", Delete: "delete", Connect: "connect" } as const;

function webhookToWit(webhook: Webhook): WitWebhook {
  return {
    webhookType: ({ Validating: "validating", Mutating: "mutating", Conversion: "conversion" } as const)[webhook.webhookType],
    kinds: webhook.kindList.map(kindToWit),
    operations: webhook.operationList.map((operation) => OPERATIONS[operation]),
    failurePolicy: webhook.failurePolicyValue === "Fail" ? "fail" : "ignore",
    timeoutMs: webhook.timeoutMs,
  };
}

/** An `admission-request` with its objects as JSON text. */
export interface WitAdmissionRequest {
  uid: string;
  kind: WitKindRef;
  operation: WitOperation;
  namespace: string | undefined;
  name: string;
  object: string | undefined;
  oldObject: string | undefined;
  username: string;
  groups: string[];
  dryRun: boolean;
}

/** A `verdict`. */
export interface WitVerdict {
  allowed: boolean;
  message: string | undefined;
  field: string | undefined;
  warnings: string[];
}

/** An `admission-request` as the SDK's request, its objects still JSON text. */
export function admissionRequestFromWit(request: WitAdmissionRequest): AdmissionRequest<string> {
  const k = request.kind;
  const kind = k.namespaced ? Kind.namespaced(k.group, k.version, k.kind) : Kind.cluster(k.group, k.version, k.kind);
  if (k.plural !== undefined) kind.plural(k.plural);
  const operation = (Object.keys(OPERATIONS) as Operation[]).find((o) => OPERATIONS[o] === request.operation) ?? "Create";
  return { ...request, kind, operation, groups: [...request.groups] };
}

/** A {@link Verdict} as a `verdict`. */
export function verdictToWit(verdict: Verdict): WitVerdict {
  return { allowed: verdict.allowed, message: verdict.message, field: verdict.field, warnings: [...verdict.warnings] };
}

function shardingToWit(sharding: Sharding | undefined): WitPluginConfig["sharding"] {
  return sharding && ({ Uid: "uid", Namespace: "namespace", None: "none" } as const)[sharding];
}

function eventToWit(event: Event): WitEvent {
  return {
    eventType: event.type === "Warning" ? "warning" : "normal",
    reason: event.reason,
    action: event.action,
    note: event.noteText,
  };
}

export function outcomeToWit(outcome: Outcome): WitOutcome {
  return {
    readiness: outcome.readiness && { ...outcome.readiness },
    status: outcome.statusValue === undefined ? undefined : JSON.stringify(outcome.statusValue),
    labels: outcome.labels.map(([key, value]) => [key, value]),
    annotations: outcome.annotations.map(([key, value]) => [key, value]),
    rescheduleAfterMs: optionalMillis(outcome.rescheduleAfterMs),
    events: outcome.events.map(eventToWit),
  };
}

export function cleanupToWit(cleanup: Cleanup): WitCleanupOutcome {
  return {
    keepFinalizer: cleanup.keepsFinalizer,
    rescheduleAfterMs: optionalMillis(cleanup.rescheduleAfterMs),
    events: cleanup.events.map(eventToWit),
  };
}

export function desiredToWit(desired: Desired): WitDesiredObject {
  return { dependent: desired.dependent, object: JSON.stringify(desired.object), keep: desired.keep, key: desired.key };
}

export function errorToWit(error: ReconcileError): WitReconcileError {
  return { tag: error.kind, val: error.message };
}

export function errorFromWit(error: WitReconcileError): ReconcileError {
  return ReconcileError.of(error.tag, error.val);
}

export function externalToWit(external: External): WitExternalObject {
  return { dependent: external.dependent, key: external.key, id: external.id, object: JSON.stringify(external.object ?? null) };
}

export function externalFromWit(external: WitExternalObject): External {
  const object = new External(external.dependent, external.key, parseOr(external.object, null));
  return external.id === undefined ? object : object.withId(external.id);
}

export function primaryRefToWit(ref: PrimaryRef): WitObjectRef {
  return { namespace: ref.namespace, name: ref.name };
}

export function secondaryRefToWit(ref: SecondaryRef): WitSecondaryRef {
  return { kind: kindToWit(ref.kind), namespace: ref.namespace, name: ref.name };
}

const PHASES: Record<WitReconcileRequest["dependents"][number]["phase"], Phase> = {
  ready: "Ready",
  "not-ready": "NotReady",
  skipped: "Skipped",
  deleted: "Deleted",
};

export function dependentStateFromWit(state: WitReconcileRequest["dependents"][number]): DependentState {
  const objects = state.objects.flatMap((o) => {
    const object = parseOr<KubeObject | undefined>(o, undefined);
    return object === undefined ? [] : [object];
  });
  return new DependentState(state.name, PHASES[state.phase], objects);
}

/** `text` parsed as JSON, or `fallback` when it is not JSON. */
export function parseOr<T>(text: string, fallback: T): T {
  try {
    return JSON.parse(text) as T;
  } catch {
    return fallback;
  }
}

