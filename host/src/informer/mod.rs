//! Informers: `kube` watchers over dynamic objects feeding reflector stores, shared between
//! controllers through the [`Registry`], and the guest's view of those caches.

#[cfg(test)]
pub(crate) mod api_double;
mod bounded;
mod cache;
mod clusters;
mod deadlines;
mod decoded;
mod discovery;
mod listing;
mod paging;
mod pool;
mod pools;
mod registry;
mod remote;
mod shape;
mod sharded;
mod snapshots;
mod tally;
mod view;
mod watch;
mod weight;
mod whole;

pub use crate::trim::{LAST_APPLIED, trim};
pub use bounded::{Bounded, Tag};
pub use cache::Cache;
pub use clusters::{ClusterError, ClusterSpec, Clusters, ImpersonationError, UnknownCluster, Writes};
pub use decoded::watch_backoff;
pub use discovery::{InformerError, not_served, resolve};
pub use listing::Listing;
pub(crate) use paging::paged;
pub use pool::{Budget, Pool, PoolMetrics};
pub use pools::{PoolMetricsOf, Pools};
pub use registry::{Registry, Subscription, WatchKey};
pub use shape::{Shape, ShardCounters, ShardedWatch};
pub use sharded::hash_of;
pub use view::{CachedKind, PrimaryView, WatchedCache};
pub use watch::{Selectors, SharedEvent, SharedEvents, watch, watch_bounded};
pub use weight::weight;
pub use whole::Whole;
