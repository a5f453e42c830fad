/**
 * {@link Kind}: a Kubernetes resource type, as a plugin names it.
 * @module
 */

/**
 * A Kubernetes resource type: group, version, kind, plural and scope.
 *
 * @example
 * ```ts
 * const deployments = Kind.namespaced("apps", "v1", "Deployment").plural("deployments");
 * const namespaces = Kind.cluster("", "v1", "Namespace");
 * ```
 */
export class Kind {
  /** Plural resource name; when absent the host derives it (lower case + "s"). */
  pluralName: string | undefined = undefined;

  private constructor(
    /** API group; empty for the core group. */
    readonly group: string,
    /** API version within the group, e.g. `v1`. */
    readonly version: string,
    /** Kind, e.g. `WebPage`. */
    readonly kind: string,
    /** Whether objects of this kind live in a namespace. */
    readonly namespaced: boolean,
  ) {}

  /** A kind whose objects live in a namespace. */
  static namespaced(group: string, version: string, kind: string): Kind {
    return new Kind(group, version, kind, true);
  }

  /** A cluster-scoped kind. */
  static cluster(group: string, version: string, kind: string): Kind {
    return new Kind(group, version, kind, false);
  }

  /** Sets the plural resource name, for kinds whose plural is not the kind in lower case + "s". */
  plural(plural: string): this {
    this.pluralName = plural;
    return this;
  }

  /** The API version as objects carry it: `group/version`, or `version` for the core group. */
  get apiVersion(): string {
    return this.group === "" ? this.version : `${this.group}/${this.version}`;
  }

  /** Whether `other` names the same type (group, version and kind). */
  sameType(other: Kind): boolean {
    return this.group === other.group && this.version === other.version && this.kind === other.kind;
  }

  /** `group/version/Kind`, or `version/Kind` for the core group. */
  toString(): string {
    return `${this.apiVersion}/${this.kind}`;
  }
}
