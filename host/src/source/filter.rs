//! The filter of one watch's events (the primary's or a declared watch's): the core's
//! [`ChangeFilter`] with the plugin's predicate, whose plugin terms the plugin's `filter` export
//! answers with the objects the host already holds.
//!
//! The plugin is called only for a watch that declares a plugin term, and only when the term can
//! still change the result (the core short-circuits). It is given the new version as the cache
//! holds it (projected, if the watch projects) and, for an update, the previous version: the
//! filter keeps the last version of each object for that, but only while the predicate asks the
//! plugin. In a whole cache that version is the very object the cache holds (shared, not
//! copied); under a bounded cache it keeps an evicted primary's last version in memory.
//!
//! A call that fails (a trap, its deadline, its memory limit) admits the event and is logged: a
//! needless reconcile costs little, a lost one leaves the object unreconciled until the next
//! event or resync (controller-runtime's predicates cannot fail; a panicking one restarts the
//! manager, whose initial list reconciles everything again).

use std::sync::{Arc, OnceLock};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use wasmop_core::filter::{Change, ChangeFilter, Verdict, Version};
use wasmop_core::table::{KeyMap, KeySet};

use crate::object::ObjectKey;
use crate::runtime::Current;
use crate::wire::{Object, PrimaryReads};

/// A watch's change filter, with the plugin to answer its predicate's plugin terms.
pub struct EventFilter {
    /// The plugin, for logs.
    plugin: String,
    /// The watch, for logs: `primary` or the watched kind.
    watch: String,
    filter: ChangeFilter,
    module: Arc<Current>,
    /// What the plugin reads of the watch's objects.
    reads: PrimaryReads,
    /// The last version of each object, while the predicate asks the plugin: `old` of an update.
    previous: KeyMap<ObjectKey, Arc<Object>>,
}

/// A new version, observed and not decided yet.
pub struct Observed {
    change: Option<Change>,
    /// The version before it, when the plugin may be asked.
    previous: Option<Arc<Object>>,
}

impl Observed {
    /// Whether it is a change at all (not the version seen last, seen again).
    pub fn is_change(&self) -> bool {
        self.change.is_some()
    }
}

impl EventFilter {
    /// The filter of `watch` of `plugin`, whose plugin terms `module` answers, given the
    /// objects as `reads` has it.
    pub fn new(plugin: &str, watch: &str, filter: ChangeFilter, module: Arc<Current>, reads: PrimaryReads) -> Self {
        Self { plugin: plugin.into(), watch: watch.into(), filter, module, reads, previous: KeyMap::new() }
    }

    /// Records `object`, a new version of `key`; decide with [`EventFilter::decide`].
    pub fn observe(&mut self, key: &ObjectKey, object: &Arc<Object>) -> Observed {
        let change = self.filter.observe(key, version(&object.metadata));
        let previous = if self.filter.asks_plugin() { self.previous.insert(key.clone(), object.clone()) } else { None };
        Observed { change, previous }
    }

    /// Whether `observed`, the version `object`, reconciles.
    pub async fn decide(&self, observed: Observed, object: &Object) -> bool {
        let Some(change) = observed.change else { return false };
        // The plugin is given the previous version of an update only.
        let old = observed.previous.as_deref().filter(|_| change.event == wasmop_core::predicate::EventKind::Update);
        self.decide_change(change, object, old).await
    }

    /// Records and decides `object`, a new version of `key`.
    pub async fn admit(&mut self, key: &ObjectKey, object: &Arc<Object>) -> bool {
        let observed = self.observe(key, object);
        self.decide(observed, object).await
    }

    /// Whether the deletion of `key` passes (a watch's, whose deletions map to primaries), its
    /// last version `object` (`None`: the one this filter kept, for an object a re-list no
    /// longer shows); forgets it.
    pub async fn deleted(&mut self, key: &ObjectKey, object: Option<&Object>) -> bool {
        let kept = self.previous.swap_remove(key);
        self.filter.forget(key);
        let delete = Change::of(wasmop_core::predicate::EventKind::Delete);
        match object.or(kept.as_deref()) {
            Some(object) => self.decide_change(delete, object, None).await,
            // Nothing to give the plugin (it was never asked about this object): built-in terms
            // hold for a deletion, so only a plugin term could reject it; it passes.
            None => true,
        }
    }

    /// Forgets a deleted object.
    pub fn forget(&mut self, key: &ObjectKey) {
        self.filter.forget(key);
        self.previous.swap_remove(key);
    }

    /// After a re-list, forgets every object the list did not contain; returns their keys.
    pub fn retain_listed(&mut self, listed: &KeySet<ObjectKey>) -> Vec<ObjectKey> {
        let gone = self.filter.retain_listed(listed);
        for key in &gone {
            self.previous.swap_remove(key);
        }
        gone
    }

    /// Decides `change` of `object` (after `old`), calling the plugin's `filter` for the
    /// predicate's plugin terms when they matter.
    async fn decide_change(&self, change: Change, object: &Object, old: Option<&Object>) -> bool {
        if !self.filter.asks_plugin() {
            return self.filter.decide_now(change, &mut |_| unreachable!("the predicate asks no plugin"));
        }
        let module = self.module.get();
        // Serialized once, when the first plugin term is asked.
        let json: OnceLock<Result<(String, Option<String>), String>> = OnceLock::new();
        let event = change.event.into();
        let verdict = self
            .filter
            .decide(change, |name| {
                let (module, json) = (&module, &json);
                async move {
                    let (object, old) =
                        json.get_or_init(|| serialize(&self.reads, object, old)).as_ref().map_err(Clone::clone)?;
                    module.filter(name, event, object, old.as_deref()).await.map_err(|err| err.to_string())
                }
            })
            .await;
        if let Verdict::Failed(err) = &verdict {
            let object = crate::object::key_of(object).map(|k| k.to_string()).unwrap_or_default();
            tracing::warn!(plugin = self.plugin, watch = self.watch, object, %err,
                "the plugin's filter failed; the event passes");
        }
        verdict.admits()
    }
}

/// `object` and `old` as the JSON the plugin is given.
fn serialize(reads: &PrimaryReads, object: &Object, old: Option<&Object>) -> Result<(String, Option<String>), String> {
    let text = |o: &Object| reads.json(o).map_err(|e| format!("cannot serialize the object: {e}"));
    Ok((text(object)?, old.map(text).transpose()?))
}

/// What the change filter looks at in a version of an object.
pub fn version(meta: &ObjectMeta) -> Version {
    Version {
        uid: meta.uid.clone(),
        generation: meta.generation,
        resource_version: meta.resource_version.clone(),
        deleting: meta.deletion_timestamp.is_some(),
        finalizers: meta.finalizers.clone(),
        annotations: meta.annotations.clone(),
        labels: meta.labels.clone(),
    }
}
