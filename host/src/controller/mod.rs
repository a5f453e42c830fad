//! Wires one plugin: primary informer -> change filter -> scheduler -> sandboxed reconcile ->
//! writer. Glue only: each step lives in its own module.

mod filter;
mod reconcile;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::runtime::watcher;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

pub use filter::{ChangeFilter, Filters};

use crate::informer::{self, Registry, WatchedCache};
use crate::object::ObjectKey;
use crate::runtime::Module;
use crate::scheduler::{self, Priority, Settings};
use crate::settings::Resolved;
use crate::writer::Writer;
use reconcile::Reconciler;

/// How long to wait before asking the API server again about a kind it does not serve.
const DISCOVERY_RETRY: Duration = Duration::from_secs(5);

/// How long an initial-list or resync reconcile yields to live changes before it alternates.
const BACKGROUND_AGING: Duration = Duration::from_secs(5);

/// Runs the controller of `module` with its effective `settings` until `shutdown` fires;
/// reconciles in flight then finish. Runs hold a permit of `global` while in flight.
pub async fn run(
    module: Arc<Module>,
    client: Client,
    registry: Arc<Registry>,
    settings: Resolved,
    global: Option<Arc<Semaphore>>,
    shutdown: CancellationToken,
) {
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
    let selectors =
        informer::Selectors { labels: settings.label_selector.as_deref(), fields: settings.field_selector.as_deref() };
    // Held for the controller's life: the shared watch stops when its last subscriber goes.
    let subscription = registry.subscribe(&resource, settings.namespace.as_deref(), selectors);
    let store = subscription.store();
    let events = subscription.events();
    let reconciler = Arc::new(Reconciler {
        module: module.clone(),
        cache: WatchedCache::new(vec![(config.primary.clone(), resource.clone(), store.clone())]),
        writer: Writer::new(client, resource.clone(), &plugin),
        resource,
        store,
    });
    let (handle, inbox) = scheduler::channel();
    let scheduler_settings = Settings {
        max_concurrent: settings.max_concurrent,
        global,
        retry: settings.retry.clone(),
        max_interval: settings.max_interval,
        rate_limit: settings.rate_limit,
        aging: BACKGROUND_AGING,
    };
    // The scheduler starts once the cache is synced; triggers wait in its inbox until then.
    let mut unstarted = Some((inbox, scheduler_settings, reconciler));
    let mut scheduler = None;

    tracing::info!(plugin, kind = %config.primary.kind, namespace = ?settings.namespace, "controller started");
    let mut filter = ChangeFilter::new(settings.filters.clone());
    // Keys of the list in progress, to find objects deleted while the watch was down.
    let mut listed = HashSet::new();
    let mut events = std::pin::pin!(events);
    loop {
        let event = tokio::select! {
            event = events.next() => event,
            _ = shutdown.cancelled() => break,
        };
        match event {
            Some(watcher::Event::Apply(object)) => {
                if let Some(key) = ObjectKey::of(&object)
                    && filter.admit(&key, &object.metadata)
                {
                    handle.trigger_with(key, Priority::Live);
                }
            }
            // The initial list (and re-lists after a watch restart) must not starve live changes.
            Some(watcher::Event::InitApply(object)) => {
                if let Some(key) = ObjectKey::of(&object) {
                    listed.insert(key.clone());
                    if filter.admit(&key, &object.metadata) {
                        handle.trigger_with(key, Priority::Background);
                    }
                }
            }
            Some(watcher::Event::Delete(object)) => {
                if let Some(key) = ObjectKey::of(&object) {
                    filter.forget(&key);
                    handle.forget(key);
                }
            }
            Some(watcher::Event::Init) => {
                listed.clear();
                tracing::debug!(plugin, "listing primaries");
            }
            Some(watcher::Event::InitDone) => {
                for key in filter.retain_listed(&std::mem::take(&mut listed)) {
                    handle.forget(key);
                }
                if let Some((inbox, scheduler_settings, reconciler)) = unstarted.take() {
                    tracing::info!(plugin, "primary cache synced; reconciling");
                    let run = move |run| reconciler.clone().run(run);
                    scheduler = Some(tokio::spawn(scheduler::run(inbox, scheduler_settings, run)));
                }
            }
            None => break,
        }
    }
    drop(handle);
    drop(subscription);
    if let Some(scheduler) = scheduler
        && let Err(err) = scheduler.await
    {
        tracing::error!(plugin, %err, "scheduler stopped abnormally");
    }
    tracing::info!(plugin, "controller stopped");
}
