"""The JOSDK WebPage sample as a wasmop plugin: each WebPage (sample.wasmop.dev/v1) gets a
ConfigMap holding its HTML, an nginx Deployment serving it, a Service, and an Ingress while
spec.exposed is true. The host applies them, owned by the page, and tells the plugin where they
stand; the status names the ConfigMap and says whether the page is Ready (its dependents are
applied) and Available (nginx runs). Its validating webhook refuses an empty spec.html, and its
mutating one sets spec.exposed to False when it is absent. Its CRD is generated from the types
(`crd`): `wasmop crd --plugin webpage-py.wasm` prints the v1 of plugins/webpage/crd.yaml."""

from dataclasses import dataclass, field
from typing import Annotated

from wasmop import (AdmissionRequest, Check, Cleanup, Config, Context, Dependent, Desired, Error, Event, Kind,
                    ObjectMeta, Outcome, Phase, Verdict, Webhook, conditions, export)
from wasmop.conditions import Condition
from wasmop.crd import Crd, Description, Rule

CONFIG_MAP = Kind.namespaced("", "v1", "ConfigMap").plural("configmaps")
DEPLOYMENT = Kind.namespaced("apps", "v1", "Deployment").plural("deployments")
SERVICE = Kind.namespaced("", "v1", "Service").plural("services")
INGRESS = Kind.namespaced("networking.k8s.io", "v1", "Ingress").plural("ingresses")


# ANCHOR: spec
@dataclass
class WebPageSpec:
    """A web page served by nginx (`v1`)."""

    html: Annotated[str, Description("The HTML the page serves."),
                    Rule("size(self) <= 1048576", "the HTML must fit in a ConfigMap (1 MiB)")]
    exposed: Annotated[bool | None, Description(
        "Whether an Ingress routes to the page; the mutating webhook makes it `false` when absent.")] = None
# ANCHOR_END: spec


@dataclass
class Status:
    """What the plugin reports in a WebPage's status (every version's)."""

    html_config_map: Annotated[str, Description("The ConfigMap holding the page's HTML.")]
    available: Annotated[bool, Description("Whether nginx serves the page (its Deployment is ready).")]


@dataclass
class WebPageStatus:
    """What the plugin reads of its own status."""

    conditions: list[Condition] = field(default_factory=list)


@dataclass
class WebPage:
    spec: WebPageSpec
    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    status: WebPageStatus | None = None


class WebPageReconciler:
    """Reconciles WebPages."""

    config = (
        Config("webpage", Kind.namespaced("sample.wasmop.dev", "v1", "WebPage"))
        .dependent(Dependent("configmap", CONFIG_MAP))
        .dependent(Dependent("deployment", DEPLOYMENT).depends_on("configmap")
                   .ready_when(Check.fields_equal("status.readyReplicas", "spec.replicas")))
        .dependent(Dependent("service", SERVICE).depends_on("configmap"))
        .dependent(Dependent("ingress", INGRESS).depends_on("service")
                   .reconcile_when(Check.field_equals("spec.exposed", True)))
        .webhook(Webhook.validating())
        .webhook(Webhook.mutating())
    )

    # ANCHOR: crd
    def crd(self) -> dict:
        # The CRD `wasmop crd --plugin` prints: from the types, with the status subresource, the
        # host's status fields and its Ready column.
        crd = Crd(self.config.primary, WebPageSpec, Status).short_name("wp")
        return crd.printer_column("Age", "date", ".metadata.creationTimestamp").to_dict()
    # ANCHOR_END: crd

    # ANCHOR: validate
    def desired(self, page: WebPage, ctx: Context) -> list[Desired]:
        name = page.metadata.name
        if not name:
            raise Error.invalid("the WebPage has no name")
        # ANCHOR_END: validate
        labels = {"app.kubernetes.io/name": "webpage", "app.kubernetes.io/instance": name}
        html = f"{name}-html"
        return [
            Desired("configmap", {
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": html},
                "data": {"index.html": page.spec.html},
            }),
            Desired("deployment", {
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {
                            "containers": [{
                                "name": "nginx", "image": "nginx:1.27-alpine",
                                "ports": [{"name": "http", "containerPort": 80}],
                                "volumeMounts": [{"name": "html", "mountPath": "/usr/share/nginx/html"}],
                            }],
                            "volumes": [{"name": "html", "configMap": {"name": html}}],
                        },
                    },
                },
            }),
            Desired("service", {
                "apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": labels},
                "spec": {"selector": labels, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]},
            }),
            Desired("ingress", {
                "apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": name, "labels": labels},
                "spec": {"rules": [{"http": {"paths": [{
                    "path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": name, "port": {"number": 80}}},
                }]}}]},
            }),
        ]

    def reconcile(self, page: WebPage, ctx: Context) -> Outcome:
        name = page.metadata.name or ""
        ctx.info(f"reconciling a WebPage of {len(page.spec.html.encode())} bytes of html")
        deployment = ctx.dependent("deployment")
        status = Status(html_config_map=f"{name}-html", available=deployment is not None and deployment.is_ready())
        # The host keeps Ready, Reconciling and Degraded (with observedGeneration) from this.
        if any(d.phase is Phase.SKIPPED for d in ctx.dependents()):
            return Outcome.not_ready("some dependents wait for others").status(status)
        outcome = Outcome.ready("the WebPage's dependents are applied").status(status)
        if page.status is not None and conditions.is_true(page.status.conditions, "Ready"):
            return outcome
        return outcome.event(Event.normal("Ready", "Reconcile").note("the WebPage is ready"))

    # ANCHOR: webhook
    def validate(self, request: AdmissionRequest, ctx: Context) -> Verdict:
        page = request.object
        if page is not None and not page.spec.html:
            return Verdict.deny("html must not be empty").at("spec.html")
        return Verdict.allow()

    def default(self, page: WebPage, ctx: Context) -> None:
        if page.spec.exposed is None:
            page.spec.exposed = False
    # ANCHOR_END: webhook

    def cleanup(self, page: WebPage, ctx: Context) -> Cleanup:
        note = f"WebPage {page.metadata.name or ''} deleted; the garbage collector removes its dependents"
        return Cleanup.done().event(Event.normal("CleanedUp", "Cleanup").note(note))


Reconciler = export(WebPageReconciler)
