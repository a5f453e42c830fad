/**
 * The component glue: turns a {@link Reconciler} into the object componentize-js exports as
 * `wasmop:plugin/reconciler@0.8.1`, calling the host through the `wasmop:plugin/host@0.8.1`
 * imports it is given. A plugin's build generates the entry module that imports the host and
 * calls {@link exportReconciler} and {@link exportAdmission}; nothing else in the SDK knows about
 * the component, so plugins and their tests run in plain Node.
 *
 * Conventions of componentize-js this follows: an export returning `result` returns the `ok`
 * value and throws the `err` value (an `Error` thrown instead would trap); the host's imports
 * throw an object whose `payload` is their `err` value.
 * @module
 */
import { Config } from "./config.js";
import { Context, OUTSIDE, type CallState, type Host } from "./context.js";
import { Cleanup, Desired } from "./dependent.js";
import { ReconcileError, messageOf, parseObject } from "./errors.js";
import { External, Tracked } from "./external.js";
import type { Kind } from "./kind.js";
import { Outcome } from "./outcome.js";
import type { Reconciler } from "./reconciler.js";
import { convert, defaultObject, validate } from "./admission.js";
import type { WebhookType } from "./webhook.js";
import { HttpError, useTransport, type Request, type Response } from "./http.js";
import { wasiHttp, type WasiHttpTypes, type WasiOutgoingHandler } from "./wasi-http.js";
import {
  cleanupToWit,
  configToWit,
  dependentStateFromWit,
  desiredToWit,
  errorFromWit,
  errorToWit,
  externalFromWit,
  externalToWit,
  kindToWit,
  outcomeToWit,
  parseOr,
  admissionRequestFromWit,
  primaryRefToWit,
  secondaryRefToWit,
  verdictToWit,
  type WitAdmissionRequest,
  type WitCleanupOutcome,
  type WitDesiredObject,
  type WitEventKind,
  type WitExternalObject,
  type WitKindRef,
  type WitLogLevel,
  type WitObjectRef,
  type WitOutcome,
  type WitPluginConfig,
  type WitReconcileError,
  type WitReconcileRequest,
  type WitSecondaryRef,
  type WitVerdict,
} from "./wire.js";

/** The `wasmop:plugin/host@0.8.1` imports, as componentize-js provides them. */
export interface HostImports {
  log(level: WitLogLevel, message: string, fields: [string, string][]): void;
  get(kind: WitKindRef, namespace: string | undefined, name: string): string | undefined;
  list(kind: WitKindRef, namespace: string | undefined, labelSelector: string | undefined): string[];
  secondaries(kind: WitKindRef): string[];
  retryAfter(delayMs: bigint): void;
}

/** The `wasmop:plugin/reconciler@0.8.1` export, as componentize-js expects it. */
export interface ReconcilerExport {
  describe(): WitPluginConfig;
  desired(request: WitReconcileRequest): WitDesiredObject[];
  reconcile(request: WitReconcileRequest): WitOutcome;
  cleanup(request: WitReconcileRequest): WitCleanupOutcome;
  check(name: string, primary: string, dependent: string | undefined): boolean;
  updateErrorStatus(request: WitReconcileRequest, error: WitReconcileError): string | undefined;
  mapSecondary(secondary: string, previous: string | undefined): WitObjectRef[];
  secondariesOf(primary: string): WitSecondaryRef[];
  crd(): string | undefined;
  fetch(primary: string, tracked: { dependent: string; key: string; id: string }[]): WitExternalObject[];
  fetchAll(): { primary: WitObjectRef; objects: WitExternalObject[] }[];
  applyExternal(primary: string, desired: WitExternalObject, actual: WitExternalObject | undefined): WitExternalObject;
  deleteExternal(primary: string, actual: WitExternalObject): void;
  mapInbound(payload: string): WitObjectRef[];
  filter(name: string, event: WitEventKind, object: string, old: string | undefined): boolean;
}

