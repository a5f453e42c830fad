//! `ReconcilerPlugin` resources: the cluster says which plugins run. Each resource names a
//! module ([`fetch`](super::fetch)) and its deployment-time overrides; the host runs it with
//! [`Host::install`] under the owner `ReconcilerPlugin/<name>` and reports on the status:
//! `Loaded` (the spec's module runs), `Ready` (some version runs), `Degraded` (the spec's module
//! was refused or could not be fetched, or it runs but waits for kinds the API server does not
//! serve: `KindNotServed`) and the running digest. The status is written only when
//! it changes: every write is an event for this controller. The plugin's reconcile counts are
//! metrics (`wasmop_reconciles_total{plugin}`), not status.
//!
//! The module is fetched again every [`RECHECK`] (a single GET for a ConfigMap) and installed
//! only when its digest or the overrides changed, so an edited ConfigMap swaps the plugin within
//! seconds without the host caching every ConfigMap of the cluster.
//!
//! A `spec.candidate` (any source `module` may name) is loaded beside the live version and
//! shadowed ([`crate::shadow`]): the condition `CandidateReady` says whether it runs (and why
//! not), and `status.shadow` sums its runs up (compared, differences, failures, the last objects
//! that differed), written at most every [`SHADOW_SUMMARY_EVERY`]. A candidate that does not
//! load never touches the live version. Promotion is a spec change that makes the candidate the
//! module (a hot reload); removing `candidate` drops it and its summary.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{Controller, watcher};
use kube::{Api, Resource, ResourceExt};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::fetch::{FetchError, FetchPolicy, ModuleSpec};
use super::oci::Credentials;
use crate::fence::Unanswered;
use crate::host::{Host, HostError};
use crate::secrets::{SecretError, SecretKey};
use crate::settings::Overrides;

/// The `ReconcilerPlugin` CustomResourceDefinition, as shipped.
const CRD: &str = include_str!("../../crds/reconcilerplugin.yaml");

/// The reason while the plugin waits for kinds the API server does not serve.
const KIND_NOT_SERVED: &str = "KindNotServed";

/// How often a resource's module is fetched again.
pub const RECHECK: Duration = Duration::from_secs(5);

/// The shortest time between two writes of a resource's `status.shadow`: its counts change with
/// every reconcile, and every write is an event for this controller.
pub const SHADOW_SUMMARY_EVERY: Duration = Duration::from_secs(5);

/// The finalizer that stops a plugin before its resource goes.
pub const FINALIZER: &str = "wasmop.dev/reconciler-plugin";

/// The `ReconcilerPlugin` CustomResourceDefinition as YAML.
pub fn crd_yaml() -> String {
    CRD.to_string()
}

/// The kind of `ReconcilerPlugin` resources.
pub fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("wasmop.dev", "v1alpha1", "ReconcilerPlugin"),
        "reconcilerplugins",
    )
}

/// `spec` of a `ReconcilerPlugin`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    module: ModuleSpec,
    #[serde(default)]
    overrides: Option<Overrides>,
    /// A candidate version, shadowed beside the live one.
    #[serde(default)]
    candidate: Option<ModuleSpec>,
    /// Secrets of type `kubernetes.io/dockerconfigjson` with the credentials of OCI registries.
    #[serde(default)]
    image_pull_secrets: Vec<PullSecret>,
}

/// A Secret with registry credentials, as `spec.imagePullSecrets` names it. The resource is
/// cluster-scoped: a Secret that names no namespace is read in the host's `--namespace`, else in
/// `default` (as the Secrets plugins name, [`crate::secrets`]).
#[derive(Debug, Clone, Deserialize)]
struct PullSecret {
    name: String,
    #[serde(default)]
    namespace: Option<String>,
}

/// The key of a `kubernetes.io/dockerconfigjson` Secret that holds the docker config.
const DOCKER_CONFIG_KEY: &str = ".dockerconfigjson";

