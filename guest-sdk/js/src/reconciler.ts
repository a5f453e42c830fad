/**
 * {@link Reconciler}: what a plugin implements.
 * @module
 */
import type { Config } from "./config.js";
import type { Context } from "./context.js";
import type { Cleanup, Desired } from "./dependent.js";
import type { ReconcileError } from "./errors.js";
import type { External, Tracked } from "./external.js";
import type { Outcome } from "./outcome.js";
import type { EventKind } from "./predicate.js";
import type { PrimaryRef, SecondaryRef } from "./refs.js";
import type { KubeObject, Resource } from "./resource.js";
import type { AdmissionRequest, Verdict } from "./webhook.js";

/** The external state of one primary, from `fetchAll`. */
export interface PrimaryState {
  /** The primary. */
  readonly primary: PrimaryRef;
  /** Its external objects. */
  readonly objects: readonly External[];
}

/**
 * A reconciler plugin: `config` and `reconcile`, and whichever of the other functions its
 * config calls for. A plugin's `plugin.ts` default-exports one; the build turns it into the
 * component's `wasmop:plugin/reconciler` export.
 *
 * Every function is synchronous. Failures are thrown: a {@link ReconcileError} says how the host
 * treats them; anything else counts as transient. `P` is the primary's type: the JSON the host
 * sends is taken to be one, unless `decode` checks it.
 *
 * @example
 * ```ts
 * export default {
 *   config: () => new Config("greeting", Kind.namespaced("example.wasmop.dev", "v1", "Greeting")),
 *   reconcile: (greeting) => Outcome.ready("greeted").status({ message: `Hello, ${greeting.spec.name}!` }),
 * } satisfies Reconciler<Resource<{ name: string }>>;
 * ```
 */
export interface Reconciler<P = Resource> {
  /** What the plugin says about itself. Called once when the module is loaded. */
  config(): Config;

  /** Brings the world in line with the primary, knowing where its dependents stand. */
  reconcile(primary: P, ctx: Context): Outcome;

  /**
   * Turns the primary's JSON into a `P`, throwing when it does not fit (the error becomes
   * `invalid` unless it is a {@link ReconcileError}). Absent: the JSON is taken as a `P`.
   */
  decode?(object: unknown): P;

  /** The desired objects of the dependents (called before `reconcile` when there are dependents). */
  desired?(primary: P, ctx: Context): Desired[];

  /**
   * The primary is marked for deletion: release what the garbage collector will not. Its
   * presence gives the plugin's primaries a finalizer.
   */
  cleanup?(primary: P, ctx: Context): Cleanup;

  /** The status to merge when a reconcile failed and no retry follows; `undefined`: none. */
  errorStatus?(primary: P, error: ReconcileError, ctx: Context): object | undefined;

  /** For dependents' and watches' `Check.plugin(name)`: whether the condition holds. */
  check?(name: string, primary: P, dependent: KubeObject | undefined, ctx: Context): boolean;

  /** For watches mapped by plugin: the primaries a change of `secondary` concerns. */
  mapSecondary?(secondary: KubeObject, previous: KubeObject | undefined, ctx: Context): PrimaryRef[];

  /** For watches mapped by primary references: the secondaries the primary uses. */
  secondariesOf?(primary: P, ctx: Context): SecondaryRef[];

  /** The primary kind's CustomResourceDefinition (`apiextensions.k8s.io/v1`), for `wasmop crd --plugin`. */
  crd?(): Record<string, unknown> | undefined;

  /** Per-resource polling and external dependents: the primary's external state. */
  fetch?(primary: P, tracked: Tracked, ctx: Context): External[];

  /** Global polling: the external state of every primary. */
  fetchAll?(ctx: Context): PrimaryState[];

  /** Makes the external system hold `desired`; returns the object as it now is, with its ID. */
  applyExternal?(primary: P, desired: External, actual: External | undefined, ctx: Context): External;

  /** Deletes `actual` from the external system; one already gone is not an error. */
  deleteExternal?(primary: P, actual: External, ctx: Context): void;

  /** Inbound events: the primaries a payload concerns. */
  mapInbound?(payload: unknown, ctx: Context): PrimaryRef[];

  /** The plugin predicate `name` on a watch event (`old`: the previous version of an update). */
  filter?(name: string, event: EventKind, object: KubeObject, old: KubeObject | undefined): boolean;

  /**
   * A validating webhook ({@link Webhook.validating}): admits or denies a request about the
   * primary (its objects as `decode` gives them) or another kind the webhook declares (plain
   * JSON). A primary that does not decode is denied without a call; a throw fails the call, and
   * the webhook's failure policy decides.
   */
  validate?(request: AdmissionRequest<P>, ctx: Context): Verdict;

  /**
   * A mutating webhook ({@link Webhook.mutating}): fills in the defaults of a primary (as
   * `decode` gives it) as it is created or updated, changing it in place; the host answers with
   * the patch. A {@link ReconcileError} thrown denies the request with its message; anything
   * else thrown fails the call, and the webhook's failure policy decides.
   */
  default?(primary: P, ctx: Context): void;

  /** The same as `default`, for an object of another kind the mutating webhook names. */
  defaultOther?(object: KubeObject, ctx: Context): void;

  /**
   * The conversion webhook of the primary's CRD ({@link Webhook.conversion}): `object` (of
   * another version) as `desiredApiVersion` (`group/version`); the SDK sets its `apiVersion`.
   * Whatever it throws fails the conversion with its message.
   */
  convert?(object: KubeObject, desiredApiVersion: string, ctx: Context): KubeObject;
}
