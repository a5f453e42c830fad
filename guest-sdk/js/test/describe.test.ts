// Every setting of the Config reaches describe(), in the WIT's shape.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  AdmissionRequest,
  Check,
  Config,
  Dependent,
  ExternalDependent,
  HttpGrant,
  Inbound,
  Kind,
  Origin,
  Outcome,
  Polling,
  Predicate,
  ReconcileError,
  SecretKey,
  Verdict,
  Watch,
  Webhook,
  type Reconciler,
} from "../src/index.js";
import { exportAdmission } from "../src/component.js";
import { FakeHost } from "../src/testing.js";

const thing = Kind.namespaced("example.com", "v1", "Thing");

function plugin(config: () => Config, extra: Partial<Reconciler> = {}): Reconciler {
  return { config, reconcile: () => Outcome.done(), ...extra };
}

test("describe with the defaults", () => {
  const config = new FakeHost().describe(plugin(() => new Config("defaults", thing)));
  assert.deepEqual(config, {
    name: "defaults",
    primary: { group: "example.com", version: "v1", kind: "Thing", plural: undefined, namespaced: true },
    labelSelector: undefined,
    fieldSelector: undefined,
    filters: { onCreate: true, onUpdate: true, onDelete: true, onAnnotationChange: false, onLabelChange: false },
    generationAware: true,
    retry: undefined,
    maxReconcileIntervalMs: undefined,
    rateLimit: undefined,
    maxConcurrentReconciles: undefined,
    watches: [],
    resyncPeriodMs: undefined,
    finalizer: { tag: "derived" },
    cleanup: false,
    dependents: [],
    conditions: true,
    projection: undefined,
    predicate: undefined,
    http: undefined,
    polling: undefined,
    inbound: undefined,
    externalDependents: [],
    sharding: undefined,
    webhooks: [],
  });
});

test("a core kind keeps its own conditions, and Config.new is new Config", () => {
  const config = new FakeHost().describe(plugin(() => Config.new("maps", Kind.namespaced("", "v1", "ConfigMap"))));
  assert.equal(config.conditions, false);
});

