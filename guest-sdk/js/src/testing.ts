/**
 * A fake host for plugin tests in plain Node (`@wasmop/guest/testing`): it holds the objects the
 * host's caches would, the dependents' states the host would report, and records the logs, and
 * drives a reconciler through the same export the component uses.
 *
 * @example
 * ```ts
 * import { FakeHost } from "@wasmop/guest/testing";
 * const run = new FakeHost().reconcile(plugin, { metadata: { name: "hello" }, spec: { name: "World" } });
 * assert.deepEqual(run.status, { message: "Hello, World!" });
 * ```
 * @module
 */
import type { Level } from "./context.js";
import { exportReconciler, type HostImports, type ReconcilerExport } from "./component.js";
import type { Phase } from "./dependent.js";
import { ReconcileError } from "./errors.js";
import type { External } from "./external.js";
import type { Kind } from "./kind.js";
import type { Readiness } from "./outcome.js";
import type { Reconciler } from "./reconciler.js";
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
  ) {}

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
  private readonly secondaryObjects = new Map<string, Record<string, unknown>[]>();
  private readonly states: WitReconcileRequest["dependents"] = [];
  private readonly externals: External[] = [];
  private attempt = 0;
  private lastAttempt = false;
  private lines: LogLine[] = [];

  /** Puts `object` into the cache of `kind` (for `ctx.get` and `ctx.list`). */
  withObject(kind: Kind, object: Record<string, unknown>): this {
    const k = key(kindToWit(kind));
    this.objects.set(k, [...(this.objects.get(k) ?? []), object]);
    return this;
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

  /** The component export of `reconciler` over this host: every WIT function, as the host calls it. */
  component<P>(reconciler: Reconciler<P>): ReconcilerExport {
    return exportReconciler(reconciler, this.imports());
  }

  /** The plugin config as the host receives it from `describe`. */
  describe<P>(reconciler: Reconciler<P>): WitPluginConfig {
    return this.component(reconciler).describe();
  }

  /** Reconciles `primary` (JSON-encoded as the host would send it). */
  reconcile<P>(reconciler: Reconciler<P>, primary: unknown): Run {
    const before = this.lines.length;
    const exported = this.component(reconciler);
    try {
      const ok = unwrap(() => exported.reconcile(this.request(primary)));
      return new Run({ ok }, this.lines.slice(before));
    } catch (error) {
      if (error instanceof ReconcileError) return new Run({ error }, this.lines.slice(before));
      throw error;
    }
  }

  /** The desired objects for `primary`, as the host receives them; throws a {@link ReconcileError}. */
  desired<P>(reconciler: Reconciler<P>, primary: unknown): DesiredObject[] {
    const desired = unwrap(() => this.component(reconciler).desired(this.request(primary)));
    return desired.map((d) => ({ ...d, object: JSON.parse(d.object) as Record<string, unknown> }));
  }

  /** The cleanup of `primary`, as the host receives it; throws a {@link ReconcileError}. */
  cleanup<P>(reconciler: Reconciler<P>, primary: unknown): CleanupResult {
    const cleanup = unwrap(() => this.component(reconciler).cleanup(this.request(primary)));
    const ms = cleanup.rescheduleAfterMs;
    return {
      keepFinalizer: cleanup.keepFinalizer,
      rescheduleAfterMs: ms === undefined ? undefined : Number(ms),
      events: cleanup.events.map(eventFromWit),
    };
  }

  private request(primary: unknown): WitReconcileRequest {
    return {
      object: JSON.stringify(primary),
      attempt: this.attempt,
      lastAttempt: this.lastAttempt,
      dependents: this.states,
      external: this.externals.map(externalToWit),
      inbound: undefined,
    };
  }

  private imports(): HostImports {
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
        return found === undefined ? undefined : JSON.stringify(found);
      },
      list: (kind, namespace, selector) =>
        (this.objects.get(key(kind)) ?? []).filter((o) => matches(o, namespace, selector)).map((o) => JSON.stringify(o)),
      secondaries: (kind) => (this.secondaryObjects.get(key(kind)) ?? []).map((o) => JSON.stringify(o)),
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
