/**
 * {@link Crd}: the CustomResourceDefinition of a plugin's primary, from schemas written with the
 * builder {@link schema}, with the checks the API server runs itself declared beside each
 * field: `minLength`, `maxLength`, `pattern`, `enum`, `minimum`, `maximum`, `minItems`,
 * `maxItems`, and CEL rules (`x-kubernetes-validations`) with {@link Rule}. The builder writes
 * Kubernetes structural schemas directly, by the rules of the Rust SDK's `Crd` (a field that may
 * be absent is `nullable`, a set is `x-kubernetes-list-type: set`, any JSON is
 * `x-kubernetes-preserve-unknown-fields`), with no dependency: a JSON Schema library (zod,
 * TypeBox) would add to every component and write schemas the API server refuses (`anyOf` with
 * `null`, `$ref`, `additionalProperties: false`) that would need rewriting.
 * @module
 */
import type { Kind } from "./kind.js";

/** A schema of the CRD: a Kubernetes structural schema (`JSONSchemaProps`) as JSON. */
export type Schema = Record<string, unknown>;

/** A CEL rule the API server checks: `self` is the field's value; `message` is what a refusal says. */
export interface Rule {
  /** The CEL expression, e.g. `self.min <= self.max`. */
  readonly rule: string;
  /** What a refusal says. */
  readonly message?: string;
}

/** What every schema may say. */
export interface Common {
  /** The field's description (`kubectl explain` shows it). */
  readonly description?: string;
  /** CEL rules about the value. */
  readonly rules?: readonly Rule[];
}

/** The checks of a string. */
export interface StringChecks extends Common {
  readonly minLength?: number;
  readonly maxLength?: number;
  /** A regular expression the string must match. */
  readonly pattern?: string;
  /** The values it may take. */
  readonly enum?: readonly string[];
  /** A `format` the API server knows, e.g. `date-time`. */
  readonly format?: string;
}

/** The checks of a number. */
export interface NumberChecks extends Common {
  readonly minimum?: number;
  readonly maximum?: number;
}

/** The checks of a list. */
export interface ListChecks extends Common {
  readonly minItems?: number;
  readonly maxItems?: number;
}

/** A field of an object: its schema, and whether it may be absent. */
interface Field {
  readonly schema: Schema;
  readonly optional: boolean;
}

function checked(schema: Schema, checks: Common & Record<string, unknown>): Schema {
  const { rules, ...rest } = checks;
  const out: Schema = { ...schema };
  for (const [key, value] of Object.entries(rest)) if (value !== undefined) out[key] = value;
  if (rules !== undefined && rules.length > 0) {
    out["x-kubernetes-validations"] = rules.map((r) => (r.message === undefined ? { rule: r.rule } : { rule: r.rule, message: r.message }));
  }
  return out;
}

const OPTIONAL = Symbol("optional");

/** A field that may be absent (and `null`): `schema.optional(schema.string())`. */
type Optional = Schema & { readonly [OPTIONAL]: true };

/**
 * The schema builder: each function gives the schema of a value with its checks.
 *
 * @example
 * ```ts
 * const spec = schema.object({
 *   html: schema.string({ minLength: 1, rules: [{ rule: "size(self) <= 1048576", message: "the HTML must fit in a ConfigMap" }] }),
 *   exposure: schema.optional(schema.string({ enum: ["Public", "Private"] })),
 * });
 * ```
 */
export const schema = {
  /** A string. */
  string: (checks: StringChecks = {}): Schema => checked({ type: "string" }, { ...checks }),
  /** An integer (`int64`). */
  integer: (checks: NumberChecks = {}): Schema => checked({ type: "integer" }, { ...checks }),
  /** A number. */
  number: (checks: NumberChecks = {}): Schema => checked({ type: "number" }, { ...checks }),
  /** A boolean. */
  boolean: (checks: Common = {}): Schema => checked({ type: "boolean" }, { ...checks }),
  /** A list of `items`. */
  list: (items: Schema, checks: ListChecks = {}): Schema => checked({ type: "array", items: plain(items) }, { ...checks }),
  /** A list of distinct `items` (scalars): `x-kubernetes-list-type: set`. */
  set: (items: Schema, checks: ListChecks = {}): Schema =>
    checked({ type: "array", items: plain(items), "x-kubernetes-list-type": "set" }, { ...checks }),
  /** One of `values`, all strings, all integers, all numbers or all booleans (an enum). */
  literal: (...values: readonly [string | number | boolean, ...(string | number | boolean)[]]): Schema => {
    const kinds = new Set(values.map((v) => (typeof v === "number" ? (Number.isInteger(v) ? "integer" : "number") : typeof v)));
    if (kinds.size === 2 && kinds.has("integer") && kinds.has("number")) kinds.delete("integer");
    if (kinds.size !== 1) throw new TypeError(`schema.literal: ${JSON.stringify(values)} are not of one type`);
    const [type] = kinds;
    return { type, enum: [...values] };
  },
  /** A map from strings to `values`. */
  map: (values: Schema, checks: Common = {}): Schema =>
    checked({ type: "object", additionalProperties: plain(values) }, { ...checks }),
  /** Any JSON, kept as it is. */
  any: (checks: Common = {}): Schema => checked({ "x-kubernetes-preserve-unknown-fields": true }, { ...checks }),
  /** An object of these fields; those not wrapped in {@link schema.optional} are required. */
  object: (fields: Readonly<Record<string, Schema>>, checks: Common = {}): Schema => {
    const properties: Record<string, Schema> = {};
    const required: string[] = [];
    for (const [name, field] of Object.entries(fields)) {
      const { schema: s, optional } = asField(field);
      properties[name] = s;
      if (!optional) required.push(name);
    }
    const object: Schema = { type: "object", properties };
    if (required.length > 0) object.required = required;
    return checked(object, { ...checks });
  },
  /** A field that may be absent or `null`. */
  optional: (field: Schema): Schema => ({ ...field, nullable: true, [OPTIONAL]: true }) as Optional,
};

