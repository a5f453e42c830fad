//! The Helm chart (`deploy/helm/wasmop`), with the pinned helm `tests/testbed/build-helm.sh`
//! builds: `helm lint --strict` is clean; with its defaults the chart renders the kustomize base
//! (`deploy/`), and with `ci/sharded-values.yaml` the `deploy/sharded/` overlay, object for object
//! (a change to one without the other fails here); its CRD is `wasmop crd`'s; values that cannot
//! run are refused with the reason; and every value set in `ci/` installs on the test bed: the
//! namespaced objects applied for real in a namespace of the test's own that enforces the
//! restricted Pod Security level (the ReplicaSet controller creating the pods shows that the pod
//! template passes it), the ClusterRole and its binding applied for real under the release's
//! names and checked with SubjectAccessReviews, the ReconcilerPlugins dry-run (they are
//! cluster-scoped and the hosts of other tests would run them).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::{Discovery, Scope, pinned_kind};
use kube::runtime::wait::await_condition;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use wasmop_tests::{apply, apply_file, client, helm, namespace, until, within, workspace_root};

const WAIT: Duration = Duration::from_secs(60);

/// The documents of a YAML file.
fn documents(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text = std::fs::read_to_string(path)?;
    Ok(serde_saphyr::from_multiple::<Value>(&text)?.into_iter().filter(|d| !d.is_null()).collect())
}

/// The documents of a kustomization (`deploy/` or an overlay of it), as `kubectl apply -k` would
/// apply them: the base's resources in order, with the overlay's patches laid over them.
fn kustomize(dir: &Path) -> anyhow::Result<Vec<Value>> {
    let kustomization = &documents(&dir.join("kustomization.yaml"))?[0];
    let mut all = Vec::new();
    for resource in kustomization["resources"].as_array().into_iter().flatten() {
        let path = dir.join(resource.as_str().expect("resource paths"));
        all.extend(if path.is_dir() { kustomize(&path)? } else { documents(&path)? });
    }
    for patch in kustomization["patches"].as_array().into_iter().flatten() {
        for patch in documents(&dir.join(patch["path"].as_str().expect("patch paths")))? {
            let target = all.iter_mut().find(|d| key(d) == key(&patch)).expect("a patch names an object of the base");
            strategic_merge(target, &patch);
        }
    }
    Ok(all)
}

/// Lays `patch` over `target` as a strategic merge patch lays the fields the overlays use: maps
/// merge, `null` removes a key, lists of maps with a `name` merge by name, other lists are
/// replaced.
fn strategic_merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (field, value) in patch {
                if value.is_null() {
                    target.remove(field);
                } else if let Some(existing) = target.get_mut(field) {
                    strategic_merge(existing, value);
                } else {
                    target.insert(field.clone(), value.clone());
                }
            }
        }
        (Value::Array(target), Value::Array(patch)) if patch.iter().all(|p| p["name"].is_string()) => {
            for item in patch {
                match target.iter_mut().find(|t| t["name"] == item["name"]) {
                    Some(existing) => strategic_merge(existing, item),
                    None => target.push(item.clone()),
                }
            }
        }
        (target, patch) => *target = patch.clone(),
    }
}

/// An object's kind and name.
fn key(document: &Value) -> (String, String) {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (text(&document["kind"]), text(&document["metadata"]["name"]))
}

/// The label maps of an object (its labels, its selector, its pod template's labels) and its
/// annotations, removed from it.
fn take_labels(document: &mut Value) -> BTreeMap<String, Value> {
    let selector = if document["kind"] == "Service" { "/spec/selector" } else { "/spec/selector/matchLabels" };
    let paths = [
        "/metadata/labels",
        "/metadata/annotations",
        selector,
        "/spec/template/metadata/labels",
        "/spec/template/metadata/annotations",
    ];
    let mut taken = BTreeMap::new();
    for path in paths {
        let (parent, field) = path.rsplit_once('/').expect("absolute paths");
        if let Some(value) = document.pointer_mut(parent).and_then(Value::as_object_mut).and_then(|p| p.remove(field)) {
            taken.insert(path.to_string(), value);
        }
    }
    taken
}

