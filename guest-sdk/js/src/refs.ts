/**
 * Names of objects a plugin hands the host: {@link PrimaryRef}, {@link SecondaryRef}.
 * @module
 */
import type { Kind } from "./kind.js";

/** A primary, named by a mapper (`mapSecondary`, `mapInbound`) or a global fetch. */
export class PrimaryRef {
  private constructor(
    /** Namespace; absent for cluster-scoped primaries (or the secondary's namespace). */
    readonly namespace: string | undefined,
    /** Name. */
    readonly name: string,
  ) {}

  /** A primary in a namespace. */
  static namespaced(namespace: string, name: string): PrimaryRef {
    return new PrimaryRef(namespace, name);
  }

  /**
   * A cluster-scoped primary, or, for a namespaced primary kind, one in the secondary's
   * namespace.
   */
  static clusterScoped(name: string): PrimaryRef {
    return new PrimaryRef(undefined, name);
  }
}

/** A secondary a primary uses, named by `secondariesOf` (the primary-references mapper). */
export class SecondaryRef {
  constructor(
    /** Its kind; must be one of the plugin's watched kinds. */
    readonly kind: Kind,
    /** Namespace; absent for cluster-scoped objects. */
    readonly namespace: string | undefined,
    /** Name. */
    readonly name: string,
  ) {}
}