/** The `wasmop:plugin/admission@0.8.1` export, as componentize-js expects it. */
export interface AdmissionExport {
  validate(request: WitAdmissionRequest): WitVerdict;
  default(request: WitAdmissionRequest): string;
  convert(objects: string[], desiredApiVersion: string): string[];
}

/** The SDK's {@link Host} over the component's imports. */
export function hostOver(imports: HostImports): Host {
  return {
    log: (level, message, fields) => imports.log(level, message, fields),
    get: (kind: Kind, namespace, name) => imports.get(kindToWit(kind), namespace, name),
    list: (kind: Kind, namespace, labelSelector) => imports.list(kindToWit(kind), namespace, labelSelector),
    secondaries: (kind: Kind) => imports.secondaries(kindToWit(kind)),
  };
}

/**
 * Runs `call`, throwing what it throws as the WIT's `reconcile-error`, after asking the host
 * (`retry-after`) for the delay a transient one carries.
 */
function failingAsWit<T>(imports: HostImports, call: () => T): T {
  try {
    return call();
  } catch (error) {
    const failure = ReconcileError.from(error);
    if (failure.delayMs !== undefined) imports.retryAfter(BigInt(Math.round(failure.delayMs)));
    throw errorToWit(failure);
  }
}

/** Runs `call`, throwing what it throws as a `string` error. */
function failingAsText<T>(call: () => T): T {
  try {
    return call();
  } catch (error) {
    throw messageOf(error);
  }
}

/** `value` is a JSON object (not an array, not null). */
function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The plugin config `describe` returns: the reconciler's {@link Config}, with `cleanup` set when
 * the reconciler implements `cleanup`.
 */
export function describe<P>(reconciler: Reconciler<P>): WitPluginConfig {
  const config = reconciler.config();
  if (!(config instanceof Config)) throw new TypeError("config() must return a Config");
  const types = config.webhooks.map((w) => w.webhookType);
  const twice = types.find((type, i) => types.indexOf(type) !== i);
  if (twice !== undefined) throw new TypeError(`plugin ${config.name} declares two ${twice} webhooks: one per type`);
  for (const type of types) {
    const handler = HANDLERS[type];
    if (typeof reconciler[handler] !== "function") {
      throw new TypeError(`plugin ${config.name} declares a ${type.toLowerCase()} webhook but does not implement ${handler}`);
    }
  }
  return configToWit(config, typeof reconciler.cleanup === "function");
}

/** The function of the reconciler each type of webhook calls. */
const HANDLERS = { Validating: "validate", Mutating: "default", Conversion: "convert" } as const satisfies Record<
  WebhookType,
  keyof Reconciler
>;

/** Runs `call`; a {@link ReconcileError} it throws is thrown as its message (the `err` value). */
function refusingAsText<T>(call: () => T): T {
  try {
    return call();
  } catch (error) {
    if (error instanceof ReconcileError) throw error.message;
    throw error;
  }
}

/**
 * The `wasmop:plugin/admission` export of `reconciler`, calling the host through `imports`:
 * `validate`, `default` and `convert` call the reconciler's functions of those names.
 */
export function exportAdmission<P>(reconciler: Reconciler<P>, imports: HostImports): AdmissionExport {
  const outside = new Context(hostOver(imports), OUTSIDE);
  return {
    validate: (request) => verdictToWit(validate(reconciler, admissionRequestFromWit(request), outside)),
    default: (request) => refusingAsText(() => defaultObject(reconciler, admissionRequestFromWit(request), outside)),
    convert: (objects, desiredApiVersion) => refusingAsText(() => convert(reconciler, objects, desiredApiVersion, outside)),
  };
}

/** The transport of a plugin without an `http` grant, built without `wasi:http`. */
function ungranted(request: Request): Response {
  throw new HttpError(
    `${request.method} ${request.url}: the plugin declares no http grant, so it was built without wasi:http; ` +
      "declare the origins it calls with Config.http",
  );
}

