/**
 * What a plugin says about itself: {@link Config} and its {@link Watch}es, {@link Retry},
 * {@link RateLimit} and {@link Filters}. The host reads it once, through `describe`.
 * @module
 */
import type { Dependent } from "./dependent.js";
import type { ExternalDependent, Polling } from "./external.js";
import type { HttpGrant, Inbound } from "./grant.js";
import type { Kind } from "./kind.js";
import type { Predicate } from "./predicate.js";
import type { Webhook } from "./webhook.js";

/** The annotation naming a secondary's primary, read by the annotations mapper. */
export const PRIMARY_NAME_ANNOTATION = "wasmop.dev/primary-name";

/** The annotation naming the namespace of a secondary's primary, read by the annotations mapper. */
export const PRIMARY_NAMESPACE_ANNOTATION = "wasmop.dev/primary-namespace";

/**
 * How a change of a watched secondary finds the primaries to reconcile:
 * - `ControllerOwner`: its owner reference marked `controller: true` (the default);
 * - `AnyOwner`: every owner reference to the primary's kind;
 * - `Annotations`: the {@link PRIMARY_NAME_ANNOTATION} and {@link PRIMARY_NAMESPACE_ANNOTATION};
 * - `Plugin`: the reconciler's `mapSecondary`;
 * - `PrimaryReferences`: the primaries whose `secondariesOf` names it.
 */
export type Mapper = "ControllerOwner" | "AnyOwner" | "Annotations" | "Plugin" | "PrimaryReferences";

/**
 * How a host run with `--shards` splits the plugin's primaries across its replicas:
 * - `Uid`: by the primary's UID, the objects spread evenly (the host's default);
 * - `Namespace`: by the primary's namespace, a namespace's primaries stay on one replica;
 * - `None`: not sharded, the elected leader alone runs the plugin, on every primary.
 */
export type Sharding = "Uid" | "Namespace" | "None";

/**
 * A secondary kind the plugin depends on (JOSDK's `InformerEventSource`, controller-runtime's
 * `Owns` and `Watches`): the host caches its objects and reconciles the primaries its
 * {@link Mapper} finds when one changes.
 *
 * @example
 * ```ts
 * new Watch(Kind.namespaced("", "v1", "Secret").plural("secrets")).namespace("shared").annotated();
 * ```
 */
export class Watch {
  /** Only this namespace; absent: the namespace the host watches primaries in, else all. */
  namespaceName: string | undefined = undefined;
  /** Only objects matching this label selector. */
  labelSelectorText: string | undefined = undefined;
  /** Only objects matching this field selector. */
  fieldSelectorText: string | undefined = undefined;
  /** The cluster to watch, by the name the host was given; absent: the primary's. */
  clusterName: string | undefined = undefined;
  /** How changes map to primaries. */
  mapper: Mapper = "ControllerOwner";
  /** The paths the plugin reads; `[]`: metadata only; absent: whole objects. */
  projection: string[] | undefined = undefined;
  /** Only changes for which this predicate holds map to primaries. */
  predicateValue: Predicate | undefined = undefined;

  constructor(
    /** The watched kind. */
    readonly kind: Kind,
  ) {}

  /** Watches only `namespace`. */
  namespace(namespace: string): this {
    this.namespaceName = namespace;
    return this;
  }

  /** Watches only objects matching `selector` (Kubernetes syntax, e.g. `app=web`). */
  labelSelector(selector: string): this {
    this.labelSelectorText = selector;
    return this;
  }

  /** Watches only objects matching `selector` (Kubernetes syntax). */
  fieldSelector(selector: string): this {
    this.fieldSelectorText = selector;
    return this;
  }

  /** Watches the cluster the host knows as `cluster` (`wasmop run --cluster`). */
  cluster(cluster: string): this {
    this.clusterName = cluster;
    return this;
  }

  /** Maps by the owner reference marked `controller: true` (the default). */
  ownedByController(): this {
    this.mapper = "ControllerOwner";
    return this;
  }

  /** Maps by every owner reference to the primary's kind. */
  ownedByAny(): this {
    this.mapper = "AnyOwner";
    return this;
  }

  /** Maps by the `wasmop.dev/primary-name` and `wasmop.dev/primary-namespace` annotations. */
  annotated(): this {
    this.mapper = "Annotations";
    return this;
  }

  /** Maps with the reconciler's `mapSecondary`. */
  mappedByPlugin(): this {
    this.mapper = "Plugin";
    return this;
  }

  /** Maps to the primaries whose `secondariesOf` names the object. */
  referencedByPrimary(): this {
    this.mapper = "PrimaryReferences";
    return this;
  }

  /** Caches only these paths (and the metadata) of the objects, e.g. `["data"]`. */
  project(paths: string[]): this {
    this.projection = [...paths];
    return this;
  }