/// Asserts that the chart's documents are the kustomize documents, object for object: the same
/// kinds and names, and the same fields (RBAC rules, container args, security contexts, ports,
/// probes, resources, volumes, ...) except the labels, where the chart's hold every label of the
/// kustomize documents and more (its release's).
fn assert_same_objects(kustomize: Vec<Value>, chart: Vec<Value>) {
    let mut chart: BTreeMap<_, _> = chart.into_iter().map(|d| (key(&d), d)).collect();
    let mut expected = Vec::new();
    for mut document in kustomize {
        let key = key(&document);
        // Helm creates the release's namespace (`--create-namespace`) and installs the CRD from
        // the chart's crds/ directory (checked below): neither is a template.
        if key.0 == "Namespace" || key.0 == "CustomResourceDefinition" {
            continue;
        }
        let mut rendered = chart.remove(&key).unwrap_or_else(|| panic!("the chart renders no {key:?}"));
        let labels = take_labels(&mut document);
        let chart_labels = take_labels(&mut rendered);
        for (path, map) in &labels {
            for (label, value) in map.as_object().expect("label maps") {
                assert_eq!(chart_labels.get(path).map(|m| &m[label]), Some(value), "{key:?} {path} {label}");
            }
        }
        assert_eq!(
            serde_json::to_string_pretty(&rendered).unwrap(),
            serde_json::to_string_pretty(&document).unwrap(),
            "the chart's {key:?} (left) differs from the kustomize base's (right)"
        );
        expected.push(key);
    }
    assert!(chart.is_empty(), "the chart renders objects the kustomize base has not: {:?}", chart.keys());
    assert_eq!(expected.len(), 11, "{expected:?}");
}

#[test]
fn helm_lint_is_clean_for_every_value_set() -> anyhow::Result<()> {
    let chart = helm::chart();
    let mut sets = vec![None];
    for entry in std::fs::read_dir(chart.join("ci"))? {
        sets.push(Some(entry?.path()));
    }
    assert!(sets.len() >= 5, "the value sets in ci/: {sets:?}");
    for values in sets {
        let mut args = vec!["lint".into(), "--strict".into(), chart.clone().into_os_string()];
        if let Some(values) = &values {
            args.extend(["--values".into(), values.clone().into_os_string()]);
        }
        let out = helm::run(&args)?;
        assert!(out.success, "helm lint --strict {values:?}: {}{}", out.stdout, out.stderr);
        assert!(out.stdout.contains("1 chart(s) linted, 0 chart(s) failed"), "{}", out.stdout);
        assert!(!out.stdout.contains("[WARNING]") && !out.stdout.contains("[ERROR]"), "{}", out.stdout);
    }
    Ok(())
}

#[test]
fn the_chart_with_its_defaults_is_the_kustomize_base() -> anyhow::Result<()> {
    // The base names its image wasmop:dev, what `make image` builds; the chart's default tag is
    // its appVersion.
    let chart = helm::template("wasmop", "wasmop", &["--set", "image.tag=dev"])?;
    assert_same_objects(kustomize(&workspace_root().join("deploy"))?, chart);
    Ok(())
}

#[test]
fn the_chart_sharded_is_the_sharded_overlay() -> anyhow::Result<()> {
    let values = helm::chart().join("ci/sharded-values.yaml");
    let chart = helm::template("wasmop", "wasmop", &["--set", "image.tag=dev", "-f", values.to_str().unwrap()])?;
    let overlay = kustomize(&workspace_root().join("deploy/sharded"))?;
    let deployment = overlay.iter().find(|d| d["kind"] == "Deployment").expect("a Deployment");
    assert!(deployment["spec"]["template"]["spec"]["containers"][0]["args"].to_string().contains("--shards"));
    assert_same_objects(overlay, chart);
    Ok(())
}