/// The registry credentials of `secrets`, read with the host's Secret reader (kept for
/// [`crate::secrets::CACHE_TTL`]); the first Secret naming a registry wins.
async fn credentials(host: &Host, secrets: &[PullSecret]) -> Result<Credentials, String> {
    let mut credentials = Credentials::default();
    for secret in secrets {
        let key =
            SecretKey { namespace: secret.namespace.clone(), name: secret.name.clone(), key: DOCKER_CONFIG_KEY.into() };
        let text = host.secrets().read(&key).await.map_err(|err| match err {
            SecretError::MissingKey { namespace, name, .. } => format!(
                "Secret {namespace}/{name} has no {DOCKER_CONFIG_KEY} key: pull secrets are of type kubernetes.io/dockerconfigjson"
            ),
            err => format!("pull secret: {err}"),
        })?;
        credentials.add_docker_config(text.as_bytes()).map_err(|e| format!("pull secret {}: {e}", secret.name))?;
    }
    Ok(credentials)
}

/// What the host runs for one resource: the digest of the fetched module and the overrides.
type Applied = (String, Option<Overrides>);

struct Context {
    host: Arc<Host>,
    policy: FetchPolicy,
    api: Api<DynamicObject>,
    recorder: Recorder,
    /// What each resource last had installed, by resource name.
    applied: Mutex<HashMap<String, Applied>>,
    /// The candidate each resource last had shadowed, by resource name.
    candidates: Mutex<HashMap<String, Applied>>,
    /// When each resource's `status.shadow` was last written, by resource name.
    summarized: Mutex<HashMap<String, Instant>>,
}

/// How the last attempt went.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    /// The spec's module runs as plugin `plugin`.
    Loaded {
        /// The plugin's name.
        plugin: String,
    },
    /// The spec's module runs as plugin `plugin` but does not reconcile: the API server does not
    /// serve kinds it declares ([`Host::unserved`]). It starts once they are served.
    Waiting {
        /// The plugin's name.
        plugin: String,
        /// The kinds not served, each with the served kind closest to it.
        message: String,
    },
    /// The spec's module does not run; `running` says whether an older version does.
    Refused {
        /// A CamelCase reason.
        reason: &'static str,
        /// What went wrong.
        message: String,
        /// Whether an older version keeps running.
        running: bool,
    },
}

/// The status conditions for `report`, keeping the transition time of those whose status did
/// not change since `previous`.
pub fn conditions(previous: &Value, report: &Report, generation: Option<i64>, now: &str) -> Vec<Value> {
    let (loaded, ready, degraded) = match report {
        Report::Loaded { plugin } => (
            ("True", "Loaded", format!("plugin {plugin} runs the module the spec names")),
            ("True", "Running", format!("plugin {plugin} is running")),
            ("False", "AsSpecified", "the spec's module runs".to_string()),
        ),
        Report::Waiting { plugin, message } => (
            ("True", "Loaded", format!("plugin {plugin} runs the module the spec names")),
            ("False", KIND_NOT_SERVED, format!("plugin {plugin} does not reconcile: {message}")),
            ("True", KIND_NOT_SERVED, message.clone()),
        ),
        Report::Refused { reason, message, running } => (
            ("False", *reason, message.clone()),
            if *running {
                ("True", "Running", "an older version of the plugin keeps running".to_string())
            } else {
                ("False", "NotRunning", "no version of the plugin runs".to_string())
            },
            ("True", *reason, message.clone()),
        ),
    };
    [("Loaded", loaded), ("Ready", ready), ("Degraded", degraded)]
        .into_iter()
        .map(|(type_, (status, reason, message))| {
            let before = previous.as_array().and_then(|cs| cs.iter().find(|c| c["type"] == type_));
            let since =
                before.filter(|c| c["status"] == status).and_then(|c| c["lastTransitionTime"].as_str()).unwrap_or(now);
            json!({ "type": type_, "status": status, "reason": reason, "message": message,
                    "lastTransitionTime": since, "observedGeneration": generation })
        })
        .collect()
}

