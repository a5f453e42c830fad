// The component export: how calls, results and failures cross the boundary.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  Cleanup,
  Config,
  Context,
  Desired,
  Event,
  External,
  Kind,
  Outcome,
  PrimaryRef,
  ReconcileError,
  SecondaryRef,
  type Host,
  type Reconciler,
  Watch,
} from "../src/index.js";
import { FakeHost, project } from "../src/testing.js";

const thing = Kind.namespaced("example.com", "v1", "Thing");
const primary = { metadata: { name: "a", namespace: "ns" }, spec: { size: 2 } };

function plugin(extra: Partial<Reconciler>): Reconciler {
  return { config: () => new Config("thing", thing), reconcile: () => Outcome.done(), ...extra };
}

function request(object: unknown = primary) {
  return { object: JSON.stringify(object), attempt: 0, lastAttempt: false, dependents: [], external: [], inbound: undefined };
}

test("an outcome crosses with its status as JSON, milliseconds as u64, labels and events", () => {
  const exported = new FakeHost().component(
    plugin({
      reconcile: () =>
        Outcome.notReady("waiting")
          .status({ size: 2 })
          .rescheduleAfter(1_500)
          .label("a", "1")
          .removeLabel("b")
          .annotation("c", "2")
          .removeAnnotation("d")
          .event(Event.warning("Slow", "Reconcile").note("it takes a while")),
    }),
  );
  assert.deepEqual(exported.reconcile(request()), {
    readiness: { ready: false, message: "waiting" },
    status: '{"size":2}',
    labels: [["a", "1"], ["b", undefined]],
    annotations: [["c", "2"], ["d", undefined]],
    rescheduleAfterMs: 1_500n,
    events: [{ eventType: "warning", reason: "Slow", action: "Reconcile", note: "it takes a while" }],
  });
});

test("a negative reschedule fails the reconcile, as the Python SDK fails it", () => {
  const exported = new FakeHost().component(plugin({ reconcile: () => Outcome.done().rescheduleAfter(-1) }));
  assert.throws(() => exported.reconcile(request()), { tag: "transient", val: "RangeError: a duration cannot be negative, got -1" });
  const cleaning = new FakeHost().component(plugin({ cleanup: () => Cleanup.done().rescheduleAfter(-2) }));
  assert.throws(() => cleaning.cleanup(request()), { tag: "transient", val: "RangeError: a duration cannot be negative, got -2" });
});

test("errors are thrown as the WIT's reconcile-error, never as an Error (which would trap)", () => {
  const failing = (error: unknown) => () => {
    throw error;
  };
  const thrown = (reconcile: () => Outcome) => {
    try {
      new FakeHost().component(plugin({ reconcile })).reconcile(request());
    } catch (error) {
      return error;
    }
    return undefined;
  };
  assert.deepEqual(thrown(failing(ReconcileError.permanent("no"))), { tag: "permanent", val: "no" });
  assert.deepEqual(thrown(failing(ReconcileError.invalid("bad"))), { tag: "invalid", val: "bad" });
  assert.deepEqual(thrown(failing(new TypeError("x is undefined"))), { tag: "transient", val: "TypeError: x is undefined" });
  assert.deepEqual(thrown(failing("text")), { tag: "transient", val: "text" });
});

test("a primary that is not a JSON object, or that decode rejects, is invalid", () => {
  const host = new FakeHost();
  assert.equal(host.reconcile(plugin({}), [1, 2]).error.message, "the primary is not a JSON object");
  const strict = plugin({
    decode: () => {
      throw new Error("spec.size must be a string");
    },
  });
  assert.deepEqual([host.reconcile(strict, primary).error.kind, host.reconcile(strict, primary).error.message], [
    "invalid",
    "Error: spec.size must be a string",
  ]);
});