test("describe with every setting", () => {
  const everything = () =>
    new Config("everything", Kind.cluster("example.com", "v2", "Policy").plural("policies"))
      .labelSelector("app=web")
      .fieldSelector("metadata.name!=skip")
      .filters({ onCreate: false, onDelete: false, onAnnotationChange: true, onLabelChange: true })
      .generationAware(false)
      .retry({ maxAttempts: 3, initialIntervalMs: 250, multiplier: 2, maxIntervalMs: 10_000, jitter: 0.25 })
      .maxReconcileInterval(0)
      .rateLimit({ maxReconciles: 2, periodMs: 3_500 })
      .maxConcurrentReconciles(4)
      .watch(new Watch(Kind.namespaced("", "v1", "ConfigMap").plural("configmaps")))
      .watch(
        new Watch(Kind.cluster("", "v1", "Namespace"))
          .labelSelector("team=web")
          .fieldSelector("metadata.name!=kube-system")
          .mappedByPlugin()
          .metadataOnly(),
      )
      .watch(
        new Watch(Kind.namespaced("", "v1", "Secret"))
          .namespace("shared")
          .cluster("edge")
          .annotated()
          .project(["data"])
          .predicate(Predicate.plugin("data").not()),
      )
      .watch(new Watch(Kind.namespaced("", "v1", "Pod")).ownedByAny())
      .watch(new Watch(Kind.namespaced("", "v1", "Node")).referencedByPrimary())
      .resyncPeriod(90_000)
      .finalizer("example.com/cleanup")
      .dependent(
        new Dependent("copies", Kind.namespaced("", "v1", "ConfigMap"))
          .ownedByAnnotations()
          .inNamespace("elsewhere")
          .notReadyWhenEmpty()
          .adopt()
          .dependsOn("first")
          .readyWhen(Check.conditionTrue("Available"))
          .reconcileWhen(Check.plugin("wanted")),
      )
      .dependent(new Dependent("observed", Kind.namespaced("", "v1", "Secret")).readOnly())
      .ownConditions()
      .project(["spec", "metadata.labels"])
      .predicate(Predicate.generationChanged().or(Predicate.labelsChanged().and(Predicate.annotationsChanged())))
      .http(
        new HttpGrant()
          .origin(Origin.parse("https://api.example.com:8443/v1").secretHeader("authorization", new SecretKey("api", "token"), "Bearer "))
          .connectTimeout(1_000)
          .timeout(2_000)
          .maxResponseBytes(1024)
          .maxConcurrent(2),
      )
      .polling(Polling.global(60_000))
      .inbound(new Inbound(new SecretKey("hook", "token").inNamespace("ops")).caching())
      .externalDependent(
        new ExternalDependent("records")
          .dependsOn("copies")
          .readyWhen(Check.fieldEquals("status", "ok"))
          .reconcileWhen(Check.fieldEquals("spec.dns", true))
          .notReadyWhenEmpty()
          .trackedIn("Secret"),
      )
      .sharding("None");
  const config = new FakeHost().describe(plugin(everything, { cleanup: () => { throw new Error("unused"); } }));
  assert.deepEqual(config.primary, { group: "example.com", version: "v2", kind: "Policy", plural: "policies", namespaced: false });
  assert.equal(config.labelSelector, "app=web");
  assert.equal(config.fieldSelector, "metadata.name!=skip");
  assert.deepEqual(config.filters, { onCreate: false, onUpdate: true, onDelete: false, onAnnotationChange: true, onLabelChange: true });
  assert.equal(config.generationAware, false);
  assert.deepEqual(config.retry, { maxAttempts: 3, initialIntervalMs: 250n, multiplier: 2, maxIntervalMs: 10_000n, jitter: 0.25 });
  assert.equal(config.maxReconcileIntervalMs, 0n);
  assert.deepEqual(config.rateLimit, { maxReconciles: 2, periodMs: 3_500n });
  assert.equal(config.maxConcurrentReconciles, 4);
  assert.equal(config.sharding, "none");
  assert.deepEqual(
    config.watches.map((w) => w.mapper),
    [
      { tag: "owner-references", val: "controller" },
      { tag: "plugin" },
      { tag: "annotations" },
      { tag: "owner-references", val: "any" },
      { tag: "primary-references" },
    ],
  );
  assert.deepEqual(config.watches[1], {
    kind: { group: "", version: "v1", kind: "Namespace", plural: undefined, namespaced: false },
    namespace: undefined,
    labelSelector: "team=web",
    fieldSelector: "metadata.name!=kube-system",
    cluster: undefined,
    mapper: { tag: "plugin" },
    projection: [],
    predicate: undefined,
  });
  assert.equal(config.watches[2]?.namespace, "shared");
  assert.equal(config.watches[2]?.cluster, "edge");
  assert.deepEqual(config.watches[2]?.projection, ["data"]);
  assert.deepEqual(config.watches[2]?.predicate, [{ tag: "plugin", val: "data" }, { tag: "not" }]);
  assert.equal(config.resyncPeriodMs, 90_000n);
  assert.deepEqual(config.finalizer, { tag: "named", val: "example.com/cleanup" });
  assert.equal(config.cleanup, true);
  assert.deepEqual(config.dependents, [
    {
      name: "copies",
      kind: { group: "", version: "v1", kind: "ConfigMap", plural: undefined, namespaced: true },
      readOnly: false,
      dependsOn: ["first"],
      readyWhen: { tag: "condition-true", val: "Available" },
      reconcileWhen: { tag: "plugin", val: "wanted" },
      ownership: "annotations",
      readyWhenEmpty: false,
      namespace: "elsewhere",
      adopt: true,
    },
    {
      name: "observed",
      kind: { group: "", version: "v1", kind: "Secret", plural: undefined, namespaced: true },
      readOnly: true,
      dependsOn: [],
      readyWhen: undefined,
      reconcileWhen: undefined,
      ownership: "owner-reference",
      readyWhenEmpty: true,
      namespace: undefined,
      adopt: false,
    },
  ]);
  assert.equal(config.conditions, false);
  assert.deepEqual(config.projection, ["spec", "metadata.labels"]);
  assert.deepEqual(config.predicate, [
    { tag: "generation-changed" },
    { tag: "labels-changed" },
    { tag: "annotations-changed" },
    { tag: "and" },
    { tag: "or" },
  ]);
  assert.deepEqual(config.http, {
    origins: [
      {
        scheme: "https",
        host: "api.example.com",
        port: 8443,
        secretHeaders: [
          { header: "authorization", secret: { name: "api", namespace: undefined, key: "token" }, prefix: "Bearer " },
        ],
      },
    ],
    connectTimeoutMs: 1_000n,
    timeoutMs: 2_000n,
    maxResponseBytes: 1024n,
    maxConcurrent: 2,
  });
  assert.deepEqual(config.polling, { mode: "global", periodMs: 60_000n });
  assert.deepEqual(config.inbound, { token: { name: "hook", namespace: "ops", key: "token" }, caching: true });
  assert.deepEqual(config.externalDependents, [
    {
      name: "records",
      dependsOn: ["copies"],
      readyWhen: { tag: "field-equals", val: { path: "status", value: '"ok"' } },
      reconcileWhen: { tag: "field-equals", val: { path: "spec.dns", value: "true" } },
      readyWhenEmpty: false,
      tracking: "secret",
    },
  ]);
});

