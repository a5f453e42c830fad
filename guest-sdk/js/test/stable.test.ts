// FakeHost.runUntilStable: the whole loop of a built component by the host's rules, through
// `wasmop test` (the Rust build of the conformance plugin: the loop does not care which language
// a component was written in). The tests run from the SDK's directory.
import assert from "node:assert/strict";
import { resolve } from "node:path";
import { test } from "node:test";

import { External, Kind } from "../src/index.js";
import { FakeHost } from "../src/testing.js";

const component = resolve("../../plugins/dist/fixture-conform.wasm");
const configMap = Kind.namespaced("", "v1", "ConfigMap").plural("configmaps");

const scenario = (external: Record<string, string>) => ({
  metadata: { name: "ext", namespace: "default", generation: 1 },
  spec: { external },
});

test("an external object is created, tracked, and kept in the fake host", () => {
  const host = new FakeHost();
  let stable = host.runUntilStable(component, scenario({ www: "v1" }));
  assert.equal(stable.external.length, 1);
  const [record] = stable.external;
  assert.deepEqual([record!.dependent, record!.key, record!.id], ["records", "www", "fake-1"]);
  assert.equal((record!.object as { value: string }).value, "v1");
  const tracking = stable.objects(configMap).find((c) => (c["metadata"] as { name: string }).name === "ext-conform-ext");
  assert.match(String((tracking?.["data"] as { records?: string } | undefined)?.records), /"www"/);
  assert.equal(stable.condition("Ready")?.["status"], "True");

  // A later run continues from there: a record no longer desired is deleted.
  stable = host.runUntilStable(component, { ...stable.primary, spec: { external: {} } });
  assert.deepEqual(stable.external, []);
});

test("an external object changed by hand is applied in place", () => {
  const host = new FakeHost().withExternal(new External("records", "www", { value: "changed by hand" }));
  const [record] = host.runUntilStable(component, scenario({ www: "v1" })).external;
  assert.deepEqual([record?.id, (record?.object as { value: string }).value], ["existing-www", "v1"]);
});

test("a component that is missing is named", () => {
  assert.throws(() => new FakeHost().runUntilStable(resolve("absent.wasm"), scenario({})), /absent\.wasm/);
});
