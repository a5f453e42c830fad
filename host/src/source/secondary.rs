//! The secondary source: events of one declared watch, mapped to the primaries they concern
//! (JOSDK's InformerEventSource with its SecondaryToPrimaryMapper), which keeps the watch's
//! [`Links`] current for the guest's `secondaries` import.

use std::sync::{Arc, RwLock};

use futures::{Stream, StreamExt};
use kube::ResourceExt;
use kube::runtime::watcher;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use wasmop_core::table::KeyMap;

use super::Sink;
use super::filter::EventFilter;
use crate::informer::{Listing, SharedEvent, WatchedCache};
use crate::mapping::{Links, PrimaryKind};
use crate::object::ObjectKey;
use crate::own_writes::OwnWrites;
use crate::runtime::bindings::wasmop::plugin::types::Owners;
use crate::runtime::{CacheReader, Current};
use crate::scheduler::Priority;
use crate::wire::Object;

/// How a source finds the primaries of a changed secondary.
pub enum Mapping {
    /// Owner references to the primary kind.
    Owners(Owners),
    /// The primary-name and primary-namespace annotations.
    Annotations,
    /// The plugin's `map-secondary` export, which may read the plugin's cache.
    Plugin(Arc<Current>, Arc<WatchedCache>),
    /// The primaries whose `secondaries-of` named the secondary (the controller keeps those).
    PrimaryReferences,
}

/// One declared watch of one plugin, mapped to its primaries.
pub struct SecondarySource {
    /// The plugin, for logs.
    pub plugin: String,
    /// The watched kind, for logs.
    pub kind: String,
    /// The primary kind.
    pub primary: PrimaryKind,
    /// How changes map to primaries.
    pub mapping: Mapping,
    /// The watch's links to primaries, shared with the guest's cache view.
    pub links: Arc<RwLock<Links>>,
    /// The host's own writes of these objects (dependents), whose events reconcile nothing.
    pub own: Option<Arc<OwnWrites>>,
    /// The watch's predicate, if it declares one: only the changes it passes map to primaries.
    pub filter: Option<EventFilter>,
    /// The events that passed the predicate or not (not counted: the first list, own writes).
    pub events: crate::metrics::WatchEvents,
}

/// What the source remembers of the objects it has seen.
#[derive(Default)]
struct Seen {
    /// Resource versions, to tell a re-listed unchanged object from a changed one.
    versions: KeyMap<ObjectKey, String>,
    /// The last version of each object, for the plugin mapper's `previous` argument.
    objects: KeyMap<ObjectKey, Arc<Object>>,
    /// The list in progress: its keys find objects deleted while the watch was down, and the
    /// primaries its changes concern are enqueued when it ends.
    listing: Option<Listing>,
}