#[test]
fn the_chart_crd_is_wasmop_crd() -> anyhow::Result<()> {
    let crd = std::fs::read_to_string(helm::chart().join("crds/reconcilerplugins.wasmop.dev.yaml"))?;
    assert_eq!(crd, wasmop::loader::resource::crd_yaml(), "the chart's CRD is `wasmop crd`'s output");
    assert_eq!(crd, std::fs::read_to_string(workspace_root().join("deploy/crd.yaml"))?);
    // `helm install` installs it as is; `helm template --include-crds` shows it.
    let rendered = helm::template("wasmop", "wasmop", &["--include-crds"])?;
    let crds: Vec<_> = rendered.iter().filter(|d| d["kind"] == "CustomResourceDefinition").collect();
    assert_eq!(crds, [&serde_saphyr::from_str::<Value>(&crd)?]);
    Ok(())
}

#[test]
fn the_chart_runs_this_wasmop_version() -> anyhow::Result<()> {
    let chart = &documents(&helm::chart().join("Chart.yaml"))?[0];
    assert_eq!(chart["appVersion"], env!("CARGO_PKG_VERSION"), "Chart.yaml's appVersion is the workspace's version");
    let rendered = helm::template("wasmop", "wasmop", &[])?;
    let deployment = rendered.iter().find(|d| d["kind"] == "Deployment").expect("a Deployment");
    let image = &deployment["spec"]["template"]["spec"]["containers"][0]["image"];
    assert_eq!(image, &json!(format!("wasmop:{}", env!("CARGO_PKG_VERSION"))));
    Ok(())
}

#[test]
fn values_that_cannot_run_are_refused_with_the_reason() -> anyhow::Result<()> {
    let chart = helm::chart();
    let chart = chart.to_str().unwrap();
    let refusals: [(&[&str], &str); 9] = [
        (&["--set", "webhook.certificates.mode=cert-manager"], "webhook.certificates.mode is managed or files"),
        (&["--set", "webhook.certificates.mode=files"], "give webhook.certificates.secretName"),
        (
            &["--set", "leaderElection.enabled=false"],
            "replicaCount > 1 needs leaderElection.enabled or sharding.enabled",
        ),
        (&["--set", "plugins[0].name=p"], "plugins: p has no module"),
        (&["--set", "sharding.filter=server"], "sharding.filter is auto or client"),
        (&["--set", "reconcilerPlugins.enabled=false"], "nothing to run"),
        (&["--set", "metrics.serviceMonitor.enabled=true"], "needs the monitoring.coreos.com/v1 API"),
        (
            &[
                "--set",
                "plugins[0].name=p",
                "--set",
                "plugins[0].module.oci=r/p@sha256:00",
                "--set",
                "plugins[0].module.file=/p.wasm",
            ],
            "plugins: p names 2 module sources (file, oci); exactly one of configMap, file, url and oci",
        ),
        (
            &["--set", "plugins[0].name=p", "--set", "plugins[0].module.url=https://example.com/p.wasm"],
            "without its sha256",
        ),
    ];
    for (args, reason) in refusals {
        let mut all = vec!["template", "refused", chart];
        all.extend_from_slice(args);
        let out = helm::run(&all)?;
        assert!(!out.success, "helm {all:?} renders");
        assert!(out.stderr.contains(reason), "helm {all:?}: {}", out.stderr);
    }
    // One replica needs no election.
    let single =
        helm::template("single", "default", &["--set", "leaderElection.enabled=false", "--set", "replicaCount=1"])?;
    let deployment = single.iter().find(|d| d["kind"] == "Deployment").expect("a Deployment");
    let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(!args.contains("--leader-elect") && !args.contains("--shards"), "{args}");
    assert!(!single.iter().any(|d| d["kind"] == "PodDisruptionBudget"), "no disruption budget for one replica");
    Ok(())
}

/// A release of the chart on the test bed, in a namespace of its own.
struct Release {
    client: Client,
    name: String,
    namespace: String,
    documents: Vec<Value>,
    /// The cluster-scoped objects applied for real, to delete at the end.
    cluster_scoped: Vec<(ApiResource, String)>,
}