/// Runs the plugins `ReconcilerPlugin` resources name, fetched under `policy`, and reports on
/// their status, until `shutdown` fires. Waits (quietly, retrying every 30 s) for the CRD to be
/// installed.
pub async fn run(host: Arc<Host>, policy: FetchPolicy, shutdown: CancellationToken) {
    let client = host.clusters().local().client().clone();
    let resource = resource();
    let gvk = GroupVersionKind::gvk(&resource.group, &resource.version, &resource.kind);
    let mut told = false;
    while let Err(err) = kube::discovery::pinned_kind(&client, &gvk).await {
        if !told {
            tracing::warn!(%err, "ReconcilerPlugin resources are not served; install the CRD with \
                `wasmop crd | kubectl apply -f -` (checking again every 30 s)");
            told = true;
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(30)) => {}
            () = shutdown.cancelled() => return,
        }
    }
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let instance = host.fence().identity().map(str::to_string);
    let recorder = Recorder::new(client, Reporter { controller: "wasmop".into(), instance });
    let context = Arc::new(Context {
        host,
        policy,
        api: api.clone(),
        recorder,
        applied: Mutex::new(HashMap::new()),
        candidates: Mutex::new(HashMap::new()),
        summarized: Mutex::new(HashMap::new()),
    });
    tracing::info!("running the plugins of ReconcilerPlugin resources");
    Controller::new_with(api, watcher::Config::default(), resource)
        .graceful_shutdown_on(async move { shutdown.cancelled().await })
        .run(reconcile, |_, _, _| Action::requeue(RECHECK), context)
        .for_each(|_| async {})
        .await;
}

async fn reconcile(object: Arc<DynamicObject>, context: Arc<Context>) -> Result<Action, kube::Error> {
    let name = object.name_any();
    let owner = format!("ReconcilerPlugin/{name}");
    if object.metadata.deletion_timestamp.is_some() {
        let stopped = context.host.remove(&owner).await;
        tracing::info!(resource = name, ?stopped, "ReconcilerPlugin deleted; its plugin stopped");
        context.applied.lock().expect("never poisoned").remove(&name);
        context.candidates.lock().expect("never poisoned").remove(&name);
        context.summarized.lock().expect("never poisoned").remove(&name);
        let finalizers: Vec<&String> = object.finalizers().iter().filter(|f| *f != FINALIZER).collect();
        let patch = json!({ "metadata": { "finalizers": finalizers, "resourceVersion": object.resource_version() } });
        leader_only(&context, context.api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))).await?;
        return Ok(Action::await_change());
    }
    if !object.finalizers().iter().any(|f| f == FINALIZER) {
        let mut finalizers = object.finalizers().to_vec();
        finalizers.push(FINALIZER.to_string());
        let patch = json!({ "metadata": { "finalizers": finalizers, "resourceVersion": object.resource_version() } });
        leader_only(&context, context.api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))).await?;
    }
    let report = match load(&context, &name, &owner, &object).await {
        Report::Loaded { plugin } => match context.host.unserved(&plugin) {
            Some(message) => Report::Waiting { plugin, message },
            None => Report::Loaded { plugin },
        },
        refused => refused,
    };
    let status = &object.data["status"];
    let problem = match &report {
        Report::Refused { reason, message, .. } => {
            tracing::error!(resource = name, reason, "plugin refused: {message}");
            Some((*reason, message))
        }
        // The controller logs it.
        Report::Waiting { message, .. } => Some((KIND_NOT_SERVED, message)),
        Report::Loaded { .. } => None,
    };
    if let Some((reason, message)) = problem {
        // One Event per new refusal, not one per recheck.
        let degraded = status["conditions"].as_array().and_then(|cs| cs.iter().find(|c| c["type"] == "Degraded"));
        if degraded.is_none_or(|c| c["message"] != message.as_str()) {
            let event = Event {
                type_: EventType::Warning,
                reason: reason.to_string(),
                note: Some(message.chars().take(1000).collect()),
                action: "Load".into(),
                secondary: None,
            };
            let reference = object.object_ref(&resource());
            let published = context.recorder.publish(&event, &reference);
            if let Err(err) = leader_only(&context, published).await {
                tracing::warn!(resource = name, %err, "cannot record the refusal as an Event");
            }
        }
    }
    let candidate = load_candidate(&context, &name, &owner, &object).await;
    if let CandidateReport::Refused { reason, message } = &candidate {
        tracing::warn!(resource = name, reason, "candidate refused: {message}");
    }
    let plugin = context.host.owned_by(&owner).into_iter().next();
    let digest = plugin.as_deref().and_then(|p| context.host.module(p)).map(|m| m.digest().to_string());
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let generation = object.metadata.generation;
    let mut conditions = conditions(&status["conditions"], &report, generation, &now);
    conditions.extend(candidate_condition(&status["conditions"], &candidate, generation, &now));
    let shadow = plugin.as_deref().and_then(|p| context.host.shadowed(p)).map(|(candidate, tally)| {
        let mut summary = json!(tally);
        summary["candidate"] = json!(candidate.digest());
        summary
    });
    let shadow = shadow.map(|fresh| {
        let written = context.summarized.lock().expect("never poisoned").get(&name).copied();
        let same_candidate = status["shadow"]["candidate"] == fresh["candidate"];
        match written {
            Some(at) if same_candidate && at.elapsed() < SHADOW_SUMMARY_EVERY => status["shadow"].clone(),
            _ => fresh,
        }
    });
    let new = json!({
        "conditions": conditions, "plugin": plugin, "digest": digest, "observedGeneration": generation,
        "shadow": shadow,
    });
    if changed(status, &new) {
        let patch = json!({ "status": new });
        leader_only(&context, context.api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))).await?;
        if new["shadow"] != status["shadow"] {
            context.summarized.lock().expect("never poisoned").insert(name.clone(), Instant::now());
        }
    }
    context.host.metrics().plugin_resource_checked(&name);
    Ok(Action::requeue(RECHECK))
}