test("retry and filters fill in their defaults, and durations saturate", () => {
  const config = new FakeHost().describe(
    plugin(() => new Config("d", thing).retry({}).filters({ onUpdate: false }).resyncPeriod(Infinity).maxReconcileInterval(0)),
  );
  assert.deepEqual(config.retry, { maxAttempts: 5, initialIntervalMs: 2_000n, multiplier: 1.5, maxIntervalMs: 300_000n, jitter: 0 });
  assert.deepEqual(config.filters, { onCreate: true, onUpdate: false, onDelete: true, onAnnotationChange: false, onLabelChange: false });
  assert.equal(config.resyncPeriodMs, 2n ** 64n - 1n);
  assert.equal(config.maxReconcileIntervalMs, 0n);
});

test("negative durations are refused, as the Python SDK refuses them", () => {
  const refused = (config: () => Config, got: string) =>
    assert.throws(() => new FakeHost().describe(plugin(config)), {
      name: "RangeError",
      message: `a duration cannot be negative, got ${got}`,
    });
  refused(() => new Config("d", thing).maxReconcileInterval(-5), "-5");
  refused(() => new Config("d", thing).resyncPeriod(-1), "-1");
  refused(() => new Config("d", thing).retry({ initialIntervalMs: -0.5 }), "-0.5");
  refused(() => new Config("d", thing).rateLimit({ maxReconciles: 1, periodMs: -1_000 }), "-1000");
  refused(() => new Config("d", thing).polling(Polling.perResource(-Infinity)), "-Infinity");
  refused(() => new Config("d", thing).http(new HttpGrant().origin(Origin.parse("https://a.example")).timeout(-1)), "-1");
  assert.throws(() => new FakeHost().describe(plugin(() => new Config("d", thing).maxReconcileInterval(Number.NaN))), {
    name: "RangeError",
    message: "a duration must be a number of milliseconds, got NaN",
  });
  const zero = new FakeHost().describe(plugin(() => new Config("d", thing).maxReconcileInterval(-0)));
  assert.equal(zero.maxReconcileIntervalMs, 0n, "-0 is zero");
});

test("a disabled finalizer and per-resource polling", () => {
  const config = new FakeHost().describe(plugin(() => new Config("f", thing).noFinalizer().polling(Polling.perResource(1_000))));
  assert.deepEqual(config.finalizer, { tag: "disabled" });
  assert.deepEqual(config.polling, { mode: "per-resource", periodMs: 1_000n });
});

