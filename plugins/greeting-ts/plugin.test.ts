import assert from "node:assert/strict";
import { test } from "node:test";
import { resolve } from "node:path";

import { FakeHost } from "@wasmop/guest/testing";

import greeter from "./plugin.ts";

/** The built component (plugins/dist/greeting-ts.wasm, `make plugins`), for the whole loop; the tests run from the plugin's directory. */
const component = resolve("../dist/greeting-ts.wasm");

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

test("the whole loop greets and is ready for the current generation, as the host's rules do", () => {
  const stable = new FakeHost().runUntilStable(component, greeting({ name: "Ada" }));
  assert.equal(stable.status?.["message"], "Hello, Ada!");
  assert.equal(stable.status?.["observedGeneration"], 2);
  const ready = stable.condition("Ready");
  assert.deepEqual([ready?.["status"], ready?.["message"], ready?.["observedGeneration"]], ["True", "greeted", 2]);
  assert.equal(stable.condition("Degraded")?.["status"], "False");
  assert.equal(stable.passes.length, 2, "a second reconcile writes nothing");
});

test("the whole loop of a greeting without a name is invalid and degraded", () => {
  const stable = new FakeHost().runUntilSettled(component, greeting({}));
  assert.deepEqual(stable.error, { kind: "invalid", message: "spec.name: missing" });
  assert.equal(stable.condition("Degraded")?.["status"], "True");
  assert.equal(stable.condition("Ready")?.["reason"], "InvalidResource");
});