impl Release {
    /// Renders the chart with `args` as the release `SET-PID` and applies it: namespaced objects
    /// for real, in a new namespace that enforces the restricted Pod Security level; the
    /// ClusterRole and ClusterRoleBinding for real (their names carry the release's);
    /// ReconcilerPlugins as a dry run.
    async fn install(set: &str, args: &[&str]) -> anyhow::Result<Self> {
        let client = client().await?;
        apply_file(&client, &workspace_root().join("deploy/crd.yaml"), None).await?;
        let namespace = restricted_namespace(&client, &format!("helm-{set}")).await?;
        let name = format!("{set}-{}", std::process::id());
        let documents = helm::template(&name, &namespace, args)?;
        let monitoring = Discovery::new(client.clone()).filter(&["monitoring.coreos.com"]).run().await?;
        let mut release = Self { client, name, namespace, documents: documents.clone(), cluster_scoped: Vec::new() };
        for document in documents {
            let object: DynamicObject = serde_json::from_value(document.clone())?;
            let types = object.types.clone().expect("every document has a type");
            if types.kind == "ServiceMonitor" && !monitoring.has_group("monitoring.coreos.com") {
                // The test bed serves no monitoring.coreos.com API (the Prometheus Operator's
                // CRDs are not installed), so a ServiceMonitor is only checked as rendered.
                continue;
            }
            let (resource, caps) =
                pinned_kind(&release.client, &kube::api::GroupVersionKind::try_from(&types)?).await?;
            if caps.scope == Scope::Namespaced {
                assert_eq!(
                    object.namespace().as_deref(),
                    Some(release.namespace.as_str()),
                    "{types:?} in the release's"
                );
                apply(&release.client, document, None).await?;
            } else if types.kind == "ClusterRole" || types.kind == "ClusterRoleBinding" {
                assert!(object.name_any().contains(&release.name), "{} names its release", object.name_any());
                apply(&release.client, document, None).await?;
                release.cluster_scoped.push((resource, object.name_any()));
            } else {
                let api: Api<DynamicObject> = Api::all_with(release.client.clone(), &resource);
                let params = PatchParams { dry_run: true, ..PatchParams::apply("wasmop-tests").force() };
                api.patch(&object.name_any(), &params, &Patch::Apply(&object)).await?;
            }
        }
        Ok(release)
    }

    /// Installs the value set `ci/SET-values.yaml`, with `more` arguments for helm, and waits for
    /// its pods.
    async fn install_set(set: &str, more: &[&str]) -> anyhow::Result<Self> {
        let values = helm::chart().join(format!("ci/{set}-values.yaml"));
        let mut args = vec!["--values", values.to_str().expect("a UTF-8 path")];
        args.extend_from_slice(more);
        let release = Self::install(set, &args).await?;
        release.until_pods_admitted().await?;
        Ok(release)
    }

    /// The host container's arguments, as one JSON text.
    fn args(&self) -> String {
        self.of_kind("Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"].to_string()
    }

    /// The rendered documents of `kind`.
    fn of_kind(&self, kind: &str) -> Vec<&Value> {
        self.documents.iter().filter(|d| d["kind"] == kind).collect()
    }

    /// The ServiceAccount the host runs as.
    fn user(&self) -> String {
        let deployment = self.of_kind("Deployment")[0];
        let account = deployment["spec"]["template"]["spec"]["serviceAccountName"].as_str().expect("an account");
        format!("system:serviceaccount:{}:{account}", self.namespace)
    }

    /// Whether the host's ServiceAccount may do `what`, as the API server's authorizer answers now.
    async fn may(&self, what: &Access<'_>) -> anyhow::Result<bool> {
        let (group, resource) = what.resource.split_once('/').unwrap_or(("", what.resource));
        let (resource, subresource) = resource.split_once(':').map_or((resource, None), |(r, s)| (r, Some(s)));
        let review: SubjectAccessReview = serde_json::from_value(json!({
            "spec": { "user": self.user(), "resourceAttributes": {
                "verb": what.verb, "group": group, "resource": resource, "subresource": subresource,
                "namespace": what.namespace, "name": what.name,
            } },
        }))?;
        let answer =
            Api::<SubjectAccessReview>::all(self.client.clone()).create(&PostParams::default(), &review).await?;
        Ok(answer.status.is_some_and(|s| s.allowed))
    }