/// Sends `request` if this replica leads, inside the fence. A standby loads and runs the
/// modules (its caches stay warm to take over) but leaves the resources' finalizer, status and
/// Events to the leader: its writes are skipped, not failed. One left unanswered fails (the
/// resource is checked again soon).
async fn leader_only<T>(
    context: &Context,
    request: impl Future<Output = Result<T, kube::Error>>,
) -> Result<(), kube::Error> {
    match context.host.fence().write(request).await {
        Ok(answer) => answer.map(drop),
        Err(Unanswered::Fenced) => Ok(()),
        Err(timed_out) => Err(kube::Error::Service(Box::new(timed_out))),
    }
}

/// Whether `new` (every field of the status the host writes) differs from the `current` status.
/// Fields the host does not write (say, counters an older host wrote) do not count.
fn changed(current: &Value, new: &Value) -> bool {
    new.as_object().into_iter().flatten().any(|(field, value)| current.get(field).unwrap_or(&Value::Null) != value)
}

/// Fetches the resource's module and runs it, unless it already runs with these overrides.
async fn load(context: &Context, name: &str, owner: &str, object: &DynamicObject) -> Report {
    let running = !context.host.owned_by(owner).is_empty();
    let refused = |reason, message: String| Report::Refused { reason, message, running };
    let spec: Spec = match serde_json::from_value(object.data["spec"].clone()) {
        Ok(spec) => spec,
        Err(err) => return refused("InvalidSpec", format!("invalid spec: {err}")),
    };
    let before = context.applied.lock().expect("never poisoned").get(name).cloned();
    // The plugin, when it already runs what `applied` says.
    let already = |applied: &Applied| (before.as_ref() == Some(applied)).then(|| context.host.owned_by(owner).pop());
    // A module pinned by its digest that already runs with these overrides is not fetched again
    // (for an OCI module, the registry is not asked again).
    let pinned = spec.module.pinned();
    if let Some(pinned) = &pinned
        && let Some(Some(plugin)) = already(&(pinned.clone(), spec.overrides.clone()))
    {
        return Report::Loaded { plugin };
    }
    let (key, bytes) = match fetch(context, name, &spec.module, &spec.image_pull_secrets).await {
        Ok(fetched) => fetched,
        Err(err) => return refused(err.reason, err.message),
    };
    let applied = (key, spec.overrides.clone());
    if let Some(Some(plugin)) = already(&applied) {
        return Report::Loaded { plugin };
    }
    let origin = std::path::PathBuf::from(format!("ReconcilerPlugin {name}"));
    // A resource's settings are its own spec's alone, never the configuration file's entry for
    // the name its module gives itself: that entry may grant Secrets, and anyone who may create
    // a ReconcilerPlugin chooses the module.
    match context.host.install(owner, &origin, bytes, Some(spec.overrides.unwrap_or_default())).await {
        Ok(installed) => {
            tracing::info!(resource = name, plugin = installed.name, digest = installed.digest,
                change = ?installed.change, "ReconcilerPlugin loaded");
            // A module that renamed its plugin: the old one goes.
            for other in context.host.owned_by(owner).into_iter().filter(|p| *p != installed.name) {
                context.host.stop(&other).await;
            }
            context.applied.lock().expect("never poisoned").insert(name.to_string(), applied);
            Report::Loaded { plugin: installed.name }
        }
        Err(err) => refused("LoadFailed", err.to_string()),
    }
}

