// The schema builder keeps the checks the API server runs itself; a CRD serves every version
// and stores its hub.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Crd, Kind, schema } from "../src/index.js";

// ANCHOR: spec
const spec = schema.object(
  {
    name: schema.string({ minLength: 1, maxLength: 63, pattern: "^[a-z][a-z0-9-]*$" }),
    minReplicas: schema.integer({ minimum: 0 }),
    maxReplicas: schema.integer({ maximum: 10 }),
    mode: schema.string({ enum: ["Fast", "Safe"] }),
    tags: schema.list(schema.string(), { minItems: 1 }),
    labels: schema.optional(schema.map(schema.string())),
    zone: schema.optional(schema.string({ rules: [{ rule: "self == oldSelf", message: "immutable" }] })),
    extra: schema.optional(schema.any()),
  },
  { rules: [{ rule: "self.minReplicas <= self.maxReplicas", message: "minReplicas must not exceed maxReplicas" }] },
);
// ANCHOR_END: spec

test("fields keep their shapes and checks", () => {
  assert.deepEqual(spec.required, ["name", "minReplicas", "maxReplicas", "mode", "tags"]);
  const properties = spec.properties as Record<string, unknown>;
  assert.deepEqual(properties.name, { type: "string", minLength: 1, maxLength: 63, pattern: "^[a-z][a-z0-9-]*$" });
  assert.deepEqual(properties.minReplicas, { type: "integer", minimum: 0 });
  assert.deepEqual(properties.mode, { type: "string", enum: ["Fast", "Safe"] });
  assert.deepEqual(properties.tags, { type: "array", items: { type: "string" }, minItems: 1 });
  assert.deepStrictEqual(properties.labels, { type: "object", additionalProperties: { type: "string" }, nullable: true });
  assert.deepStrictEqual(properties.zone, {
    type: "string",
    "x-kubernetes-validations": [{ rule: "self == oldSelf", message: "immutable" }],
    nullable: true,
  });
  assert.deepEqual(spec["x-kubernetes-validations"], [
    { rule: "self.minReplicas <= self.maxReplicas", message: "minReplicas must not exceed maxReplicas" },
  ]);
});

test("versions are served, the hub stored, with the host's status fields", () => {
  const v2 = schema.object({ content: schema.object({ html: schema.string() }) });
  const status = schema.object({ message: schema.string() });
  const crd = new Crd(Kind.namespaced("example.com", "v1", "Thing"), spec, status)
    .version("v2", v2)
    .hub("v2")
    .shortName("th")
    .printerColumn("Age", "date", ".metadata.creationTimestamp")
    .toJSON() as { metadata: { name: string }; spec: { versions: any[] } };
  assert.equal(crd.metadata.name, "things.example.com");
  const versions = crd.spec.versions;
  assert.deepEqual(versions.map((v) => [v.name, v.served, v.storage]), [["v1", true, false], ["v2", true, true]]);
  const statusOf = (i: number) => versions[i].schema.openAPIV3Schema.properties.status;
  assert.deepEqual(Object.keys(statusOf(0).properties), ["observedGeneration", "conditions", "message"]);
  assert.equal(statusOf(0).required, undefined, "a failed reconcile writes no plugin fields");
  assert.deepEqual(Object.keys(statusOf(1).properties), ["observedGeneration", "conditions"]);
  assert.deepEqual(versions[1].additionalPrinterColumns.map((c: { name: string }) => c.name), ["Ready", "Age"]);
  assert.equal(versions[1].schema.openAPIV3Schema.properties.spec.properties.content.required[0], "html");
});

test("a hub that is no version and a version twice are refused", () => {
  const crd = new Crd(Kind.namespaced("example.com", "v1", "Thing"), spec);
  assert.throws(() => crd.hub("v9"), /Thing has no version v9/);
  assert.throws(() => crd.version("v1", spec), /Thing already has a version v1/);
});

test("literals, sets and categories as the Rust SDK has them", () => {
  assert.deepEqual(schema.literal("gold", "silver"), { type: "string", enum: ["gold", "silver"] });
  assert.deepEqual(schema.literal(1, 2, 4), { type: "integer", enum: [1, 2, 4] });
  assert.deepEqual(schema.literal(0.5, 1), { type: "number", enum: [0.5, 1] });
  assert.throws(() => schema.literal("a", 1), /not of one type/);
  assert.deepEqual(schema.set(schema.string()), { type: "array", items: { type: "string" }, "x-kubernetes-list-type": "set" });
  const crd = new Crd(Kind.namespaced("example.com", "v1", "Thing"), spec).category("all").toJSON() as {
    spec: { names: { categories: string[] } };
  };
  assert.deepEqual(crd.spec.names.categories, ["all"]);
});