    /// Waits until the host's ServiceAccount may do `what` (the authorizer sees new bindings
    /// after a moment).
    async fn until_may(&self, what: Access<'_>) -> anyhow::Result<()> {
        until(&format!("{} may {what:?}", self.user()), async || self.may(&what).await, |allowed| *allowed).await?;
        Ok(())
    }

    /// Waits until the Deployment's ReplicaSet has created every replica's pod.
    async fn until_pods_admitted(&self) -> anyhow::Result<Deployment> {
        let name = self.of_kind("Deployment")[0]["metadata"]["name"].as_str().expect("a name");
        until_pods_admitted(&self.client, &self.namespace, name).await
    }

    /// Deletes the cluster-scoped objects the release applied (the namespace stays, as every
    /// test's).
    async fn uninstall(self) -> anyhow::Result<()> {
        for (resource, name) in &self.cluster_scoped {
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), resource);
            api.delete(name, &DeleteParams::default()).await?;
        }
        Ok(())
    }
}

/// A request to check with a SubjectAccessReview.
#[derive(Debug)]
struct Access<'a> {
    verb: &'a str,
    /// `group/resource:subresource`, the group and subresource optional.
    resource: &'a str,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
}

/// To `verb` the `resource` (`group/resource:subresource`), cluster-wide and of any name.
fn access<'a>(verb: &'a str, resource: &'a str) -> Access<'a> {
    Access { verb, resource, namespace: None, name: None }
}

impl<'a> Access<'a> {
    /// In `namespace` only.
    fn within(self, namespace: &'a str) -> Self {
        Self { namespace: Some(namespace), ..self }
    }

    /// The object `name` only.
    fn named(self, name: &'a str) -> Self {
        Self { name: Some(name), ..self }
    }
}

/// A namespace of the test's own that enforces the restricted Pod Security level.
async fn restricted_namespace(client: &Client, test: &str) -> anyhow::Result<String> {
    let namespace = namespace(client, test).await?;
    let restricted = json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": { "name": namespace, "labels": { "pod-security.kubernetes.io/enforce": "restricted" } },
    });
    apply(client, restricted, None).await?;
    Ok(namespace)
}

/// Waits until the ReplicaSet of the Deployment `name` has created every replica's pod: the
/// namespace's Pod Security level admitted the pod template.
async fn until_pods_admitted(client: &Client, namespace: &str, name: &str) -> anyhow::Result<Deployment> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let created = |d: Option<&Deployment>| {
        d.is_some_and(|d| d.status.as_ref().and_then(|s| s.replicas) == d.spec.as_ref().and_then(|s| s.replicas))
    };
    let what = format!("the pods of {name} created");
    let deployment = within(WAIT, &what, await_condition(deployments, name, created)).await??;
    Ok(deployment.expect("the Deployment exists"))
}

