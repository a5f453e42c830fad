// The JOSDK WebPage sample as a wasmop plugin: each WebPage (`sample.wasmop.dev/v1`) gets a
// ConfigMap holding its HTML, an nginx Deployment serving it, a Service, and an Ingress while
// `spec.exposed` is true. The host applies them, owned by the page, and tells the plugin where
// they stand; the status names the ConfigMap and says whether the page is Ready (its dependents
// are applied) and Available (nginx runs). Its validating webhook refuses an empty `spec.html`,
// and its mutating one sets `spec.exposed` to `false` when it is absent. Its CRD is generated from
// the schemas below (`crd`): `wasmop crd --plugin webpage-ts.wasm` prints the v1 of
// plugins/webpage/crd.yaml.
import {
  Check,
  Cleanup,
  Config,
  Crd,
  Dependent,
  Desired,
  Event,
  Kind,
  Outcome,
  ReconcileError,
  Verdict,
  Webhook,
  conditions,
  requireFields,
  schema,
  type Reconciler,
  type Resource,
} from "@wasmop/guest";

/** What a WebPage serves. */
export interface WebPageSpec {
  html: string;
  exposed?: boolean;
}

// ANCHOR: spec
/** The schema of {@link WebPageSpec}, with the rule the API server checks itself. */
export const webPageSpec = schema.object(
  {
    html: schema.string({
      description: "The HTML the page serves.",
      rules: [{ rule: "size(self) <= 1048576", message: "the HTML must fit in a ConfigMap (1 MiB)" }],
    }),
    exposed: schema.optional(
      schema.boolean({
        description: "Whether an Ingress routes to the page; the mutating webhook makes it `false` when absent.",
      }),
    ),
  },
  { description: "A web page served by nginx (`v1`)." },
);
// ANCHOR_END: spec

/** The schema of what the plugin reports in a WebPage's status. */
export const pageStatus = schema.object(
  {
    htmlConfigMap: schema.string({ description: "The ConfigMap holding the page's HTML." }),
    available: schema.boolean({ description: "Whether nginx serves the page (its Deployment is ready)." }),
  },
  { description: "What the plugin reports in a WebPage's status (every version's)." },
);

/** What the plugin reads of its own status. */
export interface WebPageStatus {
  conditions?: conditions.Condition[];
}

/** A WebPage. */
export type WebPage = Resource<WebPageSpec, WebPageStatus>;

export const webPage = Kind.namespaced("sample.wasmop.dev", "v1", "WebPage");
export const configMap = Kind.namespaced("", "v1", "ConfigMap").plural("configmaps");
export const deployment = Kind.namespaced("apps", "v1", "Deployment").plural("deployments");
export const service = Kind.namespaced("", "v1", "Service").plural("services");
export const ingress = Kind.namespaced("networking.k8s.io", "v1", "Ingress").plural("ingresses");

// ANCHOR: validate
function nameOf(page: WebPage): string {
  const name = page.metadata.name;
  if (name === undefined) throw ReconcileError.invalid("the WebPage has no name");
  return name;
}
// ANCHOR_END: validate

export default {
  config: () =>
    new Config("webpage", webPage)
      .dependent(new Dependent("configmap", configMap))
      .dependent(
        new Dependent("deployment", deployment)
          .dependsOn("configmap")
          .readyWhen(Check.fieldsEqual("status.readyReplicas", "spec.replicas")),
      )
      .dependent(new Dependent("service", service).dependsOn("configmap"))
      .dependent(
        new Dependent("ingress", ingress).dependsOn("service").reconcileWhen(Check.fieldEquals("spec.exposed", true)),
      )
      .webhook(Webhook.validating())
      .webhook(Webhook.mutating()),

  decode: requireFields({ "spec.html": "string" }),

  // ANCHOR: crd
  // The CRD `wasmop crd --plugin` prints: from the schemas, with the status subresource, the
  // host's status fields and its Ready column.
  crd: () =>
    new Crd(webPage, webPageSpec, pageStatus)
      .shortName("wp")
      .printerColumn("Age", "date", ".metadata.creationTimestamp")
      .toJSON(),
  // ANCHOR_END: crd

  // ANCHOR: desired
  desired(page) {
    const name = nameOf(page);
    // ANCHOR_END: desired
    const labels = { "app.kubernetes.io/name": "webpage", "app.kubernetes.io/instance": name };
    const html = `${name}-html`;
    return [
      Desired.of("configmap", {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: html },
        data: { "index.html": page.spec.html },
      }),
      Desired.of("deployment", {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name, labels },
        spec: {
          replicas: 1,
          selector: { matchLabels: labels },
          template: {
            metadata: { labels },
            spec: {
              containers: [
                {
                  name: "nginx",
                  image: "nginx:1.27-alpine",
                  ports: [{ name: "http", containerPort: 80 }],
                  volumeMounts: [{ name: "html", mountPath: "/usr/share/nginx/html" }],
                },
              ],
              volumes: [{ name: "html", configMap: { name: html } }],
            },
          },
        },
      }),
      Desired.of("service", {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name, labels },
        spec: { selector: labels, ports: [{ name: "http", port: 80, targetPort: "http" }] },
      }),
      Desired.of("ingress", {
        apiVersion: "networking.k8s.io/v1",
        kind: "Ingress",
        metadata: { name, labels },
        spec: {
          rules: [
            {
              http: {
                paths: [
                  { path: "/", pathType: "Prefix", backend: { service: { name, port: { number: 80 } } } },
                ],
              },
            },
          ],
        },
      }),
    ];
  },

  // ANCHOR: webhook
  validate(request) {
    if (request.object !== undefined && request.object.spec.html === "") {
      return Verdict.deny("html must not be empty").at("spec.html");
    }
    return Verdict.allow();
  },

  default(page) {
    page.spec.exposed ??= false;
  },
  // ANCHOR_END: webhook

  reconcile(page, ctx) {
    const name = page.metadata.name ?? "";
    ctx.info(`reconciling a WebPage of ${page.spec.html.length} bytes of html`);
    const available = ctx.dependent("deployment")?.isReady() ?? false;
    const status = { htmlConfigMap: `${name}-html`, available };
    // The host keeps Ready, Reconciling and Degraded (with observedGeneration) from this.
    if (ctx.dependents().some((d) => d.phase === "Skipped")) {
      return Outcome.notReady("some dependents wait for others").status(status);
    }
    const outcome = Outcome.ready("the WebPage's dependents are applied").status(status);
    const wasReady = conditions.isTrue(page.status?.conditions, "Ready");
    return wasReady ? outcome : outcome.event(Event.normal("Ready", "Reconcile").note("the WebPage is ready"));
  },

  cleanup(page) {
    const note = `WebPage ${page.metadata.name ?? ""} deleted; the garbage collector removes its dependents`;
    return Cleanup.done().event(Event.normal("CleanedUp", "Cleanup").note(note));
  },
} satisfies Reconciler<WebPage>;