  /** Caches only the objects' metadata. */
  metadataOnly(): this {
    this.projection = [];
    return this;
  }

  /** Maps only the changes for which `predicate` holds. */
  predicate(predicate: Predicate): this {
    this.predicateValue = predicate;
    return this;
  }
}

/** Retry policy for failed reconciles (JOSDK's GenericRetry). */
export interface Retry {
  /** Attempts after the first failure before giving up (default 5). */
  maxAttempts: number;
  /** Delay before the first retry, in milliseconds (default 2000). */
  initialIntervalMs: number;
  /** Factor applied to the delay after each failed attempt (default 1.5). */
  multiplier: number;
  /** Upper bound on the delay, in milliseconds (default 300000). */
  maxIntervalMs: number;
  /** Random spread of each delay, as a fraction; 0 turns jitter off (default 0). */
  jitter: number;
}

/** The defaults {@link Config.retry} fills in. */
export const DEFAULT_RETRY: Readonly<Retry> = {
  maxAttempts: 5,
  initialIntervalMs: 2_000,
  multiplier: 1.5,
  maxIntervalMs: 300_000,
  jitter: 0,
};

/** At most `maxReconciles` reconciles of one object within any `periodMs` window. */
export interface RateLimit {
  /** Reconciles allowed per window. */
  maxReconciles: number;
  /** Window length, in milliseconds. */
  periodMs: number;
}

/** Which changes of a primary lead to a reconcile. */
export interface Filters {
  /** Objects when first seen (default true). */
  onCreate: boolean;
  /** Updates that pass generation-aware filtering (default true). */
  onUpdate: boolean;
  /** Objects marked for deletion (default true). */
  onDelete: boolean;
  /** Also annotation changes without a new generation (default false). */
  onAnnotationChange: boolean;
  /** Also label changes without a new generation (default false). */
  onLabelChange: boolean;
}

/** The defaults {@link Config.filters} fills in. */
export const DEFAULT_FILTERS: Readonly<Filters> = {
  onCreate: true,
  onUpdate: true,
  onDelete: true,
  onAnnotationChange: false,
  onLabelChange: false,
};

/** The primary's finalizer: derived from the plugin name (`wasmop.dev/<name>`), named, or none. */
export type Finalizer = { readonly type: "Derived" } | { readonly type: "Named"; readonly name: string } | { readonly type: "Disabled" };

/**
 * What a plugin says about itself: its name, its primary kind, and how the host runs it. Built
 * with `new Config(name, kind)` and chained setters; every setting reaches the host through
 * `describe`. The host keeps the primary's `Ready`, `Reconciling` and `Degraded` conditions for
 * custom kinds (a non-empty group) unless {@link Config.ownConditions} says otherwise.
 *
 * @example
 * ```ts
 * new Config("greeting", Kind.namespaced("example.wasmop.dev", "v1", "Greeting")).project(["spec"]);
 * ```
 */
export class Config {
  /** Only primaries matching this label selector. */
  labelSelectorText: string | undefined = undefined;
  /** Only primaries matching this field selector. */
  fieldSelectorText: string | undefined = undefined;
  /** Which changes lead to a reconcile. */
  filterSettings: Filters = { ...DEFAULT_FILTERS };
  /** Skip updates that keep `metadata.generation`. */
  isGenerationAware = true;
  /** Retry policy; absent: the host default. */
  retryPolicy: Retry | undefined = undefined;
  /** Reconcile at least this often, in milliseconds; absent: the host default. */
  maxReconcileIntervalMs: number | undefined = undefined;
  /** Per-object rate limit; absent: none. */
  rateLimitValue: RateLimit | undefined = undefined;
  /** Concurrent reconciles; absent: the host default. */
  maxConcurrent: number | undefined = undefined;
  /** Secondary kinds whose changes reconcile primaries. */
  readonly watches: Watch[] = [];
  /** Resync period in milliseconds; absent or 0: never. */
  resyncPeriodMs: number | undefined = undefined;
  /** The primary's finalizer, used only when needed. */
  finalizerValue: Finalizer = { type: "Derived" };
  /** The kinds the reconciles create and keep in shape. */
  readonly dependents: Dependent[] = [];
  /** The host keeps the primary's `Ready`, `Reconciling` and `Degraded` conditions. */
  conditions: boolean;
  /** The paths of the primary the plugin reads; absent: whole objects. */
  projection: string[] | undefined = undefined;
  /** The primary's predicate; absent: the filters alone. */
  predicateValue: Predicate | undefined = undefined;
  /** Outgoing HTTP the host grants; absent: none. */
  httpGrant: HttpGrant | undefined = undefined;
  /** Polling of external state; absent: none. */
  pollingValue: Polling | undefined = undefined;
  /** Inbound events; absent: none. */
  inboundValue: Inbound | undefined = undefined;
  /** Objects outside the cluster the reconciles keep in shape. */
  readonly externalDependents: ExternalDependent[] = [];
  /** How a sharded host splits the primaries; absent: the host's default (`Uid`). */
  shardingValue: Sharding | undefined = undefined;
  /** The admission webhooks the plugin serves; none by default. */
  readonly webhooks: Webhook[] = [];

