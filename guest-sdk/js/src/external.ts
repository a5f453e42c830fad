/**
 * State outside the cluster: polling ({@link Polling}), external dependents
 * ({@link ExternalDependent}), their objects ({@link External}) and the IDs the host tracks for
 * them ({@link Tracked}).
 * @module
 */
import type { Check } from "./check.js";

/**
 * An object outside the cluster, as `fetch` found it or `desired` wants it.
 *
 * @example
 * ```ts
 * new External("records", "www", { type: "TXT", value: "hello" }).withId("rec-42");
 * ```
 */
export class External {
  /** The ID the external system gave it, when known. */
  id: string | undefined = undefined;

  constructor(
    /** The external dependent it belongs to. */
    readonly dependent: string,
    /** Identifies it among the dependent's objects of one primary; empty for a single object. */
    readonly key: string,
    /** The object. */
    readonly object: unknown,
  ) {}

  /** Sets the ID the external system gave it. */
  withId(id: string): this {
    this.id = id;
    return this;
  }
}

/** The IDs the host keeps for a primary's external objects. */
export class Tracked {
  constructor(
    /** `[dependent, key, id]` for each tracked object. */
    readonly ids: readonly (readonly [string, string, string])[],
  ) {}

  /** The ID of the object `key` of `dependent`, if tracked. */
  id(dependent: string, key: string): string | undefined {
    return this.ids.find(([d, k]) => d === dependent && k === key)?.[2];
  }

  /** The `[key, id]` pairs of `dependent`. */
  of(dependent: string): [string, string][] {
    return this.ids.filter(([d]) => d === dependent).map(([, key, id]) => [key, id]);
  }
}

/** Where the host keeps the IDs of a dependent's external objects. */
export type Tracking = "ConfigMap" | "Secret";

/**
 * A kind of object outside the cluster that the plugin's reconciles keep in shape: the host
 * compares `desired` with what `fetch` returned and calls `applyExternal` or `deleteExternal`
 * only when they differ.
 *
 * @example
 * ```ts
 * new ExternalDependent("records").dependsOn("first");
 * ```
 */
export class ExternalDependent {
  /** Dependents that must be ready before this one is reconciled. */
  readonly dependencies: string[] = [];
  /** When the objects count as ready (on the fetched object); absent: once they exist. */
  readyCheck: Check | undefined = undefined;
  /** Evaluated on the primary: when false, the objects are deleted. */
  reconcileCheck: Check | undefined = undefined;
  /** Whether the dependent is ready when `desired` returns none of its objects. */
  readyWhenEmpty = true;
  /** Where the IDs are kept. */
  tracking: Tracking = "ConfigMap";

  constructor(
    /** Unique among all the plugin's dependents. */
    readonly name: string,
  ) {}

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

  /** Reconciled only while `check` holds on the primary. */
  reconcileWhen(check: Check): this {
    this.reconcileCheck = check;
    return this;
  }

  /** Not ready while `desired` returns none of its objects. */
  notReadyWhenEmpty(): this {
    this.readyWhenEmpty = false;
    return this;
  }

  /** Keeps the IDs in a ConfigMap (the default) or a Secret. */
  trackedIn(tracking: Tracking): this {
    this.tracking = tracking;
    return this;
  }
}

/** How often the host polls the plugin's external state, per primary (`fetch`) or globally (`fetchAll`). */
export class Polling {
  private constructor(
    /** One `fetchAll` for every primary, rather than a `fetch` per primary. */
    readonly global: boolean,
    /** The period, in milliseconds. */
    readonly periodMs: number,
  ) {}

  /** `fetch` for each primary every `periodMs` milliseconds. */
  static perResource(periodMs: number): Polling {
    return new Polling(false, periodMs);
  }

  /** One `fetchAll` every `periodMs` milliseconds. */
  static global(periodMs: number): Polling {
    return new Polling(true, periodMs);
  }
}