/** The `wasi:http` imports of a plugin built against the `operator-http` world. */
export interface HttpImports {
  /** `wasi:http/outgoing-handler@0.2.12`. */
  handler: WasiOutgoingHandler;
  /** `wasi:http/types@0.2.12`. */
  types: WasiHttpTypes;
}

/**
 * Sends the HTTP client's requests through the `wasi:http` imports `http`; without them (a plugin
 * without an `http` grant is built without `wasi:http`) every request fails saying so.
 */
export function exportHttp(http?: HttpImports): void {
  useTransport(http === undefined ? ungranted : wasiHttp(http.handler, http.types));
}

/**
 * The `wasmop:plugin/reconciler` export of `reconciler`, calling the host through `imports`.
 *
 * @example
 * ```ts
 * // The entry module a plugin's build generates (the wasi:http imports only with a grant):
 * import * as host from "wasmop:plugin/host@0.8.1";
 * import * as handler from "wasi:http/outgoing-handler@0.2.12";
 * import * as types from "wasi:http/types@0.2.12";
 * import { exportAdmission, exportHttp, exportReconciler } from "@wasmop/guest/component";
 * import plugin from "./plugin.ts";
 * exportHttp({ handler, types });
 * export const reconciler = exportReconciler(plugin, host);
 * export const admission = exportAdmission(plugin, host);
 * ```
 */
