/**
 * A fake host for plugin tests in plain Node (`@wasmop/guest/testing`): it holds the objects the
 * host's caches would, the dependents' states the host would report, and records the logs, and
 * drives a reconciler through the same export the component uses. {@link FakeHost.runUntilStable}
 * runs the whole reconcile loop of the built component by the host's own rules (see `stable.ts`).
 *
 * @example
 * ```ts
 * import { FakeHost } from "@wasmop/guest/testing";
 * const run = new FakeHost().reconcile(plugin, { metadata: { name: "hello" }, spec: { name: "World" } });
 * assert.deepEqual(run.status, { message: "Hello, World!" });
 * ```
 * @module
 */
import { DEFAULT_RETRY, type Retry } from "./config.js";
import { Context, OUTSIDE, type Level } from "./context.js";
import { convert, defaultObject, validate } from "./admission.js";
import { describe, exportReconciler, hostOver, type HostImports, type ReconcilerExport } from "./component.js";
import type { Phase } from "./dependent.js";
import { ReconcileError } from "./errors.js";
import type { External } from "./external.js";
import type { Kind } from "./kind.js";
import { settle, type Stable, type StoredObject } from "./stable.js";

export { Stable, wasmopBinary, type Pass, type StoredObject } from "./stable.js";
import type { Readiness } from "./outcome.js";
import type { Reconciler } from "./reconciler.js";
import type { AdmissionRequest, Verdict, WebhookType } from "./webhook.js";
import {
  errorFromWit,
  externalToWit,
  kindToWit,
  type WitEvent,
  type WitKindRef,
  type WitOutcome,
  type WitPluginConfig,
  type WitReconcileError,
  type WitReconcileRequest,
} from "./wire.js";

/** A JSON object. */
type JsonObject = Record<string, unknown>;

/** Fields every object keeps, whatever its projection. */
const ALWAYS = ["apiVersion", "kind", "metadata"];

/** The label the host puts on a dependent's objects (`wasmop.dev/managed-by=<plugin>`). */
const MANAGED_BY = "wasmop.dev/managed-by";

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * `object` as a cache with the projection `paths` keeps it, by the host's rule: its
 * `apiVersion`, `kind` and `metadata` whole and, of its other fields, only those the paths name
 * (keys joined by dots: `spec.replicas`). A path that names no field is skipped; one that runs
 * into a value that is not an object keeps nothing of it. `object` is not changed.
 *
 * @example
 * ```ts
 * project({ metadata: { name: "a" }, spec: { size: 1, image: "x" } }, ["spec.size"]);
 * // { metadata: { name: "a" }, spec: { size: 1 } }
 * ```
 */
export function project<T extends object>(object: T, paths: readonly string[]): JsonObject {
  const rest = structuredClone(object) as JsonObject;
  const kept: JsonObject = {};
  for (const key of ALWAYS) {
    if (key in rest) {
      kept[key] = rest[key];
      delete rest[key];
    }
  }
  for (const path of paths) take(rest, kept, path.split(".").filter((k) => k !== ""));
  return kept;
}

/** Moves the field at `keys` from `source` to the same place in `target`. */
function take(source: JsonObject, target: JsonObject, keys: string[]): void {
  const [key, ...rest] = keys;
  if (key === undefined) return;
  if (rest.length === 0) {
    if (!(key in source)) return;
    const value = source[key];
    delete source[key];
    const already = target[key];
    // Parts of it were kept for narrower paths: the rest joins them.
    if (isObject(value) && isObject(already)) Object.assign(already, value);
    else target[key] = value;
    return;
  }
  const inner = source[key];
  if (!isObject(inner)) return;
  if (!(key in target)) target[key] = {};
  const kept = target[key];
  if (isObject(kept)) take(inner, kept, rest);
}

/** One of the host's watches for a plugin: what it caches, and what of each object it keeps. */
interface Cache {
  kind: WitKindRef;
  selector: string | undefined;
  namespace: string | undefined;
  /** `undefined`: all of it. */
  projection: string[] | undefined;
}

/**
 * The host's caches of the plugin `config` describes, in the order the host reads them: the
 * primary's, each declared watch's, each dependent's (whole objects).
 */
function caches(config: WitPluginConfig): Cache[] {
  const managed = `${MANAGED_BY}=${config.name}`;
  return [
    { kind: config.primary, selector: config.labelSelector, namespace: undefined, projection: config.projection },
    ...config.watches.map((w) => ({
      kind: w.kind,
      selector: w.labelSelector,
      namespace: w.namespace,
      projection: w.projection,
    })),
    ...config.dependents.map((d) => ({
      kind: d.kind,
      selector: d.readOnly ? undefined : managed,
      namespace: d.namespace,
      projection: undefined,
    })),
  ];
}

