//! Many-to-many relations (JOSDK's PrimaryToSecondaryMapper): when a primary changes, the
//! plugin's `secondaries-of` says which secondaries it uses, and the host indexes the answer in
//! the links of the matching watches, so that a change of one secondary reconciles every primary
//! that uses it.

use std::sync::{Arc, RwLock};

use crate::informer::WatchedCache;
use crate::mapping::Links;
use crate::object::ObjectKey;
use crate::runtime::bindings::wasmop::plugin::types::{KindRef, SecondaryRef};
use crate::runtime::{CacheReader, Current};
use crate::wire::{Object, PrimaryReads};

/// The primary-references watches of one plugin.
pub(crate) struct References {
    pub(crate) module: Arc<Current>,
    pub(crate) cache: Arc<WatchedCache>,
    /// What the plugin reads of a primary.
    pub(crate) reads: PrimaryReads,
    /// Each watch with the primary-references mapper: its kind and links.
    pub(crate) watches: Vec<(KindRef, Arc<RwLock<Links>>)>,
}

impl References {
    /// Asks the plugin which secondaries `primary` uses and records the answer. On failure the
    /// previous answer stays. A plugin without a primary-references watch is not asked: the
    /// call would cost a sandbox for an answer nothing uses.
    pub(crate) async fn primary_changed(&self, key: &ObjectKey, primary: &Object) {
        if self.watches.is_empty() {
            return;
        }
        let refs = match self.ask(primary).await {
            Ok(refs) => refs,
            Err(err) => {
                tracing::warn!(plugin = self.module.get().name(), object = %key, %err,
                    "secondaries-of failed; keeping the secondaries it named before");
                return;
            }
        };
        for (kind, links) in &self.watches {
            let secondaries = refs
                .iter()
                .filter(|r| r.kind.group == kind.group && r.kind.version == kind.version && r.kind.kind == kind.kind)
                .map(|r| ObjectKey {
                    namespace: r.namespace.clone().or_else(|| key.namespace.clone()).filter(|_| kind.namespaced),
                    name: r.name.clone(),
                })
                .collect();
            links.write().expect("links are never poisoned").primary_changed(key, secondaries);
        }
    }

    /// Forgets a deleted primary.
    pub(crate) fn primary_deleted(&self, key: &ObjectKey) {
        for (_, links) in &self.watches {
            links.write().expect("links are never poisoned").primary_deleted(key);
        }
    }

    /// Calls `secondaries-of`.
    async fn ask(&self, primary: &Object) -> Result<Vec<SecondaryRef>, String> {
        let json = self.reads.json(primary).map_err(|e| format!("cannot serialize the primary: {e}"))?;
        let cache = self.cache.clone() as Arc<dyn CacheReader>;
        let call = self.module.get().secondaries_of(cache, &json).await;
        call.map_err(|trap| trap.to_string())?
    }
}