  constructor(
    /** Unique plugin name: logs, metrics, the field manager and the derived finalizer. */
    readonly name: string,
    /** The primary resource the plugin reconciles. */
    readonly primary: Kind,
  ) {
    this.conditions = primary.group !== "";
  }

  /** `new Config(name, primary)`, as the Rust SDK spells it. */
  static new(name: string, primary: Kind): Config {
    return new Config(name, primary);
  }

  /**
   * The paths of the primary the plugin reads, e.g. `["spec"]`: the host caches only these (plus
   * `status` and the metadata) and gives the plugin only these and the metadata. Name `status`
   * (or parts of it) if the plugin reads its own status.
   */
  project(paths: string[]): this {
    this.projection = [...paths];
    return this;
  }

  /** The plugin writes the primary's conditions itself; the host keeps none. */
  ownConditions(): this {
    this.conditions = false;
    return this;
  }

  /** Reconciles only primaries matching `selector` (Kubernetes syntax). */
  labelSelector(selector: string): this {
    this.labelSelectorText = selector;
    return this;
  }

  /** Reconciles only primaries matching `selector` (Kubernetes syntax). */
  fieldSelector(selector: string): this {
    this.fieldSelectorText = selector;
    return this;
  }

  /** Which changes lead to a reconcile; unnamed filters keep their defaults. */
  filters(filters: Partial<Filters>): this {
    this.filterSettings = { ...DEFAULT_FILTERS, ...filters };
    return this;
  }

  /** Whether updates that keep `metadata.generation` are skipped (default true). */
  generationAware(generationAware: boolean): this {
    this.isGenerationAware = generationAware;
    return this;
  }

  /** The retry policy; unnamed fields take {@link DEFAULT_RETRY}'s. Absent: the host default. */
  retry(retry: Partial<Retry>): this {
    this.retryPolicy = { ...DEFAULT_RETRY, ...retry };
    return this;
  }

  /** Reconciles at least every `ms` milliseconds; 0 turns the host default (10 hours) off. */
  maxReconcileInterval(ms: number): this {
    this.maxReconcileIntervalMs = ms;
    return this;
  }

  /** Limits the reconciles of one object. */
  rateLimit(rateLimit: RateLimit): this {
    this.rateLimitValue = { ...rateLimit };
    return this;
  }

  /** Concurrent reconciles of this plugin; absent: the host default. */
  maxConcurrentReconciles(max: number): this {
    this.maxConcurrent = max;
    return this;
  }

  /**
   * How a host run with `--shards` splits the primaries across its replicas (default `Uid`);
   * `None` runs the plugin on the elected leader alone. A deploy-time override beats it; without
   * `--shards` it changes nothing.
   */
  sharding(sharding: Sharding): this {
    this.shardingValue = sharding;
    return this;
  }

  /** Watches a secondary kind. */
  watch(watch: Watch): this {
    this.watches.push(watch);
    return this;
  }

  /** Reconciles every cached primary every `ms` milliseconds, at background priority. */
  resyncPeriod(ms: number): this {
    this.resyncPeriodMs = ms;
    return this;
  }

  /** Names the finalizer (a qualified name such as `example.com/cleanup`). */
  finalizer(name: string): this {
    this.finalizerValue = { type: "Named", name };
    return this;
  }

  /** Never a finalizer: `cleanup` never runs and annotation-owned dependents outlive the primary. */
  noFinalizer(): this {
    this.finalizerValue = { type: "Disabled" };
    return this;
  }

  /** Declares a dependent. */
  dependent(dependent: Dependent): this {
    this.dependents.push(dependent);
    return this;
  }

  /** The primary's predicate; it replaces update filtering. */
  predicate(predicate: Predicate): this {
    this.predicateValue = predicate;
    return this;
  }

  /** Grants outgoing HTTP. */
  http(grant: HttpGrant): this {
    this.httpGrant = grant;
    return this;
  }

  /** Polls external state. */
  polling(polling: Polling): this {
    this.pollingValue = polling;
    return this;
  }

  /** Accepts inbound events. */
  inbound(inbound: Inbound): this {
    this.inboundValue = inbound;
    return this;
  }

  /** Declares an external dependent. */
  externalDependent(dependent: ExternalDependent): this {
    this.externalDependents.push(dependent);
    return this;
  }

  /**
   * Serves `webhook` through the host: the API server calls the host, and the host calls the
   * plugin's `validate` for a {@link Webhook.validating}. At most one of each type.
   */
  webhook(webhook: Webhook): this {
    this.webhooks.push(webhook);
    return this;
  }
}
