//! A byte budget of bounded caches and the warm objects it holds: the host's
//! (`--cache-budget-mib`) or a plugin's (`cache.budgetMib`), a plugin's possibly a share of the
//! host's.

use std::sync::Arc;
use std::time::Duration;

use moka::notification::RemovalCause;
use moka::policy::EvictionPolicy;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

use super::weight::weight;
use crate::object::ObjectKey;
use crate::wire::Object;

/// An object in a pool: the watch it belongs to and its key.
pub(super) type Slot = (u64, ObjectKey);

/// A pool's share of the metrics.
#[derive(Clone, Default)]
pub struct PoolMetrics {
    /// Estimated bytes of the objects held.
    pub bytes: Gauge,
    /// Objects held.
    pub objects: Gauge,
    /// Objects evicted for the budget or the idle time.
    pub evictions: Counter,
    /// Reads that went to the API server because the object was evicted.
    pub refetches: Counter,
    /// LIST requests (pages) made to serve lists of kinds with evicted objects.
    pub lists: Counter,
}

/// A byte budget and the objects it holds.
#[derive(Clone)]
pub struct Pool {
    name: String,
    pub(super) objects: moka::sync::Cache<Slot, Arc<Object>>,
    /// A plugin's share inside the host's pool: weights only, evicting from `objects`.
    share: Option<moka::sync::Cache<Slot, u32>>,
    budget: u64,
    pub(super) metrics: PoolMetrics,
}

/// What a pool is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Bytes, by [`weight`].
    pub bytes: u64,
    /// Evict objects not read for this long, whatever the budget.
    pub idle: Option<Duration>,
}

impl Pool {
    /// A pool named `name` (the metrics' `pool` label) of `budget`.
    pub fn new(name: &str, budget: Budget, metrics: PoolMetrics) -> Self {
        let evictions = metrics.evictions.clone();
        let mut builder = moka::sync::Cache::builder()
            .max_capacity(budget.bytes)
            .weigher(|_: &Slot, object: &Arc<Object>| weight(object))
            .eviction_policy(EvictionPolicy::lru())
            .eviction_listener(move |_, _, cause| {
                if matches!(cause, RemovalCause::Size | RemovalCause::Expired) {
                    evictions.inc();
                }
            });
        if let Some(idle) = budget.idle {
            builder = builder.time_to_idle(idle);
        }
        Self { name: name.into(), objects: builder.build(), share: None, budget: budget.bytes, metrics }
    }

    /// A plugin's share of `bytes` inside this (the host's) pool: objects stay in this pool's
    /// cache, and exceeding either budget evicts.
    pub fn share(&self, name: &str, bytes: u64, metrics: PoolMetrics) -> Self {
        let objects = self.objects.clone();
        let evictions = metrics.evictions.clone();
        let share = moka::sync::Cache::builder()
            .max_capacity(bytes)
            .weigher(|_: &Slot, weight: &u32| *weight)
            .eviction_policy(EvictionPolicy::lru())
            .eviction_listener(move |slot: Arc<Slot>, _, cause| {
                if matches!(cause, RemovalCause::Size) {
                    evictions.inc();
                    objects.invalidate(&*slot);
                }
            })
            .build();
        Self { name: name.into(), objects: self.objects.clone(), share: Some(share), budget: bytes, metrics }
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its budget in bytes.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    pub(super) fn get(&self, slot: &Slot) -> Option<Arc<Object>> {
        let object = self.objects.get(slot);
        match (&self.share, &object) {
            (Some(share), Some(_)) => drop(share.get(slot)),
            // Evicted by the host's budget: the share forgets it too.
            (Some(share), None) => share.invalidate(slot),
            (None, _) => {}
        }
        object
    }

    /// Holds `object`, evicting what the budgets no longer hold before it returns, so the
    /// budget is exceeded by at most the object being inserted, and only during the call.
    pub(super) fn insert(&self, slot: Slot, object: Arc<Object>) {
        let weight = weight(&object);
        self.objects.insert(slot.clone(), object);
        if let Some(share) = &self.share {
            share.insert(slot, weight);
        }
        self.settle();
    }

    /// Carries out the evictions and removals moka defers, and publishes what the pool holds.
    pub(super) fn settle(&self) {
        if let Some(share) = &self.share {
            share.run_pending_tasks();
        }
        self.objects.run_pending_tasks();
        self.publish();
    }

    pub(super) fn remove(&self, slot: &Slot) {
        self.objects.invalidate(slot);
        if let Some(share) = &self.share {
            share.invalidate(slot);
        }
    }

    /// Bytes the pool holds now, by its own account.
    pub fn bytes(&self) -> u64 {
        match &self.share {
            Some(share) => share.weighted_size(),
            None => self.objects.weighted_size(),
        }
    }

    fn publish(&self) {
        let (bytes, objects) = match &self.share {
            Some(share) => (share.weighted_size(), share.entry_count()),
            None => (self.objects.weighted_size(), self.objects.entry_count()),
        };
        self.metrics.bytes.set(i64::try_from(bytes).unwrap_or(i64::MAX));
        self.metrics.objects.set(i64::try_from(objects).unwrap_or(i64::MAX));
    }
}
