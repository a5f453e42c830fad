import assert from "node:assert/strict";
import { test } from "node:test";
import { resolve } from "node:path";

import { AdmissionRequest } from "@wasmop/guest";
import { FakeHost } from "@wasmop/guest/testing";

import webpage, { configMap, deployment, ingress, service } from "./plugin.ts";

/** The built component (plugins/dist/webpage-ts.wasm, `make plugins`), for the whole loop; the tests run from the plugin's directory. */
const component = resolve("../dist/webpage-ts.wasm");

function page(generation: number, status?: unknown) {
  return {
    apiVersion: "sample.wasmop.dev/v1",
    kind: "WebPage",
    metadata: { name: "hello", namespace: "default", generation },
    spec: { html: "<h1>Hello</h1>" },
    status,
  };
}

/** The value at `path` in `object` (keys and list indexes). */
function at(object: unknown, ...path: (string | number)[]): unknown {
  return path.reduce<unknown>((value, key) => (value as Record<string | number, unknown> | undefined)?.[key], object);
}

function appliedHost(deployment: "Ready" | "NotReady"): FakeHost {
  return new FakeHost()
    .withDependentState("configmap", "Ready", [{}])
    .withDependentState("deployment", deployment, [{}])
    .withDependentState("service", "Ready", [{}])
    .withDependentState("ingress", "Deleted");
}

test("desires a ConfigMap, Deployment, Service and Ingress", () => {
  const desired = Object.fromEntries(new FakeHost().desired(webpage, page(1)).map((d) => [d.dependent, d.object]));
  assert.deepEqual(Object.keys(desired).sort(), ["configmap", "deployment", "ingress", "service"]);
  assert.equal(at(desired["configmap"], "metadata", "name"), "hello-html");
  assert.equal(at(desired["configmap"], "data", "index.html"), "<h1>Hello</h1>");
  assert.equal(at(desired["deployment"], "spec", "template", "spec", "volumes", 0, "configMap", "name"), "hello-html");
  assert.equal(at(desired["ingress"], "spec", "rules", 0, "http", "paths", 0, "backend", "service", "name"), "hello");
});

test("the workflow orders and conditions the dependents", () => {
  const dependents = Object.fromEntries(new FakeHost().describe(webpage).dependents.map((d) => [d.name, d]));
  assert.deepEqual(dependents["deployment"]?.dependsOn, ["configmap"]);
  assert.deepEqual(dependents["service"]?.dependsOn, ["configmap"]);
  assert.deepEqual(dependents["ingress"]?.reconcileWhen, { tag: "field-equals", val: { path: "spec.exposed", value: "true" } });
  assert.deepEqual(dependents["deployment"]?.readyWhen, {
    tag: "fields-equal",
    val: { left: "status.readyReplicas", right: "spec.replicas" },
  });
});

test("an applied page is ready and names its ConfigMap", () => {
  const run = appliedHost("NotReady").reconcile(webpage, page(3));
  assert.deepEqual(run.status, { htmlConfigMap: "hello-html", available: false });
  assert.deepEqual(run.readiness, { ready: true, message: "the WebPage's dependents are applied" });
  assert.equal(run.events.length, 1);
  assert.equal(run.events[0]?.type, "Normal");
  assert.match(run.logs[0]?.message ?? "", /14 bytes/);
});

test("a page with skipped dependents is not ready, and a running Deployment is available", () => {
  const skipped = new FakeHost().withDependentState("service", "Skipped").reconcile(webpage, page(1));
  assert.deepEqual(skipped.readiness, { ready: false, message: "some dependents wait for others" });
  assert.equal(appliedHost("Ready").reconcile(webpage, page(1)).status?.["available"], true);
});

test("an already ready page gets no event", () => {
  const ready = { conditions: [{ type: "Ready", status: "True", reason: "Ready", message: "" }] };
  assert.deepEqual(appliedHost("NotReady").reconcile(webpage, page(2, ready)).events, []);
});

