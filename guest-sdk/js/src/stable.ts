/**
 * The whole reconcile loop of a built plugin, by the host's own rules: {@link settle} runs the
 * component through `wasmop test --output json` (the loop of the host's rules crate, the one the
 * Rust SDK's `FakeHost::run_until_stable` runs) and returns the store as it ended ({@link Stable}).
 *
 * Each pass does what the host does for one reconcile: `desired`, the capability checks, the
 * dependents' workflow (order, skips, deletes, readiness), `reconcile` with the dependents'
 * states, then the writes: labels and annotations, and the status with `observedGeneration` and
 * the host's conditions (`Ready`, `Reconciling`, `Degraded`). Passes repeat until one leaves the
 * store as it was. No cluster and no network: `wasmop` (on `PATH`, or the file `$WASMOP` names)
 * runs the component in its sandbox. The component is compiled on its first run and kept in
 * wasmop's module cache, so later runs of the same build take a fraction of a second.
 * @module
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { External } from "./external.js";
import { Kind } from "./kind.js";

/** A JSON object. */
type JsonObject = Record<string, unknown>;

/** One pass as `wasmop test` shows it. */
export interface Pass {
  /** `initial`. */
  readonly stage: string;
  /** Its number, from 1. */
  readonly pass: number;
  /** What the host would write: `{ apply: { kind, object } }`, `{ delete: ... }`, `{ patchStatus: ... }`, ... */
  readonly writes?: JsonObject[];
  /** The events it would record. */
  readonly events?: JsonObject[];
  /** The reschedule the reconcile asked for. */
  readonly requeueMs?: number;
  /** How it failed: `{ transient | permanent | invalid: message }`. */
  readonly error?: Record<string, string>;
}

/** A stored object and its kind. */
export interface StoredObject {
  readonly kind: Kind;
  readonly object: JsonObject;
}

/** The `wasmop` binary: the file `$WASMOP` names, else `wasmop` on `PATH`. */
export function wasmopBinary(): string {
  const named = process.env["WASMOP"];
  if (named !== undefined && named !== "") {
    if (!existsSync(named)) throw new Error(`$WASMOP names ${named}, which does not exist`);
    return named;
  }
  return "wasmop";
}

/** Where the loop ended: every pass, the primary, every object of the store and the external system's objects. */
export class Stable {
  /** @internal */
  constructor(
    /** Every pass, in order; the last changed nothing. */
    readonly passes: readonly Pass[],
    /** The primary as the store holds it. */
    readonly primary: JsonObject,
    /** Every stored object (the primary's too), with its kind. */
    readonly stored: readonly StoredObject[],
    /** The external system's objects. */
    readonly external: readonly External[],
  ) {}

  /** The last pass. */
  get last(): Pass {
    return this.passes[this.passes.length - 1]!;
  }

  /** How the last pass failed: its kind (`transient`, `permanent`, `invalid`) and message. */
  get error(): { kind: string; message: string } | undefined {
    const error = this.last.error;
    if (error === undefined) return undefined;
    const [kind, message] = Object.entries(error)[0]!;
    return { kind, message };
  }

  /** The primary's `.status` as the store holds it. */
  get status(): JsonObject | undefined {
    return this.primary["status"] as JsonObject | undefined;
  }

  /** The primary's condition of type `type`, if any. */
  condition(type: string): JsonObject | undefined {
    const conditions = (this.status?.["conditions"] ?? []) as JsonObject[];
    return conditions.find((c) => c["type"] === type);
  }

  /** The stored objects of `kind`, sorted by namespace and name. */
  objects(kind: Kind): JsonObject[] {
    const at = (o: JsonObject) => {
      const metadata = o["metadata"] as { namespace?: string; name?: string };
      return `${metadata.namespace ?? ""}/${metadata.name ?? ""}`;
    };
    return this.stored
      .filter((s) => s.kind.sameType(kind))
      .map((s) => s.object)
      .sort((a, b) => at(a).localeCompare(at(b)));
  }
}

interface KindRefJson {
  group?: string;
  version: string;
  kind: string;
  plural?: string;
  namespaced: boolean;
}

/** The store and the external system as `wasmop test --output json` shows them at the end. */
interface End {
  primary: JsonObject;
  objects: { kind: KindRefJson; object: JsonObject }[];
  external: { dependent: string; key: string; id?: string; object: JsonObject }[];
}

function kindOf(ref: KindRefJson): Kind {
  const kind = (ref.namespaced ? Kind.namespaced : Kind.cluster)(ref.group ?? "", ref.version, ref.kind);
  return ref.plural === undefined ? kind : kind.plural(ref.plural);
}

/**
 * Runs the built plugin `component` (a `.wasm` file) on `primary` among `objects`, the external
 * system holding `external`, until a pass changes nothing, as the host would; the primary and
 * objects without a namespace are in `namespace`. The external system plays the service: it keeps
 * what the plugin applies (an object it creates gets the ID `fake-N`, one given here
 * `existing-KEY`) and deletes what the plugin deletes. Throws with wasmop's message when the component or the objects cannot be run (a
 * plugin whose dependents are invalid, a loop that never settles).
 */
export function settle(
  component: string,
  primary: JsonObject,
  objects: readonly StoredObject[],
  external: readonly External[] = [],
  namespace = "default",
): Stable {
  // A stored primary of an earlier run among the objects is replaced by this one.
  const fixture = {
    primary,
    objects: objects.map(({ kind, object }) => ({
      kind: { group: kind.group, version: kind.version, kind: kind.kind, plural: kind.pluralName ?? `${kind.kind.toLowerCase()}s` },
      object,
    })),
    external: Object.fromEntries(external.map((e) => [e.key, { dependent: e.dependent, ...(e.object as JsonObject) }])),
  };
  const scratch = mkdtempSync(join(tmpdir(), "wasmop-fake-"));
  try {
    const path = join(scratch, "fixture.yaml");
    writeFileSync(path, JSON.stringify(fixture));
    const ran = spawnSync(wasmopBinary(), ["test", "--output", "json", "--namespace", namespace, component, path], {
      encoding: "utf8",
      maxBuffer: 256 * 1024 * 1024,
    });
    if (ran.error !== undefined) {
      throw new Error(`the whole loop runs the component through \`wasmop test\`: put wasmop on PATH or name it in $WASMOP (${ran.error.message})`);
    }
    if (ran.status === 2 || ran.stdout === "") throw new Error(`wasmop test ${component}: ${ran.stderr.trim()}`);
    const [shown] = JSON.parse(ran.stdout) as [{ passes?: Pass[]; end: End }];
    const stored = shown.end.objects.map((o) => ({ kind: kindOf(o.kind), object: o.object }));
    const found = shown.end.external.map((e) => {
      const object = new External(e.dependent, e.key, e.object);
      return e.id === undefined ? object : object.withId(e.id);
    });
    return new Stable(shown.passes ?? [], shown.end.primary, stored, found);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