/**
 * `object` of `kind` as the plugin reads it from the host's caches: cut to the projection of the
 * first cache that holds it (else of the first of its kind). The host's cache of primaries keeps
 * their `status` too, which the plugin reads only if its projection names it.
 */
function shaped(all: Cache[], kind: WitKindRef, object: JsonObject): JsonObject {
  const metadata = (object["metadata"] ?? {}) as { namespace?: string; labels?: Record<string, string> };
  const holds = (c: Cache) =>
    key(c.kind) === key(kind) &&
    selectorMatches(c.selector, metadata.labels ?? {}) &&
    (c.namespace === undefined || c.namespace === metadata.namespace);
  const cache = all.find(holds) ?? all.find((c) => key(c.kind) === key(kind));
  return cache?.projection === undefined ? object : project(object, cache.projection);
}

/** A log line a plugin wrote. */
export interface LogLine {
  readonly level: Level;
  readonly message: string;
  readonly fields: Readonly<Record<string, string>>;
}

/** An event as the host receives it. */
export interface RecordedEvent {
  readonly type: "Normal" | "Warning";
  readonly reason: string;
  readonly action: string;
  readonly note: string | undefined;
}

/** A desired object as the host receives it. */
export interface DesiredObject {
  readonly dependent: string;
  readonly object: Record<string, unknown>;
  readonly keep: boolean;
  readonly key: string | undefined;
}

/** A cleanup's decision as the host receives it. */
export interface CleanupResult {
  readonly keepFinalizer: boolean;
  readonly rescheduleAfterMs: number | undefined;
  readonly events: RecordedEvent[];
}

const PHASES: Record<Phase, WitReconcileRequest["dependents"][number]["phase"]> = {
  Ready: "ready",
  NotReady: "not-ready",
  Skipped: "skipped",
  Deleted: "deleted",
};

function key(kind: WitKindRef): string {
  return `${kind.group}/${kind.version}/${kind.kind}`;
}

function eventFromWit(event: WitEvent): RecordedEvent {
  return {
    type: event.eventType === "warning" ? "Warning" : "Normal",
    reason: event.reason,
    action: event.action,
    note: event.note,
  };
}

/** Runs `call`, turning the WIT error it throws back into a {@link ReconcileError}. */
function unwrap<T>(call: () => T): T {
  try {
    return call();
  } catch (error) {
    if (typeof error === "object" && error !== null && "tag" in error) throw errorFromWit(error as WitReconcileError);
    throw error;
  }
}

/** What one reconcile did: its outcome as the host receives it, or its error, and the logs. */
export class Run {
  constructor(
    private readonly result: { ok: WitOutcome } | { error: ReconcileError },
    /** The log lines written during the reconcile. */
    readonly logs: readonly LogLine[],
    /** The delay the reconcile asked of the host for its retry (`retry-after`), in milliseconds. */
    private readonly askedMs: number | undefined = undefined,
    /** The plugin's retry policy, and whether this was the last attempt. */
    private readonly retry: { policy: Retry; attempt: number; last: boolean } = { policy: DEFAULT_RETRY, attempt: 0, last: false },
  ) {}

  /**
   * Milliseconds the host would wait before it runs this failed reconcile again, by the
   * plugin's retry policy and the host's rule: the delay the error asked for
   * ({@link ReconcileError.retryAfter}) capped at `maxIntervalMs`, else the backoff of the next
   * attempt (its nominal value, without jitter). `undefined` when the reconcile succeeded,
   * failed for good, or was the last attempt.
   */
  get retryAfterMs(): number | undefined {
    const { policy, attempt, last } = this.retry;
    if (!("error" in this.result) || this.result.error.kind !== "transient") return undefined;
    if (last || attempt >= policy.maxAttempts) return undefined;
    if (this.askedMs !== undefined) return Math.min(this.askedMs, policy.maxIntervalMs);
    return Math.min(policy.initialIntervalMs * policy.multiplier ** attempt, policy.maxIntervalMs);
  }

  /** The error the reconcile failed with; throws when it succeeded. */
  get error(): ReconcileError {
    if ("error" in this.result) return this.result.error;
    throw new Error("the reconcile succeeded");
  }

  /** Whether the reconcile succeeded. */
  get ok(): boolean {
    return "ok" in this.result;
  }

