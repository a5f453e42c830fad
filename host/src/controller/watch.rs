//! Read: the informers one controller reads. Resolves the primary kind and subscribes to its
//! watch, to the declared watches and to one watch per dependent kind (by the management label),
//! each in the namespace and with the shape (projection, bounded cache pool, shards) it takes.

use std::sync::{Arc, RwLock};

use kube::api::ApiResource;
use tokio_util::sync::CancellationToken;

use super::coverage;
use super::unserved::{self, Declared, Waiting};
use crate::dependents::OwnWrites;
use crate::informer::{self, CachedKind, Clusters, Subscription, WatchedCache};
use crate::mapping::Links;
use crate::metrics::Metrics;
use crate::runtime::bindings::wasmop::plugin::types::{PluginConfig, Watch};
use crate::settings::Resolved;
use crate::wire::PrimaryReads;

/// A declared watch, subscribed.
pub(super) struct Secondary {
    pub(super) watch: Watch,
    pub(super) resource: ApiResource,
    pub(super) subscription: Subscription,
    pub(super) links: Arc<RwLock<Links>>,
}

/// Subscribes to the plugin's declared watches, each in the namespace
/// [`coverage::namespace_of`] gives it.
fn subscribe_all(
    watches: &[Watch],
    resources: &[ApiResource],
    clusters: &Clusters,
    primary_namespace: Option<&str>,
    plugin: &str,
    pool: Option<&informer::Pool>,
    sharded: Option<&informer::ShardedWatch>,
) -> Option<Vec<Secondary>> {
    let mut secondaries = Vec::with_capacity(watches.len());
    for (watch, resource) in watches.iter().zip(resources) {
        let registry = match clusters.get(watch.cluster.as_deref()) {
            Ok(registry) => registry,
            Err(err) => {
                // The host checks clusters before it starts a controller; this is a safety net.
                tracing::error!(plugin, %err, "cannot watch {}", watch.kind.kind);
                return None;
            }
        };
        let namespace = coverage::namespace_of(watch, primary_namespace);
        let selectors =
            informer::Selectors { labels: watch.label_selector.as_deref(), fields: watch.field_selector.as_deref() };
        let shape = informer::Shape {
            projection: watch.projection.as_deref().map(Arc::from),
            pool: pool.cloned(),
            // Only the dependents of the primary's own namespace (a watch of another cluster
            // or namespace stays whole).
            shard: sharded.filter(|_| watch.cluster.is_none() && watch.namespace.is_none()).cloned(),
        };
        let subscription = registry.subscribe(resource, namespace, selectors, &shape);
        let links = Arc::new(RwLock::new(crate::mapping::links_for(&watch.mapper)));
        secondaries.push(Secondary { watch: watch.clone(), resource: resource.clone(), subscription, links });
    }
    Some(secondaries)
}

/// The informers one controller reads: the primary's, and one per declared watch and dependent.
pub(super) struct Watched {
    /// Held for the controller's life: a shared watch stops when its last subscriber goes.
    pub(super) subscription: Subscription,
    /// The primary's API resource.
    pub(super) resource: ApiResource,
    pub(super) primaries: informer::Cache,
    pub(super) secondaries: Vec<Secondary>,
    /// Everything the plugin may read.
    pub(super) cache: Arc<WatchedCache>,
    /// The own-write records of each secondary watch: the dependents' watches have one.
    pub(super) owns: Vec<Option<Arc<OwnWrites>>>,
}

/// Resolves when a watch's kind is no longer served.
pub(super) type Gone = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

impl Watched {
    /// Resolves once any watch answers that its kind is no longer served.
    pub(super) fn unserved(&self) -> futures::future::SelectAll<Gone> {
        let gone = std::iter::once(&self.subscription).chain(self.secondaries.iter().map(|s| &s.subscription));
        futures::future::select_all(gone.map(|s| -> Gone { Box::pin(s.unserved()) }))
    }
}