test("origins parse like the Rust SDK's", () => {
  const parts = (url: string) => {
    const o = Origin.parse(url);
    return [o.scheme, o.host, o.port];
  };
  assert.deepEqual(parts("http://127.0.0.1:18053"), ["http", "127.0.0.1", 18053]);
  assert.deepEqual(parts("https://example.com/path?q#f"), ["https", "example.com", undefined]);
  assert.deepEqual(parts("http://[::1]:8080/x"), ["http", "::1", 8080]);
  assert.deepEqual(parts("http://[::1]"), ["http", "::1", undefined]);
});

test("predicates list their plugin names", () => {
  const predicate = Predicate.plugin("a").and(Predicate.generationChanged().or(Predicate.plugin("b")));
  assert.deepEqual(predicate.pluginNames(), ["a", "b"]);
});

test("every sharding reaches describe in the WIT's spelling", () => {
  const described = (["Uid", "Namespace", "None"] as const).map(
    (sharding) => new FakeHost().describe(plugin(() => new Config("s", thing).sharding(sharding))).sharding,
  );
  assert.deepEqual(described, ["uid", "namespace", "none"]);
});

test("a validating webhook reaches describe, and the admission export calls validate", () => {
  const configMap = Kind.namespaced("", "v1", "ConfigMap");
  const gatekeeper = plugin(
    () =>
      new Config("gatekeeper", thing).webhook(
        Webhook.validating().kinds(configMap).operations("Delete").failurePolicy("Ignore").timeout(3000),
      ),
    { validate: (request) => Verdict.deny(`no ${request.operation}`).at("metadata.name") },
  );
  assert.deepEqual(new FakeHost().describe(gatekeeper).webhooks, [
    {
      webhookType: "validating",
      kinds: [{ group: "", version: "v1", kind: "ConfigMap", plural: undefined, namespaced: true }],
      operations: ["delete"],
      failurePolicy: "ignore",
      timeoutMs: 3000,
    },
  ]);
  const host = { log: () => {}, get: () => undefined, list: () => [], secondaries: () => [], retryAfter: () => {} };
  const cm = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c", namespace: "ns" } };
  const verdict = exportAdmission(gatekeeper, host).validate({
    uid: "u",
    kind: { group: "", version: "v1", kind: "ConfigMap", plural: undefined, namespaced: true },
    operation: "delete",
    namespace: "ns",
    name: "c",
    object: undefined,
    oldObject: JSON.stringify(cm),
    username: "alice",
    groups: [],
    dryRun: false,
  });
  assert.deepEqual(verdict, { allowed: false, message: "no Delete", field: "metadata.name", warnings: [] });
});

test("a webhook without its handler is refused at describe", () => {
  const hookless = plugin(() => new Config("hookless", thing).webhook(Webhook.validating()));
  assert.throws(() => new FakeHost().describe(hookless), /declares a validating webhook but does not implement validate/);
});

/** A Page in `version`: v1 has `spec.content`, v2 calls it `spec.html`. */
function pageOf(version: string, spec: Record<string, unknown>) {
  return { apiVersion: `example.com/${version}`, kind: "Page", metadata: { name: "a", namespace: "ns" }, spec };
}

const pageKind = Kind.namespaced("example.com", "v2", "Page");

/** Defaults and converts Pages; a `broken` page throws in `convert`, an empty html is refused. */
const pages = plugin(
  () => new Config("pages", pageKind).webhook(Webhook.mutating().failurePolicy("Ignore")).webhook(Webhook.conversion()),
  {
    default(page) {
      const spec = (page as { spec: Record<string, unknown> }).spec;
      if (spec["html"] === "") throw ReconcileError.invalid("html must not be empty");
      spec["exposed"] ??= false;
    },
    convert(page, to) {
      const spec = page["spec"] as Record<string, unknown>;
      if (spec["broken"] === true) throw new TypeError("broken");
      const [from, into] = to === "example.com/v2" ? ["content", "html"] : ["html", "content"];
      spec[into] = spec[from];
      delete spec[from];
      return page;
    },
  },
);

