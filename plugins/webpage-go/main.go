// The JOSDK WebPage sample as a wasmop plugin: each WebPage (sample.wasmop.dev/v1) gets a
// ConfigMap holding its HTML, an nginx Deployment serving it, a Service, and an Ingress while
// spec.exposed is true. The host applies them, owned by the page, and tells the plugin where they
// stand; the status names the ConfigMap and says whether the page is Ready (its dependents are
// applied) and Available (nginx runs). Its validating webhook refuses an empty spec.html, and its
// mutating one sets spec.exposed to false when it is absent.
package main

import (
	"encoding/json"

	"wasmop.dev/guest"
)

var (
	configMap  = wasmop.Namespaced("", "v1", "ConfigMap").WithPlural("configmaps")
	deployment = wasmop.Namespaced("apps", "v1", "Deployment").WithPlural("deployments")
	service    = wasmop.Namespaced("", "v1", "Service").WithPlural("services")
	ingress    = wasmop.Namespaced("networking.k8s.io", "v1", "Ingress").WithPlural("ingresses")
)

// Spec is a WebPage's spec.
type Spec struct {
	HTML    string `json:"html"`
	Exposed *bool  `json:"exposed,omitempty"`
}

// Status is what the plugin reports in a WebPage's status.
type Status struct {
	HTMLConfigMap string `json:"htmlConfigMap"`
	Available     bool   `json:"available"`
}

// WebPage is the plugin.
type WebPage struct{}

// M is a JSON object.
type M = map[string]any

// Config declares the dependents and their workflow.
func (WebPage) Config() wasmop.Config {
	return wasmop.NewConfig("webpage", wasmop.Namespaced("sample.wasmop.dev", "v1", "WebPage")).
		Dependent(wasmop.NewDependent("configmap", configMap)).
		Dependent(wasmop.NewDependent("deployment", deployment).DependsOn("configmap").
			ReadyWhen(wasmop.FieldsEqual("status.readyReplicas", "spec.replicas"))).
		Dependent(wasmop.NewDependent("service", service).DependsOn("configmap")).
		Dependent(wasmop.NewDependent("ingress", ingress).DependsOn("service").
			ReconcileWhen(wasmop.FieldEquals("spec.exposed", true))).
		Webhook(wasmop.ValidatingWebhook()).
		Webhook(wasmop.MutatingWebhook())
}

// Desired is the page's ConfigMap, Deployment, Service and Ingress.
func (WebPage) Desired(page wasmop.Resource[Spec], _ *wasmop.Context) ([]wasmop.Desired, error) {
	name := page.Metadata.Name
	if name == "" {
		return nil, wasmop.InvalidError("the WebPage has no name")
	}
	labels := M{"app.kubernetes.io/name": "webpage", "app.kubernetes.io/instance": name}
	html := name + "-html"
	return []wasmop.Desired{
		{Dependent: "configmap", Object: M{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": M{"name": html},
			"data": M{"index.html": page.Spec.HTML},
		}},
		{Dependent: "deployment", Object: M{
			"apiVersion": "apps/v1", "kind": "Deployment", "metadata": M{"name": name, "labels": labels},
			"spec": M{
				"replicas": 1,
				"selector": M{"matchLabels": labels},
				"template": M{
					"metadata": M{"labels": labels},
					"spec": M{
						"containers": []M{{
							"name": "nginx", "image": "nginx:1.27-alpine",
							"ports":        []M{{"name": "http", "containerPort": 80}},
							"volumeMounts": []M{{"name": "html", "mountPath": "/usr/share/nginx/html"}},
						}},
						"volumes": []M{{"name": "html", "configMap": M{"name": html}}},
					},
				},
			},
		}},
		{Dependent: "service", Object: M{
			"apiVersion": "v1", "kind": "Service", "metadata": M{"name": name, "labels": labels},
			"spec": M{"selector": labels, "ports": []M{{"name": "http", "port": 80, "targetPort": "http"}}},
		}},
		{Dependent: "ingress", Object: M{
			"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": M{"name": name, "labels": labels},
			"spec": M{"rules": []M{{"http": M{"paths": []M{{
				"path": "/", "pathType": "Prefix",
				"backend": M{"service": M{"name": name, "port": M{"number": 80}}},
			}}}}}},
		}},
	}, nil
}

// Reconcile reports where the dependents stand; the host keeps Ready, Reconciling and Degraded.
func (WebPage) Reconcile(page wasmop.Resource[Spec], ctx *wasmop.Context) (wasmop.Outcome, error) {
	ctx.Info("reconciling a WebPage of %d bytes of html", len(page.Spec.HTML))
	nginx, ok := ctx.Dependent("deployment")
	status := Status{HTMLConfigMap: page.Metadata.Name + "-html", Available: ok && nginx.Phase == wasmop.PhaseReady}
	for _, d := range ctx.Dependents {
		if d.Phase == wasmop.PhaseSkipped {
			return wasmop.NotReady("some dependents wait for others").Status(status), nil
		}
	}
	outcome := wasmop.Ready("the WebPage's dependents are applied").Status(status)
	if wasReady(page.Status) {
		return outcome, nil
	}
	return outcome.Event(wasmop.NormalEvent("Ready", "Reconcile").WithNote("the WebPage is ready")), nil
}

// wasReady says whether the page's status already has Ready True.
func wasReady(status json.RawMessage) bool {
	var s struct {
		Conditions []wasmop.Condition `json:"conditions"`
	}
	return json.Unmarshal(status, &s) == nil && wasmop.IsTrue(s.Conditions, "Ready")
}

// Validate refuses a page without HTML.
func (WebPage) Validate(request wasmop.AdmissionRequest[Spec], _ *wasmop.Context) wasmop.Verdict {
	if request.Object != nil && request.Object.Spec.HTML == "" {
		return wasmop.Deny("html must not be empty").At("spec.html")
	}
	return wasmop.Allow()
}

// Default says a page is not exposed unless it says so.
func (WebPage) Default(page *wasmop.Resource[Spec], _ *wasmop.Context) error {
	if page.Spec.Exposed == nil {
		exposed := false
		page.Spec.Exposed = &exposed
	}
	return nil
}

// Cleanup records that the page is gone; the garbage collector removes its dependents.
func (WebPage) Cleanup(page wasmop.Resource[Spec], _ *wasmop.Context) (wasmop.Cleanup, error) {
	note := "WebPage " + page.Metadata.Name + " deleted; the garbage collector removes its dependents"
	return wasmop.CleanupDone().Event(wasmop.NormalEvent("CleanedUp", "Cleanup").WithNote(note)), nil
}

func init() { wasmop.Export[Spec](WebPage{}) }

func main() {}