  private get outcome(): WitOutcome {
    if ("ok" in this.result) return this.result.ok;
    throw new Error(`the reconcile failed: ${this.result.error.toString()}`);
  }

  /** The status to merge, parsed; `undefined` when the outcome sets none. */
  get status(): Record<string, unknown> | undefined {
    const status = this.outcome.status;
    return status === undefined ? undefined : (JSON.parse(status) as Record<string, unknown>);
  }

  /** The readiness the host turns into conditions. */
  get readiness(): Readiness | undefined {
    return this.outcome.readiness;
  }

  /** The events to record. */
  get events(): RecordedEvent[] {
    return this.outcome.events.map(eventFromWit);
  }

  /** The reschedule, in milliseconds. */
  get rescheduleAfterMs(): number | undefined {
    const ms = this.outcome.rescheduleAfterMs;
    return ms === undefined ? undefined : Number(ms);
  }

  /** The labels to set (a value) or remove (`undefined`). */
  get labels(): [string, string | undefined][] {
    return this.outcome.labels;
  }

  /** The annotations to set (a value) or remove (`undefined`). */
  get annotations(): [string, string | undefined][] {
    return this.outcome.annotations;
  }
}

/**
 * Stands in for the host: caches (`withObject`), dependents' states (`withDependentState`),
 * external state (`withExternal`), the attempt (`withAttempt`), and a log.
 */
export class FakeHost {
  private readonly objects = new Map<string, Record<string, unknown>[]>();
  private readonly kinds = new Map<string, Kind>();
  private readonly secondaryObjects = new Map<string, Record<string, unknown>[]>();
  private readonly states: WitReconcileRequest["dependents"] = [];
  private readonly externals: External[] = [];
  private attempt = 0;
  private lastAttempt = false;
  private lines: LogLine[] = [];
  /** The delay the current call asked for its retry (`retry-after`), in milliseconds. */
  private askedMs: number | undefined = undefined;

  /** Puts `object` into the cache of `kind` (for `ctx.get` and `ctx.list`). */
  withObject(kind: Kind, object: Record<string, unknown>): this {
    const k = key(kindToWit(kind));
    this.objects.set(k, [...(this.objects.get(k) ?? []), object]);
    this.kinds.set(k, kind);
    return this;
  }

  /**
   * Runs the built plugin `component` (its `.wasm`) on `primary` among this host's objects and
   * external objects (`withExternal`, what `fetch` would find), as the host would, over and over
   * until a pass changes nothing (the host's own rules, through `wasmop test`: see `stable.ts`).
   * The store and the external system as they ended replace this host's objects and external
   * objects, so a later call (after a spec change, say) continues from there. Throws when a pass fails (to test
   * a failure, use {@link FakeHost.runUntilSettled}) or when the loop cannot run.
   *
   * Build the component first: the loop runs what was built, not the source beside it.
   */
  runUntilStable(component: string, primary: Record<string, unknown>, namespace = "default"): Stable {
    const stable = this.runUntilSettled(component, primary, namespace);
    const failed = stable.passes.findIndex((p) => p.error !== undefined);
    if (failed >= 0) {
      throw new Error(
        `runUntilStable: pass ${failed + 1} failed: ${JSON.stringify(stable.passes[failed]!.error)}; use runUntilSettled to test a failing reconcile`,
      );
    }
    return stable;
  }

  /**
   * {@link FakeHost.runUntilStable}, but a pass that fails is no test failure: the host writes
   * its failure conditions (and the plugin's `errorStatus`) as it would, and the passes go on
   * until one changes nothing.
   */
  runUntilSettled(component: string, primary: Record<string, unknown>, namespace = "default"): Stable {
    const objects: StoredObject[] = [];
    for (const [k, stored] of this.objects) for (const object of stored) objects.push({ kind: this.kinds.get(k)!, object });
    const stable = settle(component, primary, objects, this.externals, namespace);
    this.objects.clear();
    for (const { kind, object } of stable.stored) this.withObject(kind, object);
    this.externals.splice(0, this.externals.length, ...stable.external);
    return stable;
  }

  /** Makes `object` a secondary of the primary (for `ctx.secondaries`). */
  withSecondary(kind: Kind, object: Record<string, unknown>): this {
    const k = key(kindToWit(kind));
    this.secondaryObjects.set(k, [...(this.secondaryObjects.get(k) ?? []), object]);
    return this;
  }

  /** Reports the dependent `name` in `phase` with `objects`, as the host would after applying it. */
  withDependentState(name: string, phase: Phase, objects: Record<string, unknown>[] = []): this {
    this.states.push({ name, phase: PHASES[phase], objects: objects.map((o) => JSON.stringify(o)) });
    return this;
  }