/// Fetches `module` for the resource `name`, with the registry credentials of `secrets`: what
/// the module is known by (an OCI module's manifest digest, else its sha256) and its bytes.
async fn fetch(
    context: &Context,
    name: &str,
    module: &ModuleSpec,
    secrets: &[PullSecret],
) -> Result<(String, Vec<u8>), FetchError> {
    let client = context.host.clusters().local().client().clone();
    // As the kubelet does with imagePullSecrets, a pull secret that cannot be read is reported
    // only when the pull needs credentials: a stored module or a public registry loads without.
    let (credentials, secret_problem) = if module.oci.is_some() {
        match credentials(&context.host, secrets).await {
            Ok(credentials) => (credentials, None),
            Err(message) => {
                tracing::warn!(resource = name, "pulling without the pull secrets: {message}");
                (Credentials::default(), Some(message))
            }
        }
    } else {
        (Credentials::default(), None)
    };
    let mut fetched = module.fetch(&client, &context.policy, &credentials).await;
    if let (Err(err), Some(problem)) = (&mut fetched, secret_problem)
        && err.reason == super::oci::Reason::Unauthorized.as_str()
    {
        err.reason = super::oci::Reason::PullSecret.as_str();
        err.message = format!("{problem}; {}", err.message);
    }
    if module.oci.is_some() {
        let outcome = match &fetched {
            Ok(fetched) => fetched.pulled.unwrap_or("pulled"),
            Err(err) => err.reason,
        };
        context.host.metrics().oci_pulled(outcome);
    }
    let bytes = fetched?.bytes;
    // An OCI module is known by its manifest's digest, the others by their sha256.
    let key = if module.oci.is_some() { module.pinned() } else { None };
    Ok((key.unwrap_or_else(|| hex::encode(Sha256::digest(&bytes))), bytes))
}

/// How the spec's candidate went.
#[derive(Debug, Clone, PartialEq)]
pub enum CandidateReport {
    /// The spec names no candidate (any earlier one was dropped).
    Absent,
    /// The candidate with this digest runs in the shadow of the live version.
    Shadowed {
        /// The candidate module's sha256.
        digest: String,
    },
    /// The spec's candidate does not run (an earlier candidate may still be shadowed).
    Refused {
        /// A CamelCase reason.
        reason: &'static str,
        /// What went wrong.
        message: String,
    },
}

