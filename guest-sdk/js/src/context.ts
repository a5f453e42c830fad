/**
 * {@link Context}: what a reconcile can ask of the host, and the {@link Host} behind it.
 * @module
 */
import { DependentState } from "./dependent.js";
import { ReconcileError, messageOf } from "./errors.js";
import type { External } from "./external.js";
import type { Kind } from "./kind.js";
import type { KubeObject } from "./resource.js";

/** Severity of a log line. */
export type Level = "trace" | "debug" | "info" | "warn" | "error";

/**
 * The host's reads and log, as the SDK calls them: the component's `wasmop:plugin/host` imports
 * in a plugin, a `FakeHost` in tests. Objects travel as JSON text; failures are thrown.
 */
export interface Host {
  /** Writes a log line with structured fields. */
  log(level: Level, message: string, fields: [string, string][]): void;
  /** One object from the cache, `undefined` when absent. */
  get(kind: Kind, namespace: string | undefined, name: string): string | undefined;
  /** Objects of a kind from the cache. */
  list(kind: Kind, namespace: string | undefined, labelSelector: string | undefined): string[];
  /** The cached objects of a watched kind that belong to the primary being reconciled. */
  secondaries(kind: Kind): string[];
}

/** What the host says about the call, beside the primary. */
export interface CallState {
  /** 0 on the first attempt, incremented on each retry. */
  readonly attempt: number;
  /** True when no retry follows if this attempt fails. */
  readonly lastAttempt: boolean;
  /** Every declared dependent's state, for `reconcile`. */
  readonly dependents: readonly DependentState[];
  /** The primary's external objects as polling last found them. */
  readonly external: readonly External[];
  /** The last inbound payload mapped to the primary, when inbound caching is on. */
  readonly inbound: unknown;
}

/** The state of a call outside a reconcile: first attempt, nothing known. */
export const OUTSIDE: CallState = { attempt: 0, lastAttempt: false, dependents: [], external: [], inbound: undefined };

/**
 * What a reconcile can ask of the host: which attempt this is, where the dependents stand,
 * logging, and reads of the host's caches.
 *
 * @example
 * ```ts
 * const secret = ctx.get<Secret>(Kind.namespaced("", "v1", "Secret").plural("secrets"), "default", "db");
 * if (secret === undefined) throw ReconcileError.transient("waiting for Secret default/db");
 * ```
 */
export class Context {
  constructor(
    private readonly host: Host,
    private readonly call: CallState = OUTSIDE,
  ) {}

  /** 0 on the first attempt, incremented on each retry after a failure. */
  get attempt(): number {
    return this.call.attempt;
  }

  /** True when no retry follows if this attempt fails: the moment to give up loudly. */
  isLastAttempt(): boolean {
    return this.call.lastAttempt;
  }

  /** Where the dependent `name` stands; `undefined` outside `reconcile` or for an undeclared name. */
  dependent(name: string): DependentState | undefined {
    return this.call.dependents.find((d) => d.name === name);
  }

  /** Every dependent's state, in declaration order. */
  dependents(): readonly DependentState[] {
    return this.call.dependents;
  }

  /** The objects of the dependent `name`; throws a permanent error for an undeclared name. */
  dependentObjects<T = KubeObject>(name: string): T[] {
    const state = this.dependent(name);
    if (state === undefined) throw ReconcileError.permanent(`no dependent named "${name}" was reconciled`);
    return state.objects as T[];
  }

  /** The primary's external objects of `dependent` as the last fetch found them. */
  external(dependent: string): External[] {
    return this.call.external.filter((o) => o.dependent === dependent);
  }

  /** The last inbound payload mapped to the primary, when the plugin caches inbound events. */
  get inbound(): unknown {
    return this.call.inbound;
  }

  /** Writes a structured log line into the host's log, inside the reconcile's span. */
  log(level: Level, message: string, fields: Record<string, string> = {}): void {
    this.host.log(level, message, Object.entries(fields));
  }

  /** Logs at `trace`. */
  trace(message: string): void {
    this.log("trace", message);
  }

  /** Logs at `debug`. */
  debug(message: string): void {
    this.log("debug", message);
  }

  /** Logs at `info`. */
  info(message: string): void {
    this.log("info", message);
  }

  /** Logs at `warn`. */
  warn(message: string): void {
    this.log("warn", message);
  }

  /** Logs at `error`. */
  error(message: string): void {
    this.log("error", message);
  }

  /**
   * One object from the host's cache (`namespace` undefined for cluster-scoped kinds);
   * `undefined` when it does not exist. Throws a transient error when the host cannot serve the
   * read (e.g. the kind is not watched).
   */
  get<T = KubeObject>(kind: Kind, namespace: string | undefined, name: string): T | undefined {
    const what = `${kind} ${namespace === undefined ? name : `${namespace}/${name}`}`;
    const json = this.read(`cannot read ${what}`, () => this.host.get(kind, namespace, name));
    return json === undefined ? undefined : decode<T>(json, what);
  }

  /** Objects of a kind from the host's cache, in one namespace (or all) matching a label selector (or all). */
  list<T = KubeObject>(kind: Kind, namespace?: string, labelSelector?: string): T[] {
    const where = `${namespace === undefined ? "" : ` in ${namespace}`}${labelSelector === undefined ? "" : ` matching "${labelSelector}"`}`;
    const what = `${kind} objects${where}`;
    return this.read(`cannot list ${what}`, () => this.host.list(kind, namespace, labelSelector)).map((json) =>
      decode<T>(json, what),
    );
  }

  /**
   * The objects of a watched kind that belong to the primary being reconciled, sorted by
   * namespace and name, as the watch's mapper relates them.
   */
  secondaries<T = KubeObject>(kind: Kind): T[] {
    return this.read(`cannot read the ${kind} secondaries`, () => this.host.secondaries(kind)).map((json) =>
      decode<T>(json, `a ${kind} secondary`),
    );
  }

  private read<R>(failure: string, read: () => R): R {
    try {
      return read();
    } catch (error) {
      throw ReconcileError.transient(`${failure}: ${messageOf(error)}`);
    }
  }
}

function decode<T>(json: string, what: string): T {
  try {
    return JSON.parse(json) as T;
  } catch (error) {
    throw ReconcileError.permanent(`${what} is not JSON: ${messageOf(error)}`);
  }
}
