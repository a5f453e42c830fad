//! Admission for shards: whether a controller's scheduler on a sharded host may start a run of
//! a primary now, later or never.

use std::sync::Arc;

use crate::informer;
use crate::object::ObjectKey;
use crate::scheduler;
use crate::shards::{Shards, Share, Verdict};
use wasmop_core::shard::ShardKey;

/// What lets a controller's scheduler on a sharded host start a run: the members agree on how
/// to run the plugin; and for a sharded plugin, the replica's shards and the hash of the
/// primary's shard key (its namespace's, or its UID's as its watch shows it, evicted from a
/// bounded cache or not; a primary the watch does not show is gone or not this replica's).
pub(super) struct ShardAdmission {
    shards: Shards,
    changes: tokio::sync::watch::Receiver<Arc<Share>>,
    plugin: String,
    /// `None`: the leader runs the plugin whole.
    key: Option<ShardKey>,
    primaries: informer::Cache,
}

impl ShardAdmission {
    pub(super) fn new(shards: Shards, plugin: &str, key: Option<ShardKey>, primaries: informer::Cache) -> Self {
        Self { changes: shards.subscribe(), shards, plugin: plugin.to_string(), key, primaries }
    }

    /// Tells the other members how this replica runs the plugin, now that it reconciles.
    pub(super) fn declare(&self) {
        let how = self.key.map_or(wasmop_core::shard::UNSHARDED, ShardKey::name);
        self.shards.declare(&self.plugin, Some(how));
    }
}

impl scheduler::Admission<ObjectKey> for ShardAdmission {
    fn admit(&self, object: &ObjectKey) -> scheduler::Admit {
        if !self.shards.agreed(&self.plugin) {
            return scheduler::Admit::Later;
        }
        let Some(key) = self.key else { return scheduler::Admit::Run(Box::new(())) };
        let hash = match key {
            ShardKey::Namespace => Some(wasmop_core::shard::hash(object.namespace.as_deref().unwrap_or(""))),
            ShardKey::Uid => self.primaries.uid(object).as_deref().map(wasmop_core::shard::hash),
        };
        match hash.map(|hash| self.shards.start(hash)) {
            Some(Ok(guard)) => scheduler::Admit::Run(Box::new(guard)),
            Some(Err(Verdict::Wait)) => scheduler::Admit::Later,
            Some(Err(_)) | None => scheduler::Admit::Never,
        }
    }

    async fn changed(&mut self) -> bool {
        self.changes.changed().await.is_ok()
    }
}