/// The `CandidateReady` condition for `report` (none without a candidate), keeping its
/// transition time while its status stays as in `previous`.
pub fn candidate_condition(
    previous: &Value,
    report: &CandidateReport,
    generation: Option<i64>,
    now: &str,
) -> Option<Value> {
    let (status, reason, message) = match report {
        CandidateReport::Absent => return None,
        CandidateReport::Shadowed { digest } => (
            "True",
            "Shadowed",
            format!("candidate {} runs in the shadow of the live version", &digest[..12.min(digest.len())]),
        ),
        CandidateReport::Refused { reason, message } => ("False", *reason, message.clone()),
    };
    let before = previous.as_array().and_then(|cs| cs.iter().find(|c| c["type"] == "CandidateReady"));
    let since = before.filter(|c| c["status"] == status).and_then(|c| c["lastTransitionTime"].as_str()).unwrap_or(now);
    Some(json!({ "type": "CandidateReady", "status": status, "reason": reason, "message": message,
                 "lastTransitionTime": since, "observedGeneration": generation }))
}

/// Loads the spec's candidate beside the live version the resource runs, unless it is already
/// shadowed with these overrides; drops the candidate when the spec names none.
async fn load_candidate(context: &Context, name: &str, owner: &str, object: &DynamicObject) -> CandidateReport {
    let Ok(spec) = serde_json::from_value::<Spec>(object.data["spec"].clone()) else {
        return CandidateReport::Absent; // the live version's report says why
    };
    let Some(candidate) = &spec.candidate else {
        context.candidates.lock().expect("never poisoned").remove(name);
        context.host.abandon(owner);
        return CandidateReport::Absent;
    };
    let refused = |reason, message| CandidateReport::Refused { reason, message };
    let shadowed = || {
        let plugin = context.host.owned_by(owner).pop()?;
        context.host.shadowed(&plugin).map(|(module, _)| module.digest().to_string())
    };
    let before = context.candidates.lock().expect("never poisoned").get(name).cloned();
    if let (Some(pinned), Some(digest)) = (candidate.pinned(), shadowed())
        && before == Some((pinned, spec.overrides.clone()))
    {
        return CandidateReport::Shadowed { digest };
    }
    let (key, bytes) = match fetch(context, name, candidate, &spec.image_pull_secrets).await {
        Ok(fetched) => fetched,
        Err(err) => return refused(err.reason, err.message),
    };
    let applied = (key, spec.overrides.clone());
    if before.as_ref() == Some(&applied)
        && let Some(digest) = shadowed()
    {
        return CandidateReport::Shadowed { digest };
    }
    let origin = std::path::PathBuf::from(format!("ReconcilerPlugin {name} candidate"));
    match context.host.propose(owner, &origin, bytes, Some(spec.overrides.unwrap_or_default())).await {
        Ok(digest) => {
            context.candidates.lock().expect("never poisoned").insert(name.to_string(), applied);
            CandidateReport::Shadowed { digest }
        }
        Err(err @ HostError::CandidateRenamed { .. }) => refused("CandidateRenamed", err.to_string()),
        Err(err @ HostError::NothingToShadow(_)) => refused("NothingToShadow", err.to_string()),
        Err(err) => refused("LoadFailed", err.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_with_an_older_version_running_is_degraded_but_ready() {
        let report = Report::Refused { reason: "LoadFailed", message: "bad".into(), running: true };
        let now = "2026-11-22T00:00:00Z";
        let conditions = conditions(&Value::Null, &report, Some(3), now);
        let status: Vec<(&str, &str)> =
            conditions.iter().map(|c| (c["type"].as_str().unwrap(), c["status"].as_str().unwrap())).collect();
        assert_eq!(status, [("Loaded", "False"), ("Ready", "True"), ("Degraded", "True")]);
        assert_eq!(conditions[0]["message"], "bad");
        assert_eq!(conditions[2]["reason"], "LoadFailed");
        assert!(conditions.iter().all(|c| c["observedGeneration"] == 3 && c["lastTransitionTime"] == now));
    }

    #[test]
    fn a_plugin_waiting_for_an_unserved_kind_is_loaded_but_degraded_and_not_ready() {
        let message = "Widgit is not served by the API server (x.dev/v1); did you mean Widget?".to_string();
        let report = Report::Waiting { plugin: "p".into(), message: message.clone() };
        let conditions = conditions(&Value::Null, &report, Some(1), "t1");
        let status: Vec<(&str, &str, &str)> = conditions
            .iter()
            .map(|c| (c["type"].as_str().unwrap(), c["status"].as_str().unwrap(), c["reason"].as_str().unwrap()))
            .collect();
        assert_eq!(
            status,
            [("Loaded", "True", "Loaded"), ("Ready", "False", "KindNotServed"), ("Degraded", "True", "KindNotServed")]
        );
        assert_eq!(conditions[2]["message"], message.as_str());
    }

    #[test]
    fn transition_times_change_only_with_the_status() {
        let earlier = conditions(&Value::Null, &Report::Loaded { plugin: "p".into() }, Some(1), "t1");
        let previous = Value::Array(earlier);
        let report = Report::Refused { reason: "FetchFailed", message: "gone".into(), running: true };
        let later = conditions(&previous, &report, Some(2), "t2");
        let times: Vec<&str> = later.iter().map(|c| c["lastTransitionTime"].as_str().unwrap()).collect();
        // Loaded and Degraded flipped; Ready stayed True.
        assert_eq!(times, ["t2", "t1", "t2"]);
    }

    #[test]
    fn the_candidate_condition_says_whether_the_candidate_is_shadowed() {
        assert_eq!(candidate_condition(&Value::Null, &CandidateReport::Absent, Some(1), "t1"), None);
        let shadowed = CandidateReport::Shadowed { digest: "0123456789abcdef".into() };
        let ready = candidate_condition(&Value::Null, &shadowed, Some(1), "t1").unwrap();
        assert_eq!((ready["type"].as_str(), ready["status"].as_str()), (Some("CandidateReady"), Some("True")));
        assert!(ready["message"].as_str().unwrap().contains("0123456789ab "), "{ready}");
        let previous = Value::Array(vec![ready]);
        let refused = CandidateReport::Refused { reason: "CandidateRenamed", message: "other".into() };
        let refused = candidate_condition(&previous, &refused, Some(2), "t2").unwrap();
        assert_eq!((refused["status"].as_str(), refused["reason"].as_str()), (Some("False"), Some("CandidateRenamed")));
        assert_eq!(refused["lastTransitionTime"], "t2");
        let again = candidate_condition(&previous, &shadowed, Some(2), "t3").unwrap();
        assert_eq!(again["lastTransitionTime"], "t1", "unchanged status, unchanged time");
    }

    #[test]
    fn an_unchanged_status_is_not_written_again() {
        let new = json!({ "conditions": [{ "type": "Loaded", "status": "True" }], "plugin": "p", "digest": null });
        let mut current = new.clone();
        current["reconciles"] = json!(7); // written by an older host
        assert!(!changed(&current, &new));
        current["plugin"] = json!("q");
        assert!(changed(&current, &new));
        assert!(changed(&Value::Null, &new), "no status yet");
    }

    #[test]
    fn the_shipped_crd_is_the_reconciler_plugin_kind() {
        let crd: Value = serde_saphyr::from_str(&crd_yaml()).unwrap();
        let resource = resource();
        assert_eq!(crd["spec"]["group"], resource.group.as_str());
        assert_eq!(crd["spec"]["names"]["plural"], resource.plural.as_str());
        assert_eq!(crd["spec"]["scope"], "Cluster");
        assert_eq!(crd["spec"]["versions"][0]["name"], resource.version.as_str());
    }
}