test("mutating and conversion webhooks reach describe, and the admission export defaults and converts", () => {
  const webhooks = new FakeHost().describe(pages).webhooks.map((w) => [w.webhookType, w.failurePolicy]);
  assert.deepEqual(webhooks, [["mutating", "ignore"], ["conversion", "fail"]]);
  const host = { log: () => {}, get: () => undefined, list: () => [], secondaries: () => [], retryAfter: () => {} };
  const exported = exportAdmission(pages, host);
  const request = (spec: Record<string, unknown>) => ({
    uid: "u",
    kind: { group: "example.com", version: "v2", kind: "Page", plural: undefined, namespaced: true },
    operation: "create" as const,
    namespace: "ns",
    name: "a",
    object: JSON.stringify(pageOf("v2", spec)),
    oldObject: undefined,
    username: "alice",
    groups: [],
    dryRun: false,
  });
  assert.deepEqual(JSON.parse(exported.default(request({ html: "x" }))).spec, { html: "x", exposed: false });
  // A refusal is the `err` value, a string; anything else the handler throws would trap.
  assert.throws(() => exported.default(request({ html: "" })), (thrown) => thrown === "html must not be empty");
  const converted = exported.convert(
    [JSON.stringify(pageOf("v1", { content: "x" })), JSON.stringify(pageOf("v2", { html: "y" }))],
    "example.com/v2",
  );
  assert.deepEqual(converted.map((c) => JSON.parse(c)), [pageOf("v2", { html: "x" }), pageOf("v2", { html: "y" })]);
  assert.throws(
    () => exported.convert([JSON.stringify(pageOf("v1", { broken: true }))], "example.com/v2"),
    (thrown) => thrown === "TypeError: broken",
  );
});

test("the fake host defaults and converts as the component does", () => {
  const host = new FakeHost();
  const stored = host.defaultObject(pages, AdmissionRequest.create(pageOf("v2", { html: "x", exposed: true })));
  assert.deepEqual(stored["spec"], { html: "x", exposed: true });
  assert.throws(() => host.defaultObject(pages, AdmissionRequest.create(pageOf("v2", { html: "" }))), /html must not be empty/);
  assert.throws(() => host.defaultObject(pages, AdmissionRequest.delete(pageOf("v2", {}))), /no mutating webhook for Delete/);
  assert.deepEqual(host.convert(pages, [pageOf("v2", { html: "x" })], "example.com/v1"), [pageOf("v1", { content: "x" })]);
  const validating = plugin(() => new Config("v", thing).webhook(Webhook.validating()), { validate: () => Verdict.allow() });
  assert.throws(() => host.convert(validating, [], "example.com/v2"), /declares no conversion webhook/);
});

test("a typed default changes only what it changed, and keeps what decode drops", () => {
  interface Typed {
    spec: { html: string; replicas?: number };
  }
  const typed: Reconciler<Typed> = {
    config: () => new Config("typed", pageKind).webhook(Webhook.mutating()),
    reconcile: () => Outcome.done(),
    decode: (object) => ({ spec: { html: String((object as Typed).spec.html) } }),
    default(page) {
      page.spec.replicas ??= 1;
    },
  };
  const stored = new FakeHost().defaultObject(typed, AdmissionRequest.create(pageOf("v2", { html: "x", unknown: [1] })));
  assert.deepEqual(stored, pageOf("v2", { html: "x", unknown: [1], replicas: 1 }));
});

test("a mutating or conversion webhook without its function is refused at describe", () => {
  for (const [webhook, handler] of [[Webhook.mutating(), "default"], [Webhook.conversion(), "convert"]] as const) {
    const hookless = plugin(() => new Config("hookless", thing).webhook(webhook));
    const expected = new RegExp(`declares a ${webhook.webhookType.toLowerCase()} webhook but does not implement ${handler}`);
    assert.throws(() => new FakeHost().describe(hookless), expected);
  }
});