test("a status that is not an object is a permanent error", () => {
  const run = new FakeHost().reconcile(plugin({ reconcile: () => Outcome.done().status([] as never) }), primary);
  assert.deepEqual([run.error.kind, run.error.message], ["permanent", "the status must be a JSON object, got []"]);
});

test("desired objects cross as JSON, external ones with their key", () => {
  const desired = new FakeHost().desired(
    plugin({
      desired: () => [
        Desired.of("maps", { metadata: { name: "m" } }),
        Desired.external("records", "www", { value: 1 }),
        Desired.unchanged("maps", "old", "ns"),
      ],
    }),
    primary,
  );
  assert.deepEqual(desired, [
    { dependent: "maps", object: { metadata: { name: "m" } }, keep: false, key: undefined },
    { dependent: "records", object: { value: 1 }, keep: false, key: "www" },
    { dependent: "maps", object: { metadata: { name: "old", namespace: "ns" } }, keep: true, key: undefined },
  ]);
});

test("without cleanup, cleanup releases the finalizer; with it, its decision crosses", () => {
  assert.deepEqual(new FakeHost().cleanup(plugin({}), primary), { keepFinalizer: false, rescheduleAfterMs: undefined, events: [] });
  const keeping = plugin({ cleanup: () => Cleanup.done().keepFinalizer().rescheduleAfter(10_000) });
  assert.deepEqual(new FakeHost().cleanup(keeping, primary), { keepFinalizer: true, rescheduleAfterMs: 10_000, events: [] });
});

test("the context gives attempts, dependents, external objects and logs", () => {
  const host = new FakeHost()
    .withAttempt(3, true)
    .withDependentState("maps", "NotReady", [{ metadata: { name: "m" } }])
    .withExternal(new External("records", "www", { value: 1 }).withId("r1"));
  const run = host.reconcile(
    plugin({
      reconcile: (_, ctx) => {
        ctx.log("warn", "looked", { kind: "ConfigMap" });
        return Outcome.done().status({
          attempt: ctx.attempt,
          last: ctx.isLastAttempt(),
          phase: ctx.dependent("maps")?.phase,
          ready: ctx.dependent("maps")?.isReady(),
          objects: ctx.dependentObjects("maps"),
          external: ctx.external("records").map((e) => [e.key, e.id, e.object]),
        });
      },
    }),
    primary,
  );
  assert.deepEqual(run.status, {
    attempt: 3,
    last: true,
    phase: "NotReady",
    ready: false,
    objects: [{ metadata: { name: "m" } }],
    external: [["www", "r1", { value: 1 }]],
  });
  assert.deepEqual(run.logs, [{ level: "warn", message: "looked", fields: { kind: "ConfigMap" } }]);
});

test("the context reads the host's caches, and a failing read is transient", () => {
  const maps = Kind.namespaced("", "v1", "ConfigMap");
  const host = new FakeHost()
    .withObject(maps, { metadata: { name: "a", namespace: "ns", labels: { app: "web" } } })
    .withObject(maps, { metadata: { name: "b", namespace: "ns" } })
    .withObject(maps, { metadata: { name: "c", namespace: "other", labels: { app: "web" } } })
    .withSecondary(maps, { metadata: { name: "owned" } });
  const names = (objects: { metadata: { name: string } }[]) => objects.map((o) => o.metadata.name);
  const run = host.reconcile(
    plugin({
      reconcile: (_, ctx) =>
        Outcome.done().status({
          got: ctx.get<{ metadata: { name: string } }>(maps, "ns", "b")?.metadata.name,
          missing: ctx.get(maps, "ns", "zzz") === undefined,
          inNs: names(ctx.list(maps, "ns")),
          web: names(ctx.list(maps, undefined, "app=web")),
          notWeb: names(ctx.list(maps, "ns", "app!=web")),
          secondaries: names(ctx.secondaries(maps)),
        }),
    }),
    primary,
  );
  assert.deepEqual(run.status, { got: "b", missing: true, inNs: ["a", "b"], web: ["a", "c"], notWeb: ["b"], secondaries: ["owned"] });

  const refusing: Host = {
    log: () => undefined,
    get: () => {
      throw { payload: "the kind is not watched" };
    },
    list: () => ["not json"],
    secondaries: () => [],
  };
  const ctx = new Context(refusing);
  assert.throws(() => ctx.get(maps, "ns", "a"), {
    name: "ReconcileError",
    kind: "transient",
    message: "cannot read v1/ConfigMap ns/a: the kind is not watched",
  });
  assert.throws(() => ctx.list(maps), (e: unknown) => e instanceof ReconcileError && e.kind === "permanent");
});