  /** Reports an external object as polling found it. */
  withExternal(external: External): this {
    this.externals.push(external);
    return this;
  }

  /** Makes the calls retries: attempt `attempt`, the last one when `last`. */
  withAttempt(attempt: number, last = false): this {
    this.attempt = attempt;
    this.lastAttempt = last;
    return this;
  }

  /** The log lines written so far. */
  get logs(): readonly LogLine[] {
    return this.lines;
  }

  /**
   * The component export of `reconciler` over this host: every WIT function, as the host calls
   * it. Its reads see objects cut to the plugin's projections, as the host's caches keep them.
   */
  component<P>(reconciler: Reconciler<P>): ReconcilerExport {
    return this.bound(reconciler).exported;
  }

  /** The plugin config as the host receives it from `describe`. */
  describe<P>(reconciler: Reconciler<P>): WitPluginConfig {
    return describe(reconciler);
  }

  /** Reconciles `primary` (JSON-encoded as the host would send it). */
  reconcile<P>(reconciler: Reconciler<P>, primary: unknown): Run {
    const before = this.lines.length;
    this.askedMs = undefined;
    const { exported, request } = this.bound(reconciler);
    try {
      const ok = unwrap(() => exported.reconcile(request(primary)));
      return new Run({ ok }, this.lines.slice(before));
    } catch (error) {
      if (!(error instanceof ReconcileError)) throw error;
      const policy = reconciler.config().retryPolicy ?? DEFAULT_RETRY;
      const retry = { policy, attempt: this.attempt, last: this.lastAttempt };
      return new Run({ error }, this.lines.slice(before), this.askedMs, retry);
    }
  }

  /** The desired objects for `primary`, as the host receives them; throws a {@link ReconcileError}. */
  desired<P>(reconciler: Reconciler<P>, primary: unknown): DesiredObject[] {
    const { exported, request } = this.bound(reconciler);
    const desired = unwrap(() => exported.desired(request(primary)));
    return desired.map((d) => ({ ...d, object: JSON.parse(d.object) as Record<string, unknown> }));
  }

  /** The cleanup of `primary`, as the host receives it; throws a {@link ReconcileError}. */
  cleanup<P>(reconciler: Reconciler<P>, primary: unknown): CleanupResult {
    const { exported, request } = this.bound(reconciler);
    const cleanup = unwrap(() => exported.cleanup(request(primary)));
    const ms = cleanup.rescheduleAfterMs;
    return {
      keepFinalizer: cleanup.keepFinalizer,
      rescheduleAfterMs: ms === undefined ? undefined : Number(ms),
      events: cleanup.events.map(eventFromWit),
    };
  }

  /**
   * Runs `reconciler.validate` for `request` (its objects JSON-encoded as the API server sends
   * them), as the host does for the plugin's validating webhook; throws when the plugin declares
   * no validating webhook for the request's kind and operation (the API server would not call it).
   */
  validate<P>(reconciler: Reconciler<P>, request: AdmissionRequest<unknown>): Verdict {
    return validate(reconciler, this.served(reconciler, "Validating", request), this.outside(reconciler));
  }

  /**
   * Runs `reconciler.default` (`defaultOther` for another kind) for `request`, as the host does
   * for the plugin's mutating webhook, and returns the object as the API server would store it;
   * throws the plugin's refusal as a {@link ReconcileError}, and an `Error` when the plugin
   * declares no mutating webhook for the request (as {@link FakeHost.validate} does).
   *
   * @example
   * ```ts
   * const stored = new FakeHost().defaultObject(plugin, AdmissionRequest.create(page));
   * assert.equal(stored.spec.exposed, false);
   * ```
   */
  defaultObject<P>(reconciler: Reconciler<P>, request: AdmissionRequest<unknown>): JsonObject {
    const sent = this.served(reconciler, "Mutating", request);
    return JSON.parse(defaultObject(reconciler, sent, this.outside(reconciler))) as JsonObject;
  }

  /**
   * Runs `reconciler.convert` for `objects`, as the host does for the conversion webhook of the
   * primary's CRD, and returns them in `desiredApiVersion`; throws the plugin's failure as a
   * {@link ReconcileError}, and an `Error` when the plugin declares no conversion webhook.
   */
  convert<P>(reconciler: Reconciler<P>, objects: unknown[], desiredApiVersion: string): JsonObject[] {
    const config = reconciler.config();
    describe(reconciler);
    if (!config.webhooks.some((w) => w.webhookType === "Conversion")) {
      throw new Error(`plugin ${config.name} declares no conversion webhook`);
    }
    const texts = objects.map((object) => JSON.stringify(object));
    return convert(reconciler, texts, desiredApiVersion, this.outside(reconciler)).map((t) => JSON.parse(t) as JsonObject);
  }

