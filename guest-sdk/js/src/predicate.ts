/**
 * Predicates on watch events (controller-runtime's predicates combined with `and`, `or`, `not`):
 * built-in ones and the reconciler's own `filter`.
 * @module
 */

/** A watch event, as the reconciler's `filter` sees it. */
export type EventKind = "create" | "update" | "delete" | "generic";

/** One term of a predicate in postfix order, as the host evaluates it. */
export type PredicateTerm =
  | { readonly type: "plugin"; readonly name: string }
  | { readonly type: "generationChanged" | "labelsChanged" | "annotationsChanged" | "and" | "or" | "not" };

/**
 * Which watch events lead to a reconcile. A primary's predicate replaces its update filtering;
 * a watch's decides which changes of its objects map to primaries.
 *
 * @example
 * ```ts
 * // Reconcile on a new generation, or on label changes the plugin's filter accepts.
 * Predicate.generationChanged().or(Predicate.labelsChanged().and(Predicate.plugin("my-labels")));
 * ```
 */
export class Predicate {
  private constructor(
    /** The terms, in postfix order. */
    readonly terms: readonly PredicateTerm[],
  ) {}

  /** The reconciler's `filter` decides; `name` names the predicate for it. */
  static plugin(name: string): Predicate {
    return new Predicate([{ type: "plugin", name }]);
  }

  /** Not an update, or the generation (or finalizers) changed. */
  static generationChanged(): Predicate {
    return new Predicate([{ type: "generationChanged" }]);
  }

  /** Not an update, or the labels changed. */
  static labelsChanged(): Predicate {
    return new Predicate([{ type: "labelsChanged" }]);
  }

  /** Not an update, or the annotations changed. */
  static annotationsChanged(): Predicate {
    return new Predicate([{ type: "annotationsChanged" }]);
  }

  /** Both hold. */
  and(other: Predicate): Predicate {
    return new Predicate([...this.terms, ...other.terms, { type: "and" }]);
  }

  /** Either holds. */
  or(other: Predicate): Predicate {
    return new Predicate([...this.terms, ...other.terms, { type: "or" }]);
  }

  /** This does not hold. */
  not(): Predicate {
    return new Predicate([...this.terms, { type: "not" }]);
  }

  /** The names of the plugin predicates it uses: what the reconciler's `filter` must answer. */
  pluginNames(): string[] {
    return this.terms.flatMap((term) => (term.type === "plugin" ? [term.name] : []));
  }
}