/// Read: resolves the primary kind and subscribes to its watch, the declared watches and one
/// watch per dependent kind (by the management label). `base` says how the plugin's caches are
/// kept: the pool of its bounded caches (primary and declared watches), and its shards (the
/// primary's watch, and the dependents' when sharded by namespace). `None` when `shutdown`
/// fired first.
pub(super) async fn watch(
    config: &PluginConfig,
    clusters: &Clusters,
    settings: &Resolved,
    metrics: &Metrics,
    base: &informer::Shape,
    waiting: &Waiting<'_>,
    shutdown: &CancellationToken,
) -> Option<Watched> {
    let (pool, sharded) = (base.pool.as_ref(), base.shard.as_ref());
    let plugin = &config.name;
    let local = clusters.local();
    // The dependents' caches stay whole: the workflow reads them between its writes.
    let dependent_watches: Vec<Watch> =
        config.dependents.iter().map(|d| coverage::dependent_watch(config, d)).collect();
    let watches: Vec<&Watch> = config.watches.iter().chain(&dependent_watches).collect();
    let mut declared = vec![Declared { kind: &config.primary, client: local.client() }];
    for watch in &watches {
        match clusters.get(watch.cluster.as_deref()) {
            Ok(registry) => declared.push(Declared { kind: &watch.kind, client: registry.client() }),
            Err(err) => {
                // The host checks clusters before it starts a controller; this is a safety net.
                tracing::error!(plugin, %err, "cannot watch {}", watch.kind.kind);
                return None;
            }
        }
    }
    let mut resources = unserved::resolve_all(&declared, waiting, shutdown).await?.into_iter();
    let resource = resources.next().expect("the primary's resource comes first");
    let resources: Vec<ApiResource> = resources.collect();
    let selectors =
        informer::Selectors { labels: settings.label_selector.as_deref(), fields: settings.field_selector.as_deref() };
    // The host reads the primary's status (to write only changes), whatever the plugin reads.
    let projection = config
        .projection
        .as_ref()
        .map(|paths| paths.iter().cloned().chain(std::iter::once("status".to_string())).collect::<Vec<_>>().into());
    let shape = informer::Shape { projection, ..base.clone() };
    let subscription = local.subscribe(&resource, settings.namespace.as_deref(), selectors, &shape);
    let namespace = settings.namespace.as_deref();
    let (declared_resources, dependent_resources) = resources.split_at(config.watches.len());
    let mut secondaries = subscribe_all(&config.watches, declared_resources, clusters, namespace, plugin, pool, None)?;
    // A namespace keeps its dependents on its replica: their watches are sharded alike.
    let by_namespace = sharded.filter(|s| s.key == wasmop_core::shard::ShardKey::Namespace);
    secondaries.extend(subscribe_all(
        &dependent_watches,
        dependent_resources,
        clusters,
        namespace,
        plugin,
        None,
        by_namespace,
    )?);
    let primaries = subscription.cache();
    let cache = cached(config, &primaries, &secondaries);
    // The dependents' own writes, per dependent watch.
    let records = || Arc::new(OwnWrites::counted_in(metrics.own_write_records(plugin)));
    let owns = (0..secondaries.len()).map(|i| (i >= config.watches.len()).then(records)).collect();
    Some(Watched { subscription, resource, primaries, cache, owns, secondaries })
}

/// What the plugin may read: the primaries (as much of them as it reads) and each watch's cache.
fn cached(config: &PluginConfig, primaries: &informer::Cache, secondaries: &[Secondary]) -> Arc<WatchedCache> {
    let mut kinds = vec![CachedKind {
        kind: config.primary.clone(),
        cache: primaries.clone(),
        links: None,
        reads: PrimaryReads::new(config.projection.as_deref()),
    }];
    kinds.extend(secondaries.iter().map(|s| CachedKind {
        kind: s.watch.kind.clone(),
        cache: s.subscription.cache(),
        links: Some(s.links.clone()),
        reads: PrimaryReads::default(),
    }));
    WatchedCache::new(kinds)
}
