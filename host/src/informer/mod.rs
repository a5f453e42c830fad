//! Informers: `kube` watchers over dynamic objects feeding reflector stores, shared between
//! controllers through the [`Registry`], and the guest's view of those caches.

use std::sync::Arc;

use futures::Stream;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

use crate::runtime::CacheReader;
use crate::runtime::bindings::wasmop::plugin::types::KindRef;
use crate::selector::LabelSelector;

mod registry;

pub use registry::{Registry, SharedEvent, Subscription, WatchKey};

/// Errors of setting up a watch.
#[derive(Debug, thiserror::Error)]
pub enum InformerError {
    /// The API server does not serve the kind (for example, its CRD is not installed).
    #[error("the API server does not serve {group}/{version} {kind}: {source}")]
    DiscoveryFailed {
        /// API group.
        group: String,
        /// API version.
        version: String,
        /// Kind.
        kind: String,
        /// The discovery error.
        #[source]
        source: kube::Error,
    },
}

/// Resolves a kind to an [`ApiResource`]: from the plural the plugin gave, else by discovery.
pub async fn resolve(client: &Client, kind: &KindRef) -> Result<ApiResource, InformerError> {
    let gvk = GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind);
    if let Some(plural) = &kind.plural {
        return Ok(ApiResource::from_gvk_with_plural(&gvk, plural));
    }
    kube::discovery::pinned_kind(client, &gvk).await.map(|(ar, _)| ar).map_err(|source| {
        InformerError::DiscoveryFailed {
            group: kind.group.clone(),
            version: kind.version.clone(),
            kind: kind.kind.clone(),
            source,
        }
    })
}

/// Server-side selectors of a watch.
#[derive(Debug, Clone, Copy, Default)]
pub struct Selectors<'a> {
    /// Label selector, Kubernetes syntax.
    pub labels: Option<&'a str>,
    /// Field selector, Kubernetes syntax.
    pub fields: Option<&'a str>,
}

/// A watch of one kind, optionally in one namespace and filtered by selectors, with managed
/// fields trimmed before objects enter the store.
pub fn watch(
    client: Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    selectors: Selectors<'_>,
) -> (Store<DynamicObject>, impl Stream<Item = Result<watcher::Event<DynamicObject>, watcher::Error>> + Send + 'static)
{
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client, ns, resource),
        None => Api::all_with(client, resource),
    };
    let mut config = watcher::Config::default();
    if let Some(labels) = selectors.labels {
        config = config.labels(labels);
    }
    if let Some(fields) = selectors.fields {
        config = config.fields(fields);
    }
    let writer = Writer::new(resource.clone());
    let store = writer.as_reader();
    let stream = reflector::reflector(
        writer,
        watcher(api, config).default_backoff().modify(|o: &mut DynamicObject| o.managed_fields_mut().clear()),
    );
    (store, stream)
}

/// The guest's view of the host cache: the objects of the watched kinds.
#[derive(Clone)]
pub struct WatchedCache {
    kinds: Vec<(KindRef, ApiResource, Store<DynamicObject>)>,
}

impl WatchedCache {
    /// A cache over one store per watched kind.
    pub fn new(kinds: Vec<(KindRef, ApiResource, Store<DynamicObject>)>) -> Arc<Self> {
        Arc::new(Self { kinds })
    }

    fn store_for(&self, kind: &KindRef) -> Result<(&ApiResource, &Store<DynamicObject>), String> {
        self.kinds
            .iter()
            .find(|(k, _, _)| k.group == kind.group && k.version == kind.version && k.kind == kind.kind)
            .map(|(_, ar, store)| (ar, store))
            .ok_or_else(|| {
                let group = if kind.group.is_empty() { "core" } else { &kind.group };
                format!(
                    "{group}/{} {} is not watched by this plugin; only watched kinds can be read",
                    kind.version, kind.kind
                )
            })
    }
}

fn to_json(object: &DynamicObject) -> Result<String, String> {
    serde_json::to_string(object).map_err(|e| format!("cannot serialize cached object: {e}"))
}

impl CacheReader for WatchedCache {
    fn get(&self, kind: &KindRef, namespace: Option<&str>, name: &str) -> Result<Option<String>, String> {
        let (ar, store) = self.store_for(kind)?;
        let mut key = ObjectRef::new_with(name, ar.clone());
        if let Some(ns) = namespace {
            key = key.within(ns);
        }
        store.get(&key).map(|o| to_json(&o)).transpose()
    }

    fn list(&self, kind: &KindRef, namespace: Option<&str>, selector: Option<&str>) -> Result<Vec<String>, String> {
        let (_, store) = self.store_for(kind)?;
        let selector: LabelSelector = selector.unwrap_or("").parse().map_err(|e| format!("{e}"))?;
        let mut objects = store.state_filter(|o: &DynamicObject| {
            namespace.is_none_or(|ns| o.metadata.namespace.as_deref() == Some(ns)) && selector.matches(o.labels())
        });
        objects
            .sort_by(|a, b| (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name)));
        objects.iter().map(|o| to_json(o)).collect()
    }
}