/// What every release's host may do: Leases in its own namespace only, ReconcilerPlugins and
/// their status, Events.
async fn assert_host_rules(release: &Release) -> anyhow::Result<()> {
    let own = release.namespace.as_str();
    release.until_may(access("create", "coordination.k8s.io/leases").within(own)).await?;
    release.until_may(access("watch", "wasmop.dev/reconcilerplugins")).await?;
    release.until_may(access("patch", "wasmop.dev/reconcilerplugins:status").named("any")).await?;
    assert!(release.may(&access("create", "events.k8s.io/events").within("default")).await?);
    assert!(!release.may(&access("create", "coordination.k8s.io/leases").within("default")).await?, "Leases elsewhere");
    assert!(!release.may(&access("delete", "wasmop.dev/reconcilerplugins").named("any")).await?);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_defaults_install_with_the_base_rbac_and_restricted_pods() -> anyhow::Result<()> {
    let release = Release::install("defaults", &[]).await?;
    let deployment = release.until_pods_admitted().await?;
    assert_eq!(deployment.spec.and_then(|s| s.replicas), Some(2));
    assert_host_rules(&release).await?;
    // The shipped plugins' kinds, as the base grants them.
    release.until_may(access("patch", "networking.k8s.io/ingresses").within("default")).await?;
    assert!(release.may(&access("get", "secrets").within("default").named("wasmop-registry")).await?);
    assert!(
        !release.may(&access("get", "secrets").within("default").named("another")).await?,
        "only the named Secrets"
    );
    let pdb = release.of_kind("PodDisruptionBudget")[0];
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert_webhook_rules(&release, true).await?;
    let args = release.args();
    let service = format!("--webhook-service={}/{}-wasmop-webhooks:443", release.namespace, release.name);
    assert!(args.contains("--webhook-addr=0.0.0.0:9443") && args.contains(&service), "{args}");
    assert!(args.contains(&format!("--webhook-secret={}-wasmop-webhook-certs", release.name)), "{args}");
    release.uninstall().await
}

/// What the webhook endpoint needs (the book's operating/webhooks.md lists it): the webhook
/// configurations, the conversion section of the shipped plugins' CRDs, and with `managed`
/// certificates the Secret that holds them, in the release's namespace only.
async fn assert_webhook_rules(release: &Release, managed: bool) -> anyhow::Result<()> {
    let own = release.namespace.as_str();
    for resource in ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"] {
        let resource = format!("admissionregistration.k8s.io/{resource}");
        release.until_may(access("patch", &resource).named("wasmop-webpage")).await?;
        assert!(release.may(&access("delete", &resource).named("wasmop-webpage")).await?);
        assert!(release.may(&access("create", &resource)).await?, "a server-side apply that creates one");
    }
    let crds = "apiextensions.k8s.io/customresourcedefinitions";
    assert!(release.may(&access("patch", crds).named("webpages.sample.wasmop.dev")).await?);
    assert!(!release.may(&access("patch", crds).named("reconcilerplugins.wasmop.dev")).await?, "only the named CRDs");
    let secret = format!("{}-wasmop-webhook-certs", release.name);
    if managed {
        release.until_may(access("update", "secrets").within(own).named(&secret)).await?;
        assert!(release.may(&access("get", "secrets").within(own).named(&secret)).await?);
        assert!(release.may(&access("create", "secrets").within(own)).await?);
    }
    assert_eq!(release.may(&access("get", "secrets").within(own).named(&secret)).await?, managed);
    assert!(!release.may(&access("create", "secrets").within("default")).await?, "Secrets elsewhere");
    assert!(!release.may(&access("update", "secrets").within(own).named("another")).await?);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_certificates_from_a_secret_install_without_rights_on_secrets() -> anyhow::Result<()> {
    let release = Release::install_set("webhook-files", &[]).await?;
    let args = release.args();
    let dir = "/var/run/wasmop/webhook-certs";
    for flag in [
        "--webhook-addr=0.0.0.0:10443".to_string(),
        format!("--webhook-service={}/{}-wasmop-webhooks:8443", release.namespace, release.name),
        format!("--webhook-cert={dir}/tls.crt"),
        format!("--webhook-key={dir}/tls.key"),
        format!("--webhook-ca={dir}/ca.crt"),
    ] {
        assert!(args.contains(&flag), "{flag} in {args}");
    }
    assert!(!args.contains("--webhook-secret"), "{args}");
    let pod = &release.of_kind("Deployment")[0]["spec"]["template"]["spec"];
    let volume = pod["volumes"].as_array().expect("volumes").iter().find(|v| v["name"] == "webhook-certs");
    assert_eq!(volume.expect("the certificates' volume")["secret"]["secretName"], "wasmop-webhook-tls");
    assert_eq!(pod["containers"][0]["ports"][1], json!({ "name": "webhook", "containerPort": 10443 }));
    let services = release.of_kind("Service");
    let webhooks = services.iter().find(|s| s["metadata"]["name"].as_str().is_some_and(|n| n.ends_with("-webhooks")));
    assert_eq!(webhooks.expect("the webhooks' Service")["spec"]["ports"][0]["port"], 8443);
    assert!(release.of_kind("Role").iter().all(|r| !r.to_string().contains("secrets")), "no Role on Secrets");
    assert_host_rules(&release).await?;
    assert_webhook_rules(&release, false).await?;
    release.uninstall().await
}

#[test]
fn without_webhooks_the_chart_serves_none_and_grants_nothing_for_them() -> anyhow::Result<()> {
    let rendered = helm::template("plain", "default", &["--set", "webhook.enabled=false"])?;
    let text = serde_json::to_string(&rendered)?;
    assert!(!text.contains("--webhook-") && !text.contains("webhookconfigurations"), "{text}");
    let services: Vec<_> = rendered.iter().filter(|d| d["kind"] == "Service").collect();
    assert_eq!(services.len(), 1, "the metrics Service alone");
    assert!(rendered.iter().filter(|d| d["kind"] == "Role").all(|r| !r.to_string().contains("secrets")));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sharded_values_install() -> anyhow::Result<()> {
    let release = Release::install_set("sharded", &[]).await?;
    assert_eq!(release.of_kind("Deployment")[0]["spec"]["replicas"], 3);
    let args = release.args();
    let group = format!("\"--shard-group={}-wasmop\"", release.name);
    let lease = format!("\"--leader-election-id={}-wasmop-leader\"", release.name);
    assert!(args.contains(&group) && args.contains(&lease) && args.contains("\"--shards\""), "{args}");
    assert_eq!(release.of_kind("PodDisruptionBudget")[0]["spec"]["maxUnavailable"], 1);
    assert_host_rules(&release).await?;
    release.uninstall().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_from_oci_install_with_their_pull_secrets_granted() -> anyhow::Result<()> {
    let release = Release::install_set("oci", &[]).await?;
    let ns = release.namespace.as_str();
    let plugins = release.of_kind("ReconcilerPlugin");
    assert_eq!(plugins.len(), 3, "the ReconcilerPlugins pass the API server's dry run");
    assert_eq!(
        plugins[1]["spec"]["imagePullSecrets"],
        json!([
            { "name": "wasmop-registry", "namespace": ns }, { "name": "web-registry", "namespace": ns },
        ])
    );
    assert_eq!(plugins[2]["spec"]["module"]["configMap"]["namespace"], ns, "a ConfigMap in the release's namespace");
    // The host reads exactly the Secrets the plugins name, in the release's namespace.
    release.until_may(access("get", "secrets").within(ns).named("web-registry")).await?;
    assert!(release.may(&access("get", "secrets").within(ns).named("wasmop-registry")).await?);
    assert!(!release.may(&access("get", "secrets").within(ns).named("another")).await?);
    assert!(!release.may(&access("list", "secrets").within(ns)).await?);
    assert!(release.args().contains("--insecure-registry=registry.internal:5000"), "{}", release.args());
    release.uninstall().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_files_from_a_volume_install_with_extra_rules() -> anyhow::Result<()> {
    let release = Release::install_set("files", &[]).await?;
    let pod = &release.of_kind("Deployment")[0]["spec"]["template"]["spec"];
    let args = release.args();
    for flag in ["--plugins=/var/lib/wasmop/plugins", "--watch", "--config=/etc/wasmop/config.yaml"] {
        assert!(args.contains(flag), "{args}");
    }
    assert!(!args.contains("--reconciler-plugins") && !args.contains("--leader-elect"), "{args}");
    assert_eq!(pod["volumes"][1]["configMap"]["name"], "wasmop-plugin-files");
    let configs: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(release.client.clone(), &release.namespace);
    let config = configs.get(&format!("{}-wasmop-config", release.name)).await?;
    let file: Value = serde_saphyr::from_str(&config.data.unwrap_or_default()["config.yaml"])?;
    assert_eq!(file["plugins"]["webpage"]["limits"]["memoryMib"], 64);
    assert_host_rules(&release).await?;
    release.until_may(access("patch", "example.com/widgets:status").within("default").named("w")).await?;
    assert!(!release.may(&access("delete", "example.com/widgets").within("default").named("w")).await?);
    release.uninstall().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_monitor_scrapes_the_metrics_service() -> anyhow::Result<()> {
    let release = Release::install_set("servicemonitor", &["--api-versions", "monitoring.coreos.com/v1"]).await?;
    let monitor = release.of_kind("ServiceMonitor")[0];
    let service = release.of_kind("Service")[0];
    for (label, value) in monitor["spec"]["selector"]["matchLabels"].as_object().expect("a selector") {
        assert_eq!(&service["metadata"]["labels"][label], value, "the ServiceMonitor selects the metrics Service");
    }
    assert_eq!(monitor["spec"]["namespaceSelector"]["matchNames"], json!([release.namespace]));
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], service["spec"]["ports"][0]["name"]);
    assert_eq!(monitor["spec"]["endpoints"][0]["path"], "/metrics");
    assert_eq!(monitor["metadata"]["labels"]["release"], "prometheus");
    // The Service the API server holds is the one rendered.
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(release.client.clone(), &release.namespace);
    let applied = services.get(service["metadata"]["name"].as_str().expect("a name")).await?;
    assert_eq!(applied.metadata.labels.unwrap_or_default()["app.kubernetes.io/instance"], release.name);
    release.uninstall().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_weakened_security_context_is_refused_by_restricted_pod_security() -> anyhow::Result<()> {
    // The control for the checks above: the namespace's restricted level refuses a pod that
    // may escalate privileges, so the ReplicaSet creates none and says why.
    let release = Release::install("weakened", &["--set", "securityContext.allowPrivilegeEscalation=true"]).await?;
    let deployments: Api<Deployment> = Api::namespaced(release.client.clone(), &release.namespace);
    let name = format!("{}-wasmop", release.name);
    let refused = |d: Option<&Deployment>| {
        let conditions = d.and_then(|d| d.status.as_ref()?.conditions.as_ref());
        conditions.into_iter().flatten().any(|c| c.type_ == "ReplicaFailure" && c.status == "True")
    };
    let deployment =
        within(WAIT, "ReplicaFailure", await_condition(deployments, &name, refused)).await??.expect("exists");
    let status = deployment.status.expect("a status");
    let failure = status.conditions.into_iter().flatten().find(|c| c.type_ == "ReplicaFailure").expect("the condition");
    let message = failure.message.unwrap_or_default();
    assert!(
        message.contains("violates PodSecurity \"restricted") && message.contains("allowPrivilegeEscalation"),
        "{message}"
    );
    assert_eq!(status.replicas.unwrap_or(0), 0);
    release.uninstall().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_installs_and_uninstalls_the_chart() -> anyhow::Result<()> {
    let client = client().await?;
    let namespace = restricted_namespace(&client, "helm-install").await?;
    let release = format!("install-{}", std::process::id());
    let chart = helm::chart();
    let kubeconfig = wasmop_tests::kubeconfig().to_str().expect("a UTF-8 path").to_string();
    let scope = ["--namespace", &namespace, "--kubeconfig", &kubeconfig];
    let mut install = vec!["install", &release, chart.to_str().expect("a UTF-8 path"), "--set", "image.tag=dev"];
    install.extend(scope);
    let out = helm::run(&install)?;
    assert!(out.success, "helm install: {}{}", out.stdout, out.stderr);
    let fullname = format!("{release}-wasmop");
    assert!(out.stdout.contains(&format!("is installed as {fullname} in {namespace}")), "the notes: {}", out.stdout);
    until_pods_admitted(&client, &namespace, &fullname).await?;

    let mut list = vec!["list", "--output", "json"];
    list.extend(scope);
    let out = helm::run(&list)?;
    let releases: Value = serde_json::from_str(&out.stdout)?;
    assert_eq!(releases[0]["name"], release.as_str());
    assert_eq!(releases[0]["status"], "deployed");
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(client.clone());
    roles.get(&fullname).await?;

    let mut uninstall = vec!["uninstall", &release];
    uninstall.extend(scope);
    let out = helm::run(&uninstall)?;
    assert!(out.success, "helm uninstall: {}{}", out.stdout, out.stderr);
    assert!(roles.get_opt(&fullname).await?.is_none(), "the ClusterRole is gone with the release");
    Ok(())
}