test("a page without html is invalid", () => {
  const run = new FakeHost().reconcile(webpage, { metadata: { name: "hello" }, spec: {} });
  assert.equal(run.error.kind, "invalid");
  assert.equal(run.error.message, "spec.html: missing");
});

test("cleanup records an event and releases the finalizer", () => {
  const cleanup = new FakeHost().cleanup(webpage, page(1));
  assert.equal(cleanup.keepFinalizer, false);
  assert.equal(cleanup.events[0]?.reason, "CleanedUp");
  assert.equal(new FakeHost().describe(webpage).cleanup, true);
});

test("an empty html is refused at its field", () => {
  const empty = page(1);
  empty.spec.html = "";
  const verdict = new FakeHost().validate(webpage, AdmissionRequest.create(empty));
  assert.deepEqual([verdict.allowed, verdict.message, verdict.field], [false, "html must not be empty", "spec.html"]);
  assert.equal(new FakeHost().validate(webpage, AdmissionRequest.update(page(1), empty)).allowed, true);
});

test("a page that does not decode is refused, and deletes are not validated", () => {
  const odd = { ...page(1), spec: {} };
  assert.equal(new FakeHost().validate(webpage, AdmissionRequest.create(odd)).allowed, false);
  assert.throws(() => new FakeHost().validate(webpage, AdmissionRequest.delete(page(1))), /no validating webhook for Delete/);
});

test("exposed defaults to false and the rest is kept", () => {
  const sent = page(1, {});
  const spec = { ...sent.spec, extra: "kept" };
  const stored = new FakeHost().defaultObject(webpage, AdmissionRequest.create({ ...sent, spec }));
  assert.deepEqual(stored["spec"], { html: "<h1>Hello</h1>", exposed: false, extra: "kept" });
  assert.deepEqual(stored["metadata"], sent.metadata);
  const shown = { ...sent, spec: { ...spec, exposed: true } };
  assert.deepEqual(new FakeHost().defaultObject(webpage, AdmissionRequest.create(shown)), shown);
});

// ANCHOR: whole-loop
test("the whole loop applies the dependents and keeps the conditions, as the host's rules do", () => {
  const host = new FakeHost();
  let stable = host.runUntilStable(component, page(1));
  // No Deployment controller here: the Deployment never gets readyReplicas, so the Service
  // (independent of it) is applied and the Ingress (spec.exposed unset) is not.
  assert.deepEqual(
    [configMap, deployment, service, ingress].map((k) => stable.objects(k).length),
    [1, 1, 1, 0],
  );
  assert.deepEqual(stable.objects(configMap)[0]!["data"], { "index.html": "<h1>Hello</h1>" });
  const ready = stable.condition("Ready");
  assert.deepEqual([ready?.["status"], ready?.["observedGeneration"]], ["True", 1]);
  assert.equal(stable.status?.["available"], false);
  assert.equal(stable.status?.["observedGeneration"], 1);
  assert.equal(stable.passes.length, 2, "a second reconcile writes nothing");
  // ANCHOR_END: whole-loop

  // A later run continues from the store: exposing the page adds its Ingress.
  const metadata = { ...(stable.primary["metadata"] as object), generation: 2 };
  stable = host.runUntilStable(component, { ...stable.primary, metadata, spec: { html: "<h1>Hello</h1>", exposed: true } });
  assert.deepEqual(stable.objects(ingress).map((i) => at(i, "metadata", "name")), ["hello"]);
  assert.equal(stable.condition("Ready")?.["observedGeneration"], 2);
});

test("the whole loop of a page without html is degraded, and runUntilStable says so", () => {
  const invalid = { metadata: { name: "hello", namespace: "default", generation: 1 }, spec: {} };
  const stable = new FakeHost().runUntilSettled(component, invalid);
  assert.equal(stable.error?.kind, "invalid");
  assert.equal(stable.condition("Degraded")?.["status"], "True");
  assert.equal(stable.condition("Ready")?.["reason"], "InvalidResource");
  assert.throws(() => new FakeHost().runUntilStable(component, invalid), /pass 1 failed/);
});
