//! Which [`Pool`] a plugin's bounded caches use: its own budget (`cache.budgetMib`), carved out
//! of the host's (`--cache-budget-mib`) when both are set, else the host's shared pool, else
//! none (every object cached, as kube's reflector does).

use std::sync::Arc;
use std::time::Duration;

use wasmop_core::settings::CacheBudget;

use super::pool::{Budget, Pool, PoolMetrics};

/// Bytes in a MiB.
const MIB: u64 = 1024 * 1024;

/// Where the metrics of a new pool come from.
pub type PoolMetricsOf = Arc<dyn Fn(&str, u64) -> PoolMetrics + Send + Sync>;

/// The host's pool and the means to make plugins' pools.
#[derive(Clone)]
pub struct Pools {
    host: Option<Pool>,
    metrics: PoolMetricsOf,
}

impl Pools {
    /// Pools under the host's `budget` (`None`: no host budget), counted by `metrics`.
    pub fn new(budget: Option<Budget>, metrics: PoolMetricsOf) -> Self {
        let host = budget.map(|b| Pool::new("host", b, metrics("host", b.bytes)));
        Self { host, metrics }
    }

    /// No bounded caches unless a plugin asks for them.
    pub fn unbounded() -> Self {
        Self::new(None, Arc::new(|_, _| PoolMetrics::default()))
    }

    /// The pool of `plugin`'s bounded watches, given its settings; `None` caches every object.
    pub fn for_plugin(&self, plugin: &str, cache: Option<CacheBudget>) -> Option<Pool> {
        let own = cache.and_then(|c| c.budget_mib).map(|mib| mib.saturating_mul(MIB));
        let idle = cache.and_then(|c| c.idle_ms).map(Duration::from_millis);
        match (&self.host, own) {
            (Some(host), Some(bytes)) => Some(host.share(plugin, bytes, (self.metrics)(plugin, bytes))),
            (Some(host), None) => Some(host.clone()),
            (None, Some(bytes)) => Some(Pool::new(plugin, Budget { bytes, idle }, (self.metrics)(plugin, bytes))),
            (None, None) => None,
        }
    }
}