impl SecondarySource {
    /// Maps `events` to primaries in `sink` until `shutdown` or the end of the stream. The
    /// first list only builds the links (every primary is reconciled at start anyway) and then
    /// reports through `synced`; later changes, re-lists included, enqueue primaries live.
    pub async fn run(
        mut self,
        events: impl Stream<Item = SharedEvent>,
        sink: Arc<dyn Sink>,
        synced: oneshot::Sender<()>,
        shutdown: CancellationToken,
    ) {
        let mut synced = Some(synced);
        let mut seen = Seen::default();
        let mut events = std::pin::pin!(events);
        loop {
            let event = tokio::select! {
                event = events.next() => event,
                _ = shutdown.cancelled() => return,
            };
            let Some(event) = event else { return };
            let quiet = synced.is_some();
            let affected = match event {
                watcher::Event::Init => {
                    seen.listing.get_or_insert_with(Listing::default).restart();
                    Vec::new()
                }
                watcher::Event::InitApply(object) => {
                    let Some(key) = crate::object::key_of(&object) else { continue };
                    // Settles the record of a write the list shows (or shows superseded).
                    self.is_own(&key, object.resource_version().as_deref());
                    let unchanged = seen.versions.get(&key).map(String::as_str) == object.resource_version().as_deref();
                    let affected = if unchanged {
                        Vec::new()
                    } else {
                        // The first list reconciles nothing: its versions are only recorded.
                        let passes = self.passes(&key, &object, !quiet).await;
                        let affected = self.changed(&mut seen, key.clone(), object).await;
                        if passes { affected } else { Vec::new() }
                    };
                    if let Some(listing) = &mut seen.listing {
                        listing.listed(key);
                        listing.defer(affected);
                    }
                    continue;
                }
                watcher::Event::Apply(object) => {
                    let Some(key) = crate::object::key_of(&object) else { continue };
                    let own = self.is_own(&key, object.resource_version().as_deref());
                    let passes = self.passes(&key, &object, !own && !quiet).await;
                    let affected = self.changed(&mut seen, key, object).await;
                    if own || !passes { Vec::new() } else { affected }
                }
                watcher::Event::Delete(object) => {
                    let Some(key) = crate::object::key_of(&object) else { continue };
                    let own = self.is_own(&key, None);
                    let passes = self.deletion_passes(&key, Some(&object), !own).await;
                    let affected = self.deleted(&mut seen, &key);
                    if passes { affected } else { Vec::new() }
                }
                watcher::Event::InitDone => {
                    let (listed, changed) = seen.listing.take().unwrap_or_default().end();
                    if let Some(own) = &self.own {
                        own.relisted(&listed);
                    }
                    let gone: Vec<ObjectKey> = seen.versions.keys().filter(|k| !listed.contains(*k)).cloned().collect();
                    let mut affected = changed;
                    for key in &gone {
                        let passes = self.deletion_passes(key, None, true).await;
                        let primaries = self.deleted(&mut seen, key);
                        affected.extend(primaries.into_iter().filter(|_| passes));
                    }
                    if let Some(synced) = synced.take() {
                        tracing::debug!(plugin = self.plugin, kind = self.kind, "secondary cache synced");
                        let _ = synced.send(());
                    }
                    affected
                }
            };
            if !quiet {
                for key in affected {
                    sink.enqueue(key, Priority::Live);
                }
            }
        }
    }

    /// Whether the new version `object` of `key` passes the watch's predicate, when `decide`
    /// (counted); when not, it is only recorded (the first list, the host's own writes).
    async fn passes(&mut self, key: &ObjectKey, object: &Arc<Object>, decide: bool) -> bool {
        let Some(filter) = &mut self.filter else {
            if decide {
                self.events.count(true);
            }
            return true;
        };
        let observed = filter.observe(key, object);
        if !decide || !observed.is_change() {
            return false;
        }
        let passes = filter.decide(observed, object).await;
        self.events.count(passes);
        passes
    }

    /// Whether the deletion of `key` (its last version `object`, if the event gives it) passes
    /// the watch's predicate, when `decide` (counted); when not, it is only forgotten.
    async fn deletion_passes(&mut self, key: &ObjectKey, object: Option<&Object>, decide: bool) -> bool {
        let passes = match &mut self.filter {
            Some(filter) if !decide => {
                filter.forget(key);
                false
            }
            Some(filter) => filter.deleted(key, object).await,
            None => decide,
        };
        if decide {
            self.events.count(passes);
        }
        passes
    }

    /// Whether the event of `key` at `version` (`None`: deleted) is the host's own write.
    fn is_own(&self, key: &ObjectKey, version: Option<&str>) -> bool {
        self.own.as_ref().is_some_and(|own| own.consume(key, version, true))
    }

