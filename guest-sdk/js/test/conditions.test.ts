import assert from "node:assert/strict";
import { test } from "node:test";

import { conditions, requireFields } from "../src/index.js";

test("set keeps the transition time unless the status changes", () => {
  const current: conditions.Condition[] = [{ type: "Synced", status: "True", lastTransitionTime: "2020-01-01T00:00:00Z" }];
  assert.equal(conditions.set(current, conditions.newCondition("Synced", true, "Pushed", "again")), false);
  assert.equal(current[0]?.lastTransitionTime, "2020-01-01T00:00:00Z");
  assert.equal(current[0]?.message, "again");
  assert.equal(conditions.set(current, conditions.newCondition("Synced", false, "Failed", "no")), true);
  assert.notEqual(current[0]?.lastTransitionTime, "2020-01-01T00:00:00Z");
  assert.equal(conditions.set(current, conditions.newCondition("Other", "Unknown", "Starting", "")), true);
  assert.equal(current.length, 2);
  assert.equal(conditions.isTrue(current, "Synced"), false);
  assert.equal(conditions.isTrue(undefined, "Synced"), false);
  assert.match(conditions.now(), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
});

test("requireFields names the first field that does not fit", () => {
  const decode = requireFields<{ spec: { name: string; replicas: number; tags: string[] } }>({
    "spec.name": "string",
    "spec.replicas": "number",
    "spec.tags": "array",
  });
  const ok = { spec: { name: "a", replicas: 1, tags: [] } };
  assert.equal(decode(ok), ok);
  assert.throws(() => decode({ spec: { replicas: 1 } }), { kind: "invalid", message: "spec.name: missing" });
  assert.throws(() => decode({ spec: { name: "a", replicas: "1" } }), { kind: "invalid", message: 'spec.replicas: expected a number, got "1"' });
  assert.throws(() => decode({ spec: { name: "a", replicas: 1, tags: {} } }), { message: "spec.tags: expected a list, got {}" });
  assert.throws(() => decode({ spec: null }), { message: "spec.name: missing" });
});