function asField(field: Schema): Field {
  return { schema: plain(field), optional: (field as Partial<Optional>)[OPTIONAL] === true };
}

/** `s` as JSON: without the builder's marks. */
function plain(s: Schema): Schema {
  const { [OPTIONAL]: _optional, ...rest } = s as Partial<Optional>;
  return rest;
}

const conditions: Schema = {
  type: "array",
  description: "The conditions: the host's (Ready, Degraded) and any other controller's.",
  "x-kubernetes-list-type": "map",
  "x-kubernetes-list-map-keys": ["type"],
  items: {
    type: "object",
    required: ["type", "status"],
    properties: {
      type: { type: "string", description: "The condition's type, e.g. Ready." },
      status: { type: "string", enum: ["True", "False", "Unknown"] },
      reason: { type: "string", description: "Why, in CamelCase." },
      message: { type: "string", description: "Why, for a person." },
      lastTransitionTime: { type: "string", format: "date-time" },
      observedGeneration: { type: "integer", format: "int64" },
    },
  },
};

/** The status schema: the host's fields, then the plugin's, none of them required. */
function statusOf(status: Schema | undefined): Schema {
  const host = {
    observedGeneration: {
      type: "integer",
      format: "int64",
      description: "The metadata.generation the host last reconciled (written by the host).",
    },
    conditions,
  };
  const { required: _required, ...rest } = plain(status ?? { type: "object" });
  const own = (rest.properties ?? {}) as Record<string, Schema>;
  return { ...rest, type: "object", properties: { ...host, ...own } };
}

interface Version {
  readonly name: string;
  readonly spec: Schema;
  readonly status: Schema;
}

/**
 * The CustomResourceDefinition (`apiextensions.k8s.io/v1`) of a primary kind: each version with
 * the schemas of its spec and status, every one served, the hub (the first, unless
 * {@link Crd.hub} names another) stored. Return `crd.toJSON()` from the reconciler's `crd`;
 * `wasmop crd --plugin x.wasm` prints it as YAML.
 *
 * @example
 * ```ts
 * crd: () => new Crd(Kind.namespaced("example.com", "v1", "Page"), spec).version("v2", specV2).hub("v2").toJSON(),
 * ```
 */
export class Crd {
  private readonly versions: Version[] = [];
  private hubVersion: string;
  private readonly columns: Record<string, string>[] = [
    { name: "Ready", type: "string", jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
  ];
  private readonly shortNames: string[] = [];
  private readonly categories: string[] = [];

  /** The CRD of `kind`, whose version `kind.version` has these spec and status schemas. */
  constructor(
    private readonly kind: Kind,
    spec: Schema,
    status?: Schema,
  ) {
    this.hubVersion = kind.version;
    this.version(kind.version, spec, status);
  }

  /** Adds the version `name` of the kind, with its spec and status schemas. */
  version(name: string, spec: Schema, status?: Schema): this {
    if (this.versions.some((v) => v.name === name)) throw new Error(`${this.kind.kind} already has a version ${name}`);
    this.versions.push({ name, spec: plain(spec), status: statusOf(status) });
    return this;
  }

  /** Makes the version `name` the hub: the one the API server stores. */
  hub(name: string): this {
    if (!this.versions.some((v) => v.name === name)) throw new Error(`${this.kind.kind} has no version ${name}`);
    this.hubVersion = name;
    return this;
  }

  /** Adds a printer column to every version (`kubectl get` shows it). */
  printerColumn(name: string, type: string, jsonPath: string): this {
    this.columns.push({ name, type, jsonPath });
    return this;
  }

  /** Adds a short name (`kubectl get hi`). */
  shortName(name: string): this {
    this.shortNames.push(name);
    return this;
  }

  /** Adds a category (`kubectl get all` lists the kinds of category `all`). */
  category(category: string): this {
    this.categories.push(category);
    return this;
  }

  /** The CustomResourceDefinition as JSON. */
  toJSON(): Record<string, unknown> {
    const singular = this.kind.kind.toLowerCase();
    const plural = this.kind.pluralName ?? `${singular}s`;
    const names: Record<string, unknown> = { kind: this.kind.kind, listKind: `${this.kind.kind}List`, plural, singular };
    if (this.shortNames.length > 0) names.shortNames = [...this.shortNames];
    if (this.categories.length > 0) names.categories = [...this.categories];
    return {
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "CustomResourceDefinition",
      metadata: { name: `${plural}.${this.kind.group}` },
      spec: {
        group: this.kind.group,
        names,
        scope: this.kind.namespaced ? "Namespaced" : "Cluster",
        versions: this.versions.map((v) => ({
          name: v.name,
          served: true,
          storage: v.name === this.hubVersion,
          subresources: { status: {} },
          additionalPrinterColumns: [...this.columns],
          schema: { openAPIV3Schema: { type: "object", required: ["spec"], properties: { spec: v.spec, status: v.status } } },
        })),
      },
    };
  }
}