    /// Records a new or changed secondary; returns the primaries it concerns now or did before.
    async fn changed(&self, seen: &mut Seen, key: ObjectKey, object: Arc<Object>) -> Vec<ObjectKey> {
        let targets = match &self.mapping {
            Mapping::Owners(which) => crate::mapping::owners(&self.primary, &object.metadata, *which),
            Mapping::Annotations => crate::mapping::annotated(&self.primary, &object.metadata).into_iter().collect(),
            Mapping::PrimaryReferences => Vec::new(),
            Mapping::Plugin(module, cache) => {
                let previous = seen.objects.get(&key).cloned();
                match map_with_plugin(module, cache, &object, previous).await {
                    Ok(refs) => crate::mapping::named(&self.primary, object.metadata.namespace.as_deref(), refs),
                    Err(err) => {
                        tracing::warn!(plugin = self.plugin, kind = self.kind, object = %key, %err,
                            "map-secondary failed; the primaries it named before are reconciled");
                        self.links.read().expect("links are never poisoned").current(&key)
                    }
                }
            }
        };
        if let Some(version) = object.resource_version() {
            seen.versions.insert(key.clone(), version);
        }
        if matches!(self.mapping, Mapping::Plugin(..)) {
            seen.objects.insert(key.clone(), object);
        }
        self.links.write().expect("links are never poisoned").secondary_changed(&key, targets)
    }

    /// Forgets a deleted secondary; returns the primaries it concerned.
    fn deleted(&self, seen: &mut Seen, key: &ObjectKey) -> Vec<ObjectKey> {
        seen.versions.swap_remove(key);
        seen.objects.swap_remove(key);
        self.links.write().expect("links are never poisoned").secondary_deleted(key)
    }
}

