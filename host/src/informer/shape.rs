//! How a watch keeps its objects: the paths it keeps of them, the pool of its bounded cache,
//! and the shards it holds the objects of.

use std::sync::Arc;

use wasmop_core::shard::{Ranges, ShardKey};

use super::pool::Pool;
use crate::trim::trim;
use crate::wire::Object;

/// How a watch keeps its objects: whole or projected (always [`trim`]med), and all of them or
/// only the warm ones, in a bounded cache's pool.
#[derive(Clone, Default)]
pub struct Shape {
    /// The paths kept besides the metadata (see [`wasmop_core::projection`]); `None` keeps
    /// whole objects, an empty list the metadata alone.
    pub projection: Option<Arc<[String]>>,
    /// The pool of a bounded cache; `None` keeps every object.
    pub pool: Option<Pool>,
    /// Only the objects this replica owns; `None` keeps all.
    pub shard: Option<ShardedWatch>,
}

impl Shape {
    /// Cuts `object` to this shape, as it enters the cache.
    pub fn fit(&self, object: &mut Object) {
        trim(object);
        if let Some(paths) = &self.projection {
            object.data.project(paths);
        }
    }

    /// Whether the API server's metadata-only watch serves it.
    pub(super) fn metadata_only(&self) -> bool {
        self.projection.as_deref().is_some_and(<[String]>::is_empty)
    }
}

/// How a watch is sharded: by which key, following which ranges.
#[derive(Clone)]
pub struct ShardedWatch {
    /// What places an object.
    pub key: ShardKey,
    /// The ranges this replica owns, as they change.
    pub owned: tokio::sync::watch::Receiver<Ranges>,
    /// Where the decoded objects and bytes are counted.
    pub counters: Arc<dyn ShardCounters>,
    /// Whether to ask the API server to filter (when it honours it); `false` filters here.
    pub server_side: bool,
}

/// Where a sharded watch counts what it decoded and received.
pub trait ShardCounters: Send + Sync {
    /// A watch of `kind` decoded an object; `kept` when this replica owns it.
    fn decoded(&self, kind: &str, kept: bool);
    /// A watch of `kind` received `bytes` of a response.
    fn bytes(&self, kind: &str, bytes: u64);
    /// Whether the API server filters the watch of `kind`.
    fn server_side(&self, kind: &str, filtered: bool);
}