  /**
   * `request` with its objects JSON-encoded, as the host sends it, when `reconciler` declares a
   * webhook of `type` the API server would call for it; else throws.
   */
  private served<P>(reconciler: Reconciler<P>, type: WebhookType, request: AdmissionRequest<unknown>): AdmissionRequest<string> {
    const config = reconciler.config();
    describe(reconciler);
    const served = config.webhooks.some((w) => w.webhookType === type && w.serves(config.primary, request.kind, request.operation));
    if (!served) {
      throw new Error(
        `plugin ${config.name} declares no ${type.toLowerCase()} webhook for ${request.operation} of ${request.kind}: the API server would not call it`,
      );
    }
    const text = (object: unknown) => (object === undefined ? undefined : JSON.stringify(object));
    return { ...request, object: text(request.object), oldObject: text(request.oldObject) };
  }

  /** The context of an admission call: the plugin's caches, outside any reconcile. */
  private outside<P>(reconciler: Reconciler<P>): Context {
    return new Context(hostOver(this.imports(caches(describe(reconciler)))), OUTSIDE);
  }

  /**
   * `reconciler`'s export over this host, and the request for a primary, which the host gives
   * cut to the plugin's projection of it if it declares one (the host's cache keeps the status
   * too, for its own writes; the plugin gets it only if the projection names it).
   */
  private bound<P>(reconciler: Reconciler<P>): {
    exported: ReconcilerExport;
    request: (primary: unknown) => WitReconcileRequest;
  } {
    const config = describe(reconciler);
    const all = caches(config);
    const request = (primary: unknown): WitReconcileRequest => ({
      object: JSON.stringify(
        config.projection !== undefined && isObject(primary) ? shaped(all, config.primary, primary) : primary,
      ),
      attempt: this.attempt,
      lastAttempt: this.lastAttempt,
      dependents: this.states,
      external: this.externals.map(externalToWit),
      inbound: undefined,
    });
    return { exported: exportReconciler(reconciler, this.imports(all)), request };
  }

  /** The host's imports over this host's objects, cut as `all` (the plugin's caches) keep them. */
  private imports(all: Cache[]): HostImports {
    const cut = (kind: WitKindRef, object: JsonObject) => JSON.stringify(shaped(all, kind, object));
    const matches = (object: Record<string, unknown>, namespace: string | undefined, selector: string | undefined) => {
      const metadata = (object["metadata"] ?? {}) as { namespace?: string; labels?: Record<string, string> };
      if (namespace !== undefined && metadata.namespace !== namespace) return false;
      return selectorMatches(selector, metadata.labels ?? {});
    };
    return {
      log: (level, message, fields) => {
        this.lines.push({ level, message, fields: Object.fromEntries(fields) });
      },
      get: (kind, namespace, name) => {
        const found = (this.objects.get(key(kind)) ?? []).find(
          (o) => matches(o, namespace, undefined) && (o["metadata"] as { name?: string } | undefined)?.name === name,
        );
        return found === undefined ? undefined : cut(kind, found);
      },
      list: (kind, namespace, selector) =>
        (this.objects.get(key(kind)) ?? []).filter((o) => matches(o, namespace, selector)).map((o) => cut(kind, o)),
      secondaries: (kind) => (this.secondaryObjects.get(key(kind)) ?? []).map((o) => cut(kind, o)),
      retryAfter: (delayMs) => {
        this.askedMs = Number(delayMs);
      },
    };
  }
}

/**
 * Whether `labels` match a label selector of equality terms (`a=b`, `a==b`, `a!=b`), existence
 * terms (`a`, `!a`), joined by commas; set-based terms (`in`, `notin`) are not supported here.
 */
export function selectorMatches(selector: string | undefined, labels: Record<string, string>): boolean {
  if (selector === undefined || selector.trim() === "") return true;
  return selector.split(",").every((term) => {
    const [, name, op, value] = /^\s*([^!=\s]+)\s*(!=|==|=)?\s*(\S*)\s*$/.exec(term) ?? [];
    if (term.trim().startsWith("!")) return !(term.trim().slice(1) in labels);
    if (name === undefined) throw new Error(`unsupported label selector term: ${term}`);
    if (op === undefined) return name in labels;
    return op === "!=" ? labels[name] !== value : labels[name] === value;
  });
}
