//! The reference side of `make bench`: the greeting plugin's controller written natively, as a
//! careful kube-rs author would write it, making the same API requests the wasmop host makes
//! for the plugin; and, as `wasmop-native webhook ...`, the webpage plugin's admission webhooks
//! ([`webhook`]).
//!
//! `wasmop-native NAMESPACE [CONCURRENCY] [--finalizer] [--group GROUP]` (client from
//! `KUBECONFIG`) reconciles the Greetings (`example.wasmop.dev/v1`, or the same resource in
//! GROUP) of one namespace with a `kube::runtime::Controller`:
//! - no finalizer: the greeting plugin has no cleanup, so the host adds none (JOSDK's rule);
//!   with `--finalizer`, the finalizer `wasmop.dev/greeting`, added before the first reconcile
//!   (kube's `finalizer` helper), as the host adds one for the greeting plugin built with a
//!   cleanup (`fixture-greeting-cleanup`);
//! - generation-aware: only spec changes (and finalizer changes, with one; and the first sight
//!   of an object) reconcile, as the host's default change filter;
//! - the status merge patch the host writes: `message`, `observedGeneration` and the `Ready`,
//!   `Reconciling` and `Degraded` conditions, only when it changes;
//! - at most CONCURRENCY (default 8, the host's `--plugin-concurrency`) reconciles at once;
//! - a tokio runtime of `WASMOP_WORKER_THREADS` worker threads (as the host's
//!   `--worker-threads` reads it), default the available parallelism, as `#[tokio::main]`;
//! - lean, as kube's optimization guide has it: objects lose their `managedFields` and
//!   annotations as they arrive (`watcher(...).modify(...)`), before they enter its cache, and
//!   keep only what the reconcile reads (metadata, `spec`, `status`).

mod webhook;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::finalizer::{Event, finalizer};
use kube::runtime::{Predicate, predicates};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

/// The condition `type_` as the host writes it, keeping `lastTransitionTime` unless the status
/// changes.
fn condition(current: &Value, type_: &str, status: bool, message: &str, generation: Option<i64>, now: &str) -> Value {
    let status = if status { "True" } else { "False" };
    let before = current["conditions"].as_array().and_then(|cs| cs.iter().find(|c| c["type"] == type_));
    let since = match before {
        Some(c) if c["status"] == status => c["lastTransitionTime"].clone(),
        _ => json!(now),
    };
    json!({ "type": type_, "status": status, "reason": "Ready", "message": message,
            "observedGeneration": generation, "lastTransitionTime": since })
}

/// The finalizer the host gives the Greetings of a plugin with a cleanup.
const FINALIZER: &str = "wasmop.dev/greeting";

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error("{0}")]
    Api(#[from] kube::Error),
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<kube::Error>>),
}

/// What the reconciles share: the Greetings' API, and whether they hold a finalizer.
struct Shared {
    api: Api<DynamicObject>,
    finalizer: bool,
}

/// The greeting plugin's reconcile, with its finalizer (and an empty cleanup) when it has one.
async fn reconcile(greeting: Arc<DynamicObject>, shared: Arc<Shared>) -> Result<Action, Failure> {
    if !shared.finalizer {
        return Ok(greet(greeting, &shared.api).await?);
    }
    finalizer(&shared.api, FINALIZER, greeting, |event| async {
        match event {
            Event::Apply(greeting) => greet(greeting, &shared.api).await,
            Event::Cleanup(_) => Ok(Action::await_change()),
        }
    })
    .await
    .map_err(|e| Failure::Finalizer(Box::new(e)))
}

/// The greeting plugin's work: greet `spec.name` and report Ready.
async fn greet(greeting: Arc<DynamicObject>, api: &Api<DynamicObject>) -> Result<Action, kube::Error> {
    let generation = greeting.metadata.generation;
    let current = &greeting.data["status"];
    let message = format!("Hello, {}!", greeting.data["spec"]["name"].as_str().unwrap_or_default());
    let now = k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let status = json!({
        "message": message,
        "observedGeneration": generation,
        "conditions": [
            condition(current, "Ready", true, "greeted", generation, &now),
            condition(current, "Reconciling", false, "", generation, &now),
            condition(current, "Degraded", false, "", generation, &now),
        ],
    });
    if *current != status {
        api.patch_status(&greeting.name_any(), &PatchParams::default(), &Patch::Merge(json!({ "status": status })))
            .await?;
    }
    Ok(Action::await_change())
}

fn error_policy(_: Arc<DynamicObject>, error: &Failure, _: Arc<Shared>) -> Action {
    eprintln!("reconcile failed: {error}");
    Action::requeue(Duration::from_secs(1))
}

/// The runtime's worker threads: `WASMOP_WORKER_THREADS`, else the available parallelism.
fn worker_threads() -> anyhow::Result<usize> {
    match std::env::var("WASMOP_WORKER_THREADS") {
        Ok(n) => {
            let n: usize = n.parse()?;
            anyhow::ensure!(n > 0, "WASMOP_WORKER_THREADS must be at least 1");
            Ok(n)
        }
        Err(_) => Ok(std::thread::available_parallelism()?.get()),
    }
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(worker_threads()?).enable_all().build()?;
    runtime.block_on(run())
}

/// Reconciles the Greetings of the namespace of the command line until killed, or serves the
/// webpage plugin's webhooks (`webhook ADDRESS CERT KEY`).
async fn run() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: wasmop-native NAMESPACE [CONCURRENCY] [--finalizer] [--group GROUP], \
                 or wasmop-native webhook ADDRESS CERT KEY";
    let namespace = args.next().ok_or_else(|| anyhow::anyhow!(usage))?;
    if namespace == "webhook" {
        let mut next = || args.next().ok_or_else(|| anyhow::anyhow!(usage));
        let (address, cert, key) = (next()?.parse()?, next()?, next()?);
        return webhook::serve(address, cert.as_ref(), key.as_ref()).await;
    }
    let concurrency: u16 = args.next().map(|c| c.parse()).transpose()?.unwrap_or(8);
    let (mut finalizer, mut group) = (false, "example.wasmop.dev".to_string());
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--finalizer" => finalizer = true,
            "--group" => group = args.next().ok_or_else(|| anyhow::anyhow!(usage))?,
            other => anyhow::bail!("unexpected argument {other:?}; {usage}"),
        }
    }
    let client = Client::try_default().await?;
    let gvk = GroupVersionKind::gvk(&group, "v1", "Greeting");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "greetings");
    let api: Api<DynamicObject> = Api::namespaced_with(client, &namespace, &resource);
    // Spec changes only, as the host's generation-aware filter; finalizer changes too with one:
    // the finalizer helper's own patch must come back as an event, it is the next step.
    type Property = fn(&DynamicObject) -> Option<u64>;
    let finalizers: Property = if finalizer { predicates::finalizers } else { |_| None };
    let writer = reflector::store::Writer::new(resource.clone());
    let store = writer.as_reader();
    let changes = watcher(api.clone(), watcher::Config::default())
        .default_backoff()
        .modify(|greeting| {
            greeting.managed_fields_mut().clear();
            greeting.annotations_mut().clear();
            if let Some(fields) = greeting.data.as_object_mut() {
                fields.retain(|key, _| key == "spec" || key == "status");
            }
        })
        .reflect(writer)
        .applied_objects()
        .predicate_filter((predicates::generation as Property).combine(finalizers), Default::default());
    Controller::for_stream_with(changes, store, resource)
        .with_config(Config::default().concurrency(concurrency))
        .run(reconcile, error_policy, Arc::new(Shared { api, finalizer }))
        .for_each(|_| async {})
        .await;
    Ok(())
}
