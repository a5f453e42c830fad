//! Wires one plugin: primary informer -> change filter -> scheduler -> sandboxed reconcile ->
//! writer. Glue only: each step lives in its own module.

mod filter;
mod reconcile;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::runtime::watcher;
use tokio_util::sync::CancellationToken;

pub use filter::ChangeFilter;

use crate::informer::{self, WatchedCache};
use crate::object::ObjectKey;
use crate::retry::RetryPolicy;
use crate::runtime::Module;
use crate::runtime::bindings::wasmop::plugin::types::PluginConfig;
use crate::scheduler::{self, Settings};
use crate::writer::Writer;
use reconcile::Reconciler;

/// How long to wait before asking the API server again about a kind it does not serve.
const DISCOVERY_RETRY: Duration = Duration::from_secs(5);

/// The default maximum reconciliation interval (JOSDK: 10 hours).
pub const DEFAULT_MAX_RECONCILE_INTERVAL: Duration = Duration::from_secs(10 * 3600);

/// Deployment-time settings of a controller.
#[derive(Debug, Clone)]
pub struct ControllerSettings {
    /// Watch only this namespace; `None` watches all.
    pub namespace: Option<String>,
    /// Concurrent reconciles of this plugin.
    pub max_concurrent: usize,
}

/// Runs the controller of `module` until `shutdown` fires; reconciles in flight then finish.
pub async fn run(module: Arc<Module>, client: Client, settings: ControllerSettings, shutdown: CancellationToken) {
    let config = module.config().clone();
    let plugin = config.name.clone();
    let resource = loop {
        match informer::resolve(&client, &config.primary).await {
            Ok(resource) => break resource,
            Err(err) => {
                tracing::error!(plugin, %err, "cannot watch the primary kind; retrying in {DISCOVERY_RETRY:?}");
                tokio::select! {
                    _ = tokio::time::sleep(DISCOVERY_RETRY) => {}
                    _ = shutdown.cancelled() => return,
                }
            }
        }
    };
    let (store, events) =
        informer::watch(client.clone(), &resource, settings.namespace.as_deref(), config.label_selector.as_deref());
    let reconciler = Arc::new(Reconciler {
        module: module.clone(),
        cache: WatchedCache::new(vec![(config.primary.clone(), resource.clone(), store.clone())]),
        writer: Writer::new(client, resource.clone(), &plugin),
        resource,
        store,
        max_interval: max_interval(&config),
    });
    let (handle, inbox) = scheduler::channel();
    let scheduler_settings = Settings { max_concurrent: settings.max_concurrent, retry: retry_policy(&config) };
    let scheduler = tokio::spawn(scheduler::run(inbox, scheduler_settings, move |run| reconciler.clone().run(run)));

    tracing::info!(plugin, kind = %config.primary.kind, namespace = ?settings.namespace, "controller started");
    let mut filter = ChangeFilter::new(config.generation_aware);
    let mut events = std::pin::pin!(events);
    loop {
        let event = tokio::select! {
            event = events.next() => event,
            _ = shutdown.cancelled() => break,
        };
        match event {
            Some(Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object))) => {
                if let Some(key) = ObjectKey::of(&object)
                    && filter.admit(&key, &object.metadata)
                {
                    handle.trigger(key);
                }
            }
            Some(Ok(watcher::Event::Delete(object))) => {
                if let Some(key) = ObjectKey::of(&object) {
                    filter.forget(&key);
                    handle.forget(key);
                }
            }
            Some(Ok(watcher::Event::Init)) => tracing::debug!(plugin, "listing primaries"),
            Some(Ok(watcher::Event::InitDone)) => tracing::info!(plugin, "primary cache synced"),
            Some(Err(err)) => tracing::warn!(plugin, %err, "watch failed; retrying with backoff"),
            None => break,
        }
    }
    drop(handle);
    if let Err(err) = scheduler.await {
        tracing::error!(plugin, %err, "scheduler stopped abnormally");
    }
    tracing::info!(plugin, "controller stopped");
}

fn retry_policy(config: &PluginConfig) -> RetryPolicy {
    match &config.retry {
        Some(r) => RetryPolicy {
            max_attempts: r.max_attempts,
            initial_interval: Duration::from_millis(r.initial_interval_ms),
            multiplier: r.multiplier,
            max_interval: Duration::from_millis(r.max_interval_ms),
        },
        None => RetryPolicy::default(),
    }
}

fn max_interval(config: &PluginConfig) -> Option<Duration> {
    match config.max_reconcile_interval_ms {
        None => Some(DEFAULT_MAX_RECONCILE_INTERVAL),
        Some(0) => None,
        Some(ms) => Some(Duration::from_millis(ms)),
    }
}
