import assert from "node:assert/strict";
import { test } from "node:test";

import { External } from "@wasmop/guest";
import { FakeHost } from "@wasmop/guest/testing";

import dnsrecord, { external } from "./plugin.ts";

const www = (value: string) => ({
  metadata: { name: "www", namespace: "a", generation: 1 },
  spec: { zone: "example.com", name: "www", type: "A", value },
});

test("desires the record the spec names", () => {
  const [desired] = new FakeHost().desired(dnsrecord, www("10.0.0.1"));
  assert.deepEqual(desired?.object, { name: "www", type: "A", value: "10.0.0.1", ttl: 300 });
});

test("reports the ID of the record polling found", () => {
  const found = new External("record", "www", { name: "www", type: "A", value: "10.0.0.1", ttl: 300 }).withId("rec-7");
  const run = new FakeHost().withExternal(found).reconcile(dnsrecord, www("10.0.0.1"));
  assert.deepEqual(run.readiness, { ready: true, message: "www.example.com is served" });
  assert.deepEqual(run.status, { id: "rec-7", fqdn: "www.example.com" });
  assert.equal(new FakeHost().reconcile(dnsrecord, www("10.0.0.1")).readiness?.ready, false);
});

test("a record of the service is the external object without its ID", () => {
  const spec = www("10.0.0.1").spec;
  const record = external(spec, { id: "rec-1", name: "www", type: "A", value: "10.0.0.1", ttl: 300 });
  assert.deepEqual([record.key, record.id, record.object], ["www", "rec-1", { name: "www", type: "A", value: "10.0.0.1", ttl: 300 }]);
});

test("natively the service is out of reach, worth a retry", () => {
  const exported = new FakeHost().component(dnsrecord);
  assert.throws(() => exported.fetch(JSON.stringify(www("10.0.0.1")), []), /only inside the wasmop host/);
});

test("the service's webhook names the record to reconcile", () => {
  const exported = new FakeHost().component(dnsrecord);
  assert.deepEqual(exported.mapInbound(JSON.stringify({ namespace: "a", name: "www" })), [{ namespace: "a", name: "www" }]);
  assert.throws(() => exported.mapInbound(JSON.stringify({ zone: "example.com" })), /a namespace and a name/);
});