test("the mapper, reference, filter and check exports", () => {
  const exported = new FakeHost().component(
    plugin({
      mapSecondary: (secondary) => [PrimaryRef.namespaced("ns", String((secondary["metadata"] as { name: string }).name))],
      secondariesOf: () => [new SecondaryRef(Kind.namespaced("", "v1", "Secret"), "ns", "db")],
      filter: (name, event, object, old) => name === "changed" && event === "update" && object["v"] !== old?.["v"],
      check: (name, p, dependent) => name === "big" && p.spec["size"] === 2 && dependent === undefined,
      crd: () => ({ kind: "CustomResourceDefinition" }),
    }),
  );
  assert.deepEqual(exported.mapSecondary('{"metadata":{"name":"x"}}', undefined), [{ namespace: "ns", name: "x" }]);
  assert.deepEqual(exported.secondariesOf(JSON.stringify(primary)), [
    { kind: { group: "", version: "v1", kind: "Secret", plural: undefined, namespaced: true }, namespace: "ns", name: "db" },
  ]);
  assert.equal(exported.filter("changed", "update", '{"v":2}', '{"v":1}'), true);
  assert.equal(exported.filter("changed", "update", '{"v":1}', '{"v":1}'), false);
  assert.equal(exported.filter("changed", "update", "not json", undefined), false);
  assert.equal(exported.check("big", JSON.stringify(primary), undefined), true);
  assert.equal(exported.crd(), '{"kind":"CustomResourceDefinition"}');
});

test("unimplemented exports say what is missing; defaults answer like the Rust SDK's", () => {
  const exported = new FakeHost().component(plugin({}));
  assert.throws(() => exported.mapSecondary("{}", undefined), (e) => e === "plugin thing declares a watch with the plugin mapper but does not implement mapSecondary");
  assert.throws(() => exported.fetch("{}", []), (e) => e === "plugin thing polls per resource but does not implement fetch");
  assert.throws(() => exported.applyExternal("{}", { dependent: "r", key: "", id: undefined, object: "{}" }, undefined), (e: unknown) =>
    (e as { tag: string }).tag === "permanent",
  );
  assert.deepEqual(exported.secondariesOf("{}"), []);
  assert.equal(exported.filter("any", "create", "{}", undefined), true);
  assert.equal(exported.check("any", "{}", undefined), false);
  assert.equal(exported.crd(), undefined);
  assert.equal(exported.updateErrorStatus(request(), { tag: "transient", val: "x" }), undefined);
});

test("the error status gets the error and must be an object", () => {
  const exported = new FakeHost().component(
    plugin({ errorStatus: (p, error) => ({ failed: `${error.kind}: ${error.message}`, name: p.metadata.name }) }),
  );
  assert.equal(exported.updateErrorStatus(request(), { tag: "permanent", val: "boom" }), '{"failed":"permanent: boom","name":"a"}');
});

