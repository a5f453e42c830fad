import assert from "node:assert/strict";
import { test } from "node:test";

import { FakeHost } from "@wasmop/guest/testing";

import greeter from "./plugin.ts";

const greeting = (spec: unknown) => ({ metadata: { name: "hi", namespace: "default", generation: 2 }, spec });

test("greets spec.name and is ready", () => {
  const run = new FakeHost().reconcile(greeter, greeting({ name: "Ada" }));
  assert.deepEqual(run.status, { message: "Hello, Ada!" });
  assert.deepEqual(run.readiness, { ready: true, message: "greeted" });
});

test("a greeting without a name is invalid", () => {
  const run = new FakeHost().reconcile(greeter, greeting({}));
  assert.equal(run.error.kind, "invalid");
  assert.equal(run.error.message, "spec.name: missing");
});

test("describes a status-only plugin for Greetings that caches only the spec", () => {
  const config = new FakeHost().describe(greeter);
  assert.equal(config.name, "greeting");
  assert.deepEqual(config.primary, { group: "example.wasmop.dev", version: "v1", kind: "Greeting", plural: undefined, namespaced: true });
  assert.deepEqual(config.projection, ["spec"]);
  assert.equal(config.conditions, true);
  assert.equal(config.cleanup, false);
  assert.deepEqual(config.dependents, []);
});