/// Calls the plugin's `map-secondary` on the blocking pool.
async fn map_with_plugin(
    module: &Current,
    cache: &Arc<WatchedCache>,
    object: &Object,
    previous: Option<Arc<Object>>,
) -> Result<Vec<crate::runtime::bindings::wasmop::plugin::types::ObjectRef>, String> {
    let secondary = serde_json::to_string(object).map_err(|e| format!("cannot serialize the secondary: {e}"))?;
    let previous = previous
        .map(|p| serde_json::to_string(&*p))
        .transpose()
        .map_err(|e| format!("cannot serialize the previous secondary: {e}"))?;
    let cache = cache.clone() as Arc<dyn CacheReader>;
    let call = module.get().map_secondary(cache, &secondary, previous.as_deref()).await;
    call.map_err(|trap| trap.to_string())?
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kube::api::{ApiResource, GroupVersionKind};

    use super::*;
    use crate::runtime::bindings::wasmop::plugin::types::Mapper;
    use crate::source::testing::Recorder;

    fn key(name: &str) -> ObjectKey {
        ObjectKey { namespace: Some("ns".into()), name: name.into() }
    }

    fn source(mapping: Mapping, mapper: &Mapper) -> SecondarySource {
        SecondarySource {
            plugin: "p".into(),
            kind: "ConfigMap".into(),
            primary: PrimaryKind { group: "test.wasmop.dev".into(), kind: "Link".into(), namespaced: true },
            mapping,
            links: Arc::new(RwLock::new(crate::mapping::links_for(mapper))),
            own: None,
            filter: None,
            events: crate::metrics::WatchEvents::default(),
        }
    }

    fn annotated(name: &str, version: &str, primary: &str) -> Arc<Object> {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        let mut object = Object::new(name, &resource).within("ns");
        object.metadata.resource_version = Some(version.into());
        object.metadata.annotations =
            Some(BTreeMap::from([(crate::mapping::PRIMARY_NAME_ANNOTATION.to_string(), primary.to_string())]));
        Arc::new(object)
    }

    /// Runs `source` over `events`; returns what it enqueued and whether it reported sync.
    async fn run(source: SecondarySource, events: Vec<SharedEvent>) -> (Vec<ObjectKey>, bool) {
        let sink = Arc::new(Recorder::default());
        let (synced, mut ready) = oneshot::channel();
        source.run(futures::stream::iter(events), sink.clone(), synced, CancellationToken::new()).await;
        let keys = sink.take().into_iter().map(|(key, priority)| {
            assert_eq!(priority, Priority::Live);
            key
        });
        (keys.collect(), ready.try_recv().is_ok())
    }

    #[tokio::test]
    async fn the_first_list_builds_links_quietly_then_changes_reconcile_old_and_new_primaries() {
        let source = source(Mapping::Annotations, &Mapper::Annotations);
        let links = source.links.clone();
        let events = vec![
            watcher::Event::Init,
            watcher::Event::InitApply(annotated("cm", "1", "a")),
            watcher::Event::InitDone,
            watcher::Event::Apply(annotated("cm", "2", "b")),
        ];
        let (mut enqueued, synced) = run(source, events).await;
        enqueued.sort();
        assert!(synced);
        assert_eq!(enqueued, [key("a"), key("b")]);
        assert_eq!(links.read().unwrap().secondaries_of(&key("b"), None), [key("cm")]);
    }

    #[tokio::test]
    async fn a_relist_enqueues_its_changes_only_once_it_ends_and_the_store_shows_them() {
        let relist = |done: bool| {
            let mut events = vec![
                watcher::Event::Init,
                watcher::Event::InitApply(annotated("cm", "1", "a")),
                watcher::Event::InitDone,
                watcher::Event::Init,
                watcher::Event::InitApply(annotated("cm", "2", "b")),
            ];
            events.extend(done.then_some(watcher::Event::InitDone));
            events
        };
        let (unfinished, _) = run(source(Mapping::Annotations, &Mapper::Annotations), relist(false)).await;
        assert_eq!(unfinished, [], "nothing is enqueued while the store shows the versions from before");
        let (mut finished, _) = run(source(Mapping::Annotations, &Mapper::Annotations), relist(true)).await;
        finished.sort();
        assert_eq!(finished, [key("a"), key("b")]);
    }

    #[tokio::test]
    async fn a_relist_reconciles_changed_and_vanished_secondaries_only() {
        let source = source(Mapping::Annotations, &Mapper::Annotations);
        let events = vec![
            watcher::Event::Init,
            watcher::Event::InitApply(annotated("same", "1", "a")),
            watcher::Event::InitApply(annotated("changed", "1", "b")),
            watcher::Event::InitApply(annotated("gone", "1", "c")),
            watcher::Event::InitDone,
            // The watch restarted: a re-list.
            watcher::Event::Init,
            watcher::Event::InitApply(annotated("same", "1", "a")),
            watcher::Event::InitApply(annotated("changed", "2", "b")),
            watcher::Event::InitDone,
        ];
        let (enqueued, _) = run(source, events).await;
        assert_eq!(enqueued, [key("b"), key("c")]);
    }

    #[tokio::test]
    async fn a_deleted_secondary_reconciles_its_primaries() {
        let source = source(Mapping::Annotations, &Mapper::Annotations);
        let events = vec![
            watcher::Event::Init,
            watcher::Event::InitDone,
            watcher::Event::Apply(annotated("cm", "1", "a")),
            watcher::Event::Delete(annotated("cm", "1", "a")),
        ];
        let (enqueued, _) = run(source, events).await;
        assert_eq!(enqueued, [key("a"), key("a")]);
    }

    #[tokio::test]
    async fn the_hosts_own_writes_reconcile_nothing() {
        let mut source = source(Mapping::Annotations, &Mapper::Annotations);
        let own = Arc::new(OwnWrites::default());
        own.begin(&key("mine"));
        own.wrote(&key("mine"), Some("2".into()));
        source.own = Some(own);
        let events = vec![
            watcher::Event::Init,
            watcher::Event::InitApply(annotated("mine", "1", "a")),
            watcher::Event::InitDone,
            watcher::Event::Apply(annotated("mine", "2", "a")),
            watcher::Event::Apply(annotated("mine", "3", "a")),
        ];
        let (enqueued, _) = run(source, events).await;
        assert_eq!(enqueued, [key("a")], "only the change made by someone else");
    }

    #[tokio::test]
    async fn primary_references_reconcile_the_primaries_that_name_the_secondary() {
        let source = source(Mapping::PrimaryReferences, &Mapper::PrimaryReferences);
        source.links.write().unwrap().primary_changed(&key("m1"), vec![key("shared")]);
        let events = vec![
            watcher::Event::Init,
            watcher::Event::InitDone,
            watcher::Event::Apply(annotated("shared", "2", "ignored")),
            watcher::Event::Apply(annotated("unused", "2", "ignored")),
        ];
        let (enqueued, _) = run(source, events).await;
        assert_eq!(enqueued, [key("m1")]);
    }
}
