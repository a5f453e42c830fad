/**
 * Dependent resources (JOSDK's managed dependents and workflows): what a plugin declares
 * ({@link Dependent}), what its reconciles want ({@link Desired}), where each dependent stands
 * afterwards ({@link DependentState}), and what a cleanup decides ({@link Cleanup}).
 * @module
 */
import type { Check } from "./check.js";
import type { Kind } from "./kind.js";
import type { Event } from "./outcome.js";
import type { KubeObject } from "./resource.js";

/**
 * A kind of object the plugin's reconciles want to exist. The host applies the desired objects
 * with server-side apply, owned by the primary, watches them, deletes those no longer desired,
 * and orders the dependents by `dependsOn`.
 *
 * @example
 * ```ts
 * new Dependent("deployment", Kind.namespaced("apps", "v1", "Deployment").plural("deployments"))
 *   .dependsOn("configmap")
 *   .readyWhen(Check.fieldsEqual("status.readyReplicas", "spec.replicas"));
 * ```
 */
export class Dependent {
  /** Observed, never written: `desired` only names the objects. */
  isReadOnly = false;
  /** Dependents that must be ready before this one is reconciled. */
  readonly dependencies: string[] = [];
  /** When the objects count as ready; absent: as soon as they exist. */
  readyCheck: Check | undefined = undefined;
  /** Evaluated on the primary: when false, the objects are deleted and the dependent skipped. */
  reconcileCheck: Check | undefined = undefined;
  /** Owned by the `wasmop.dev/primary-*` annotations instead of an owner reference. */
  annotationOwned = false;
  /** Whether the dependent is ready when `desired` returns none of its objects. */
  readyWhenEmpty = true;
  /** Take over objects someone else manages (a forced apply). */
  adopts = false;
  /** The one namespace its objects live in, when that is not the primary's. */
  namespace: string | undefined = undefined;

  constructor(
    /** Unique within the plugin; labels every object and names it in `dependsOn`. */
    readonly name: string,
    /** The kind of the objects. */
    readonly kind: Kind,
  ) {}

  /** The objects live in `namespace` (a dependent owned by annotations). */
  inNamespace(namespace: string): this {
    this.namespace = namespace;
    return this;
  }

  /** Not ready while `desired` returns none of its objects. */
  notReadyWhenEmpty(): this {
    this.readyWhenEmpty = false;
    return this;
  }

  /** Takes over an existing object someone else manages, instead of reporting a conflict. */
  adopt(): this {
    this.adopts = true;
    return this;
  }

  /** Observed, never written: `desired` only names the objects. */
  readOnly(): this {
    this.isReadOnly = true;
    return this;
  }

  /** Reconciled only once the dependent `name` is ready. */
  dependsOn(name: string): this {
    this.dependencies.push(name);
    return this;
  }

  /** The objects count as ready when `check` holds on them. */
  readyWhen(check: Check): this {
    this.readyCheck = check;
    return this;
  }

  /** Reconciled only while `check` holds on the primary; otherwise its objects are deleted. */
  reconcileWhen(check: Check): this {
    this.reconcileCheck = check;
    return this;
  }

  /**
   * Ties the objects to the primary with annotations rather than an owner reference: for other
   * namespaces and cluster-scoped objects. The host deletes them when the primary goes.
   */
  ownedByAnnotations(): this {
    this.annotationOwned = true;
    return this;
  }
}

/**
 * One desired object of a dependent, as `desired` returns it.
 *
 * @example
 * ```ts
 * Desired.of("configmap", { apiVersion: "v1", kind: "ConfigMap", metadata: { name }, data });
 * ```
 */
export class Desired {
  private constructor(
    /** The dependent's name. */
    readonly dependent: string,
    /** The object: `apiVersion`, `kind`, `metadata.name` (namespace defaults to the primary's). */
    readonly object: Record<string, unknown>,
    /** Leave the object as the cluster holds it: neither applied nor pruned. */
    readonly keep: boolean,
    /** For an external dependent: the object's key. */
    readonly key: string | undefined,
  ) {}

  /** An object of the Kubernetes dependent `dependent`. */
  static of(dependent: string, object: Record<string, unknown>): Desired {
    return new Desired(dependent, object, false, undefined);
  }

  /** An object of the external dependent `dependent`, identified by `key` among its objects. */
  static external(dependent: string, key: string, object: Record<string, unknown>): Desired {
    return new Desired(dependent, object, false, key);
  }

  /** Keeps the object `name` as the cluster holds it: still desired, but neither applied nor pruned. */
  static unchanged(dependent: string, name: string, namespace?: string): Desired {
    const metadata = namespace === undefined ? { name } : { name, namespace };
    return new Desired(dependent, { metadata }, true, undefined);
  }
}

/** Where a dependent stands after the host reconciled it. */
export type Phase = "Ready" | "NotReady" | "Skipped" | "Deleted";

/** A dependent's state, as the host reconciled it just before `reconcile`. */
export class DependentState {
  constructor(
    /** The dependent's name. */
    readonly name: string,
    /** Where it stands. */
    readonly phase: Phase,
    /** Its objects as the cluster holds them now. */
    readonly objects: readonly KubeObject[],
  ) {}

  /** Applied (or observed) and its ready condition holds. */
  isReady(): boolean {
    return this.phase === "Ready";
  }
}

/**
 * What a successful `cleanup` decides: release the finalizer (the default), or keep it and come
 * back later.
 *
 * @example
 * ```ts
 * return Cleanup.done().event(Event.normal("CleanedUp", "Cleanup"));
 * return Cleanup.done().keepFinalizer().rescheduleAfter(10_000);
 * ```
 */
export class Cleanup {
  /** Keep the finalizer: deletion waits. */
  keepsFinalizer = false;
  /** Run `cleanup` again after this many milliseconds unless an event comes first. */
  rescheduleAfterMs: number | undefined = undefined;
  /** Events to record on the primary. */
  readonly events: Event[] = [];

  private constructor() {}

  /** Cleaned up: the host removes the finalizer. */
  static done(): Cleanup {
    return new Cleanup();
  }

  /** Keeps the finalizer; pair it with a reschedule or a watch. */
  keepFinalizer(): this {
    this.keepsFinalizer = true;
    return this;
  }

  /** Runs `cleanup` again after `ms` milliseconds unless an event comes first. */
  rescheduleAfter(ms: number): this {
    this.rescheduleAfterMs = ms;
    return this;
  }

  /** Records an event on the primary. */
  event(event: Event): this {
    this.events.push(event);
    return this;
  }
}