export function exportReconciler<P>(reconciler: Reconciler<P>, imports: HostImports): ReconcilerExport {
  const host = hostOver(imports);
  const outside = new Context(host, OUTSIDE);
  const name = () => reconciler.config().name;

  const decode = (json: string): P => {
    const object = parseObject(json, "the primary");
    if (reconciler.decode === undefined) return object as P;
    try {
      return reconciler.decode(object);
    } catch (error) {
      throw error instanceof ReconcileError ? error : ReconcileError.invalid(messageOf(error));
    }
  };
  const call = (request: WitReconcileRequest): [P, Context] => {
    const state: CallState = {
      attempt: request.attempt,
      lastAttempt: request.lastAttempt,
      dependents: request.dependents.map(dependentStateFromWit),
      external: request.external.map(externalFromWit),
      inbound: request.inbound === undefined ? undefined : parseOr(request.inbound, undefined),
    };
    return [decode(request.object), new Context(host, state)];
  };
  const unimplemented = (what: string, why: string) =>
    `plugin ${name()} ${why} but does not implement ${what}`;

  return {
    describe: () => describe(reconciler),

    reconcile: (request) =>
      failingAsWit(imports, () => {
        const outcome = reconciler.reconcile(...call(request));
        if (!(outcome instanceof Outcome)) throw ReconcileError.permanent("reconcile must return an Outcome");
        if (outcome.statusValue !== undefined && !isObject(outcome.statusValue)) {
          throw ReconcileError.permanent(`the status must be a JSON object, got ${JSON.stringify(outcome.statusValue)}`);
        }
        return outcomeToWit(outcome);
      }),

    desired: (request) =>
      failingAsWit(imports, () => {
        const desired = reconciler.desired?.(...call(request)) ?? [];
        if (!desired.every((d) => d instanceof Desired)) throw ReconcileError.permanent("desired must return Desired objects");
        return desired.map(desiredToWit);
      }),

    cleanup: (request) =>
      failingAsWit(imports, () => {
        const cleanup = reconciler.cleanup?.(...call(request)) ?? Cleanup.done();
        if (!(cleanup instanceof Cleanup)) throw ReconcileError.permanent("cleanup must return a Cleanup");
        return cleanupToWit(cleanup);
      }),

    check: (checkName, primary, dependent) => {
      try {
        const object = dependent === undefined ? undefined : parseObject(dependent, "the dependent");
        return reconciler.check?.(checkName, decode(primary), object, outside) ?? false;
      } catch (error) {
        outside.error(`check ${checkName} failed: ${messageOf(error)}`);
        return false;
      }
    },

    updateErrorStatus: (request, error) => {
      if (reconciler.errorStatus === undefined) return undefined;
      try {
        const [primary, ctx] = call({ ...request, dependents: [], external: [], inbound: undefined });
        const status = reconciler.errorStatus(primary, errorFromWit(error), ctx);
        if (status === undefined) return undefined;
        if (!isObject(status)) {
          ctx.error(`errorStatus must return a JSON object, got ${JSON.stringify(status)}; the status is left alone`);
          return undefined;
        }
        return JSON.stringify(status);
      } catch (failure) {
        outside.error(`errorStatus failed: ${messageOf(failure)}; the status is left alone`);
        return undefined;
      }
    },

    mapSecondary: (secondary, previous) =>
      failingAsText(() => {
        if (reconciler.mapSecondary === undefined) {
          throw unimplemented("mapSecondary", "declares a watch with the plugin mapper");
        }
        const before = previous === undefined ? undefined : parseObject(previous, "the previous version of the secondary");
        return reconciler.mapSecondary(parseObject(secondary, "the secondary"), before, outside).map(primaryRefToWit);
      }),

    secondariesOf: (primary) =>
      failingAsText(() => (reconciler.secondariesOf?.(decode(primary), outside) ?? []).map(secondaryRefToWit)),

    crd: () => {
      const crd = reconciler.crd?.();
      return crd === undefined ? undefined : JSON.stringify(crd);
    },

    fetch: (primary, tracked) =>
      failingAsText(() => {
        if (reconciler.fetch === undefined) throw unimplemented("fetch", "polls per resource");
        const ids = new Tracked(tracked.map((t) => [t.dependent, t.key, t.id] as const));
        return reconciler.fetch(decode(primary), ids, outside).map(externalToWit);
      }),

    fetchAll: () =>
      failingAsText(() => {
        if (reconciler.fetchAll === undefined) throw unimplemented("fetchAll", "polls globally");
        return reconciler.fetchAll(outside).map((state) => ({
          primary: primaryRefToWit(state.primary),
          objects: state.objects.map(externalToWit),
        }));
      }),

    applyExternal: (primary, desired, actual) =>
      failingAsWit(imports, () => {
        if (reconciler.applyExternal === undefined) {
          throw ReconcileError.permanent(unimplemented("applyExternal", "declares external dependents"));
        }
        const current = actual === undefined ? undefined : externalFromWit(actual);
        const applied = reconciler.applyExternal(decode(primary), externalFromWit(desired), current, outside);
        if (!(applied instanceof External)) throw ReconcileError.permanent("applyExternal must return an External");
        return externalToWit(applied);
      }),

    deleteExternal: (primary, actual) =>
      failingAsWit(imports, () => {
        if (reconciler.deleteExternal === undefined) {
          throw ReconcileError.permanent(unimplemented("deleteExternal", "declares external dependents"));
        }
        reconciler.deleteExternal(decode(primary), externalFromWit(actual), outside);
      }),

    mapInbound: (payload) =>
      failingAsText(() => {
        if (reconciler.mapInbound === undefined) throw unimplemented("mapInbound", "accepts inbound events");
        let body: unknown;
        try {
          body = JSON.parse(payload);
        } catch (error) {
          throw `the payload is not JSON: ${messageOf(error)}`;
        }
        return reconciler.mapInbound(body, outside).map(primaryRefToWit);
      }),

    filter: (filterName, event, object, old) => {
      if (reconciler.filter === undefined) return true;
      try {
        const before = old === undefined ? undefined : parseObject(old, "the previous version");
        return reconciler.filter(filterName, event, parseObject(object, "the object"), before);
      } catch (error) {
        outside.error(`filter ${filterName} failed: ${messageOf(error)}`);
        return false;
      }
    },
  };
}