test("fetch and applyExternal see the tracked IDs and external objects", () => {
  const exported = new FakeHost().component(
    plugin({
      fetch: (_, tracked) => tracked.of("records").map(([key, id]) => new External("records", key, { key }).withId(id)),
      applyExternal: (_, desired, actual) => new External(desired.dependent, desired.key, desired.object).withId(actual?.id ?? "new"),
    }),
  );
  assert.deepEqual(exported.fetch(JSON.stringify(primary), [{ dependent: "records", key: "www", id: "r1" }]), [
    { dependent: "records", key: "www", id: "r1", object: '{"key":"www"}' },
  ]);
  assert.deepEqual(exported.applyExternal(JSON.stringify(primary), { dependent: "records", key: "www", id: undefined, object: '{"v":1}' }, undefined), {
    dependent: "records",
    key: "www",
    id: "new",
    object: '{"v":1}',
  });
});

test("reads see objects cut to the projections, as the host's caches keep them", () => {
  const maps = Kind.namespaced("", "v1", "ConfigMap");
  const secrets = Kind.namespaced("", "v1", "Secret");
  type Obj = { metadata: { labels?: Record<string, string> }; data?: unknown; spec?: unknown; status?: unknown };
  const projected: Reconciler<Obj> = {
    config: () =>
      new Config("projected", thing)
        .project(["spec.wanted"])
        .watch(new Watch(maps).project(["data.kept"]))
        .watch(new Watch(secrets).metadataOnly()),
    reconcile: (primary, ctx) =>
      Outcome.done().status({
        spec: primary.spec,
        status: primary.status ?? null,
        configMap: ctx.get<Obj>(maps, "ns", "cm")?.data,
        listed: ctx.list<Obj>(maps, "ns").map((m) => m.data),
        owned: ctx.secondaries<Obj>(maps).map((m) => m.data),
        secret: ctx.get<Obj>(secrets, "ns", "s")?.data ?? null,
        secretLabels: ctx.get<Obj>(secrets, "ns", "s")?.metadata.labels,
      }),
  };
  const host = new FakeHost()
    .withObject(maps, { metadata: { name: "cm", namespace: "ns" }, data: { kept: "1", dropped: "2" } })
    .withSecondary(maps, { metadata: { name: "own", namespace: "ns" }, data: { kept: "3", x: "4" } })
    .withObject(secrets, { metadata: { name: "s", namespace: "ns", labels: { a: "b" } }, data: { password: "c2VjcmV0" } });
  const run = host.reconcile(projected, {
    apiVersion: "example.com/v1",
    kind: "Thing",
    metadata: { name: "t", namespace: "ns" },
    spec: { wanted: 1, other: 2 },
    status: { phase: "Up" },
  });
  assert.deepEqual(run.status, {
    spec: { wanted: 1 },
    // The host keeps the primary's status for its own writes; the plugin does not read it.
    status: null,
    configMap: { kept: "1" },
    listed: [{ kept: "1" }],
    owned: [{ kept: "3" }],
    secret: null,
    secretLabels: { a: "b" },
  });
});

test("a projection keeps the type, the metadata and the named paths, as the host's", () => {
  const deployment = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "web" },
    spec: { replicas: 3, template: { spec: { containers: [{ name: "nginx" }] } } },
    status: { readyReplicas: 2, conditions: [{ type: "Available" }] },
  };
  const head = { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "web" } };
  assert.deepEqual(project(deployment, ["spec.replicas", "status.readyReplicas"]), {
    ...head,
    spec: { replicas: 3 },
    status: { readyReplicas: 2 },
  });
  // A wider path after a narrower one keeps the rest too; a path into a missing field keeps its
  // parent's object, empty; one that runs into a non-object keeps nothing of it.
  assert.deepEqual(project(deployment, ["spec.replicas", "spec", "spec.replicas.deeper"]).spec, deployment.spec);
  assert.deepEqual(project(deployment, ["status.missing"]).status, {});
  assert.deepEqual(project(deployment, ["status.readyReplicas.deeper"]).status, {});
  assert.deepEqual(project(deployment, []), head);
  assert.deepEqual(deployment.spec.template.spec.containers, [{ name: "nginx" }], "the object given is not changed");
});
