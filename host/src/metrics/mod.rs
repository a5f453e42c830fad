//! The host's Prometheus metrics, served on `/metrics` (`wasmop run --metrics-address`): the
//! `wasmop_*` ones, and controller-runtime's names ([`controller_runtime`], and the webhooks'
//! [`WebhookMetrics`]).

pub mod controller_runtime;
mod shadow;
mod shards;
mod webhooks;

pub use shadow::ShadowMetrics;
pub use shards::ShardMetrics;
pub use webhooks::{InFlight, WebhookMetrics};

use std::sync::Arc;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// What kind of write request the host made.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum Verb {
    /// A server-side apply of a dependent.
    Apply,
    /// A status merge patch of a primary.
    PatchStatus,
    /// A metadata merge patch of a primary (labels, annotations, finalizers).
    PatchMetadata,
    /// A delete of a dependent.
    Delete,
    /// A Kubernetes Event.
    Event,
}

/// Labels of the write counter.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WriteLabels {
    plugin: String,
    kind: String,
    verb: Verb,
}

/// Labels of per-plugin counters.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    plugin: String,
}

/// Labels of the bounded caches' metrics.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabels {
    pool: String,
}

/// The bounded caches' metric families.
struct CacheFamilies {
    bytes: Family<PoolLabels, Gauge>,
    budget: Family<PoolLabels, Gauge>,
    objects: Family<PoolLabels, Gauge>,
    evictions: Family<PoolLabels, Counter>,
    refetches: Family<PoolLabels, Counter>,
    lists: Family<PoolLabels, Counter>,
}

impl CacheFamilies {
    fn register(registry: &mut Registry) -> Self {
        let families = Self {
            bytes: Family::default(),
            budget: Family::default(),
            objects: Family::default(),
            evictions: Family::default(),
            refetches: Family::default(),
            lists: Family::default(),
        };
        registry.register(
            "cache_bytes",
            "Estimated heap bytes of the objects a bounded cache pool holds",
            families.bytes.clone(),
        );
        registry.register("cache_budget_bytes", "The byte budget of a bounded cache pool", families.budget.clone());
        registry.register("cache_objects", "Objects a bounded cache pool holds", families.objects.clone());
        registry.register(
            "cache_evictions",
            "Objects a bounded cache pool evicted for its budget or idle time",
            families.evictions.clone(),
        );
        registry.register(
            "cache_refetches",
            "Reads of evicted objects that went to the API server",
            families.refetches.clone(),
        );
        registry.register(
            "cache_lists",
            "LIST requests (pages) a bounded cache pool made to serve lists of kinds with evicted objects",
            families.lists.clone(),
        );
        families
    }
}

/// Labels of the reconcile counter.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileLabels {
    plugin: String,
    result: Outcome,
}

/// Labels of the reconcile failure counter.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabels {
    plugin: String,
    reason: &'static str,
}

/// Labels of the watch event counter.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WatchEventLabels {
    plugin: String,
    /// `primary`, or the watched kind.
    watch: String,
    /// `passed` or `filtered`.
    result: &'static str,
}

/// The watch events of one watch of a plugin, by whether they passed its filters and predicate.
#[derive(Debug, Clone, Default)]
pub struct WatchEvents {
    passed: Counter,
    filtered: Counter,
}

impl WatchEvents {
    /// Counts one event (not the host's own write) that `passed` or not.
    pub fn count(&self, passed: bool) {
        if passed {
            self.passed.inc()
        } else {
            self.filtered.inc()
        };
    }

    /// Events that passed so far.
    pub fn passed(&self) -> u64 {
        self.passed.get()
    }

    /// Events filtered out so far.
    pub fn filtered(&self) -> u64 {
        self.filtered.get()
    }
}

/// Labels of the per-call histogram.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    plugin: String,
    export: &'static str,
}

/// Labels of the outgoing HTTP request counter.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    plugin: String,
    origin: String,
    code: String,
}

/// Labels of the outgoing HTTP duration histogram.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OriginLabels {
    plugin: String,
    origin: String,
}

/// Labels of the inbound request counter.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InboundLabels {
    plugin: String,
    code: String,
}

/// Buckets of outgoing request durations: 1 ms to about 33 s.
fn http_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1e-3, 2.0, 16))
}

/// Buckets of call durations: 20 µs to about 5 s.
fn call_histogram() -> Histogram {
    Histogram::new(exponential_buckets(20e-6, 4.0, 10))
}

/// How a reconcile ended.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum Outcome {
    /// It succeeded.
    Success,
    /// It failed (and may be retried).
    Failure,
}

/// Labels of per-ReconcilerPlugin metrics.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourceLabels {
    resource: String,
}

/// Labels of OCI pulls.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PullLabels {
    outcome: String,
}

/// Labels of the leader election gauge.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaseLabels {
    name: String,
}

/// The host's metrics; cheap to share.
pub struct Metrics {
    registry: Registry,
    controller_runtime: controller_runtime::ControllerRuntime,
    writes: Family<WriteLabels, Counter>,
    conflicts: Family<PluginLabels, Counter>,
    reconciles: Family<ReconcileLabels, Counter>,
    failures: Family<FailureLabels, Counter>,
    calls: Family<CallLabels, Histogram, fn() -> Histogram>,
    http_requests: Family<HttpLabels, Counter>,
    http_durations: Family<OriginLabels, Histogram, fn() -> Histogram>,
    inbound_requests: Family<InboundLabels, Counter>,
    watch_events: Family<WatchEventLabels, Counter>,
    /// Calls per plugin and export (not exported: the histogram's count).
    call_counts: Family<CallLabels, Counter>,
    fuel: Family<PluginLabels, Counter>,
    own_write_records: Family<PluginLabels, Gauge>,
    plugin_resource_checks: Family<ResourceLabels, Counter>,
    oci_pulls: Family<PullLabels, Counter>,
    leader: Family<LeaseLabels, Gauge>,
    records_written: Family<PluginLabels, Counter>,
    records_dropped: Family<FailureLabels, Counter>,
    records_deleted: Family<PluginLabels, Counter>,
    /// Writes per plugin, of every kind and verb (not exported: the sum of `writes`).
    plugin_writes: Family<PluginLabels, Counter>,
    caches: CacheFamilies,
    shards: ShardMetrics,
    shadow: ShadowMetrics,
    webhooks: WebhookMetrics,
}

impl Metrics {
    /// A registry with every metric at zero.
    pub fn new() -> Arc<Self> {
        let mut root = Registry::default();
        let controller_runtime = controller_runtime::ControllerRuntime::register(&mut root);
        let webhooks = WebhookMetrics::register(&mut root);
        let leader = Family::<LeaseLabels, Gauge>::default();
        root.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master",
            leader.clone(),
        );
        let registry = root.sub_registry_with_prefix("wasmop");
        let writes = Family::<WriteLabels, Counter>::default();
        registry.register("writes", "Write requests the host made to the API server", writes.clone());
        let conflicts = Family::<PluginLabels, Counter>::default();
        registry.register(
            "write_conflicts",
            "Writes refused because the object changed since it was read; each is retried",
            conflicts.clone(),
        );
        let reconciles = Family::<ReconcileLabels, Counter>::default();
        registry.register("reconciles", "Reconciles run, by plugin and result", reconciles.clone());
        let failures = Family::<FailureLabels, Counter>::default();
        registry.register(
            "reconcile_failures",
            "Failed reconciles by plugin and reason (the Event's): a plugin error, a deadline, a memory-limit hit, \
             fuel, a panic, a trap, a write or dependent failure",
            failures.clone(),
        );
        let calls = Family::<CallLabels, Histogram, fn() -> Histogram>::new_with_constructor(call_histogram);
        registry.register(
            "plugin_call_duration_seconds",
            "Wall-clock time of each call into a plugin, by plugin and export",
            calls.clone(),
        );
        let http_requests = Family::<HttpLabels, Counter>::default();
        registry.register(
            "plugin_http_requests",
            "Outgoing HTTP requests of plugins, by plugin, granted origin (or undeclared) and code: the HTTP \
             status, refused, timeout, too_large or error",
            http_requests.clone(),
        );
        let http_durations = Family::<OriginLabels, Histogram, fn() -> Histogram>::new_with_constructor(http_histogram);
        registry.register(
            "plugin_http_request_duration_seconds",
            "Time of each outgoing HTTP request of a plugin, until its body was read or it failed",
            http_durations.clone(),
        );
        let inbound_requests = Family::<InboundLabels, Counter>::default();
        registry.register(
            "inbound_requests",
            "Inbound event requests (POST /plugins/<name>/events), by plugin and HTTP status code; those naming \
             no running plugin are counted with an empty plugin",
            inbound_requests.clone(),
        );
        let watch_events = Family::<WatchEventLabels, Counter>::default();
        registry.register(
            "watch_events",
            "Events of primaries and watched objects that passed the plugin's filters and predicates (result \
             passed) or not (filtered), by plugin and watch; the host's own writes are not counted",
            watch_events.clone(),
        );
        let fuel = Family::<PluginLabels, Counter>::default();
        registry.register(
            "plugin_fuel_consumed",
            "Fuel used by the calls into plugins that run with a fuel budget",
            fuel.clone(),
        );
        let own_write_records = Family::<PluginLabels, Gauge>::default();
        registry.register(
            "own_write_records",
            "The host's writes in flight or whose watch event is still awaited, by plugin",
            own_write_records.clone(),
        );
        let plugin_resource_checks = Family::<ResourceLabels, Counter>::default();
        registry.register(
            "reconciler_plugin_checks",
            "Checks of ReconcilerPlugin resources: module fetched, installed if it changed, status updated if it changed",
            plugin_resource_checks.clone(),
        );
        let oci_pulls = Family::<PullLabels, Counter>::default();
        registry.register(
            "oci_pulls",
            "Modules ReconcilerPlugin resources name by OCI reference, by outcome: stored (read from the \
             host's store), pulled, or the reason of the refusal",
            oci_pulls.clone(),
        );
        let records_written = Family::<PluginLabels, Counter>::default();
        registry.register(
            "records_written",
            "Records of reconciles written under --record (truncated ones included)",
            records_written.clone(),
        );
        let records_dropped = Family::<FailureLabels, Counter>::default();
        registry.register(
            "records_dropped",
            "Records of reconciles not written, by reason: size (over the cap even truncated, or over the \
             plugin's budget), error (the file could not be written)",
            records_dropped.clone(),
        );
        let records_deleted = Family::<PluginLabels, Counter>::default();
        registry.register(
            "records_deleted",
            "Older records deleted to keep a plugin's records within its budget",
            records_deleted.clone(),
        );
        let plugin_writes = Family::default();
        let caches = CacheFamilies::register(registry);
        let shards = ShardMetrics::register(registry);
        let shadow = ShadowMetrics::register(registry);
        Arc::new(Self {
            caches,
            shards,
            shadow,
            webhooks,
            registry: root,
            controller_runtime,
            leader,
            writes,
            conflicts,
            reconciles,
            failures,
            calls,
            http_requests,
            http_durations,
            inbound_requests,
            watch_events,
            call_counts: Family::default(),
            fuel,
            own_write_records,
            plugin_resource_checks,
            oci_pulls,
            plugin_writes,
            records_written,
            records_dropped,
            records_deleted,
        })
    }

    /// Counts what a write of `plugin`'s records did: `written` and `deleted` records, and
    /// `dropped` ones, by `reason` (`size` or `error`).
    pub fn recorded(&self, plugin: &str, written: u64, deleted: u64, dropped: Option<&'static str>) {
        let labels = PluginLabels { plugin: plugin.to_string() };
        if written > 0 {
            self.records_written.get_or_create(&labels).inc_by(written);
        }
        if deleted > 0 {
            self.records_deleted.get_or_create(&labels).inc_by(deleted);
        }
        if let Some(reason) = dropped {
            self.records_dropped.get_or_create(&FailureLabels { plugin: labels.plugin, reason }).inc();
        }
    }

    /// The shards' metrics.
    pub fn shards(&self) -> &ShardMetrics {
        &self.shards
    }

    /// The shadow runs' metrics.
    pub fn shadow(&self) -> &ShadowMetrics {
        &self.shadow
    }

    /// The webhook endpoint's metrics.
    pub fn webhooks(&self) -> &WebhookMetrics {
        &self.webhooks
    }

    /// The scheduler observer of plugin `name`'s controller: controller-runtime's reconcile and
    /// work queue metrics.
    pub fn controller(&self, name: &str) -> Arc<dyn crate::scheduler::Observer> {
        self.controller_runtime.controller(name)
    }

    /// Whether this replica leads the lease `name` (controller-runtime's
    /// `leader_election_master_status`).
    pub fn leader(&self, name: &str, leading: bool) {
        self.leader.get_or_create(&LeaseLabels { name: name.to_string() }).set(i64::from(leading));
    }

    /// Counts one write request of `plugin` on an object of `kind`.
    pub fn wrote(&self, plugin: &str, kind: &str, verb: Verb) {
        let labels = WriteLabels { plugin: plugin.to_string(), kind: kind.to_string(), verb };
        self.writes.get_or_create(&labels).inc();
        self.plugin_writes.get_or_create(&PluginLabels { plugin: plugin.to_string() }).inc();
    }

    /// Counts one conflict of `plugin`.
    pub fn conflict(&self, plugin: &str) {
        self.conflicts.get_or_create(&PluginLabels { plugin: plugin.to_string() }).inc();
    }

    /// Counts one reconcile of `plugin`.
    pub fn reconciled(&self, plugin: &str, result: Outcome) {
        self.reconciles.get_or_create(&ReconcileLabels { plugin: plugin.to_string(), result }).inc();
    }

    /// Counts one failed reconcile of `plugin`, by `reason` (the Warning Event's reason).
    pub fn failed(&self, plugin: &str, reason: &'static str) {
        self.failures.get_or_create(&FailureLabels { plugin: plugin.to_string(), reason }).inc();
    }

    /// Failed reconciles of `plugin` with `reason`.
    pub fn failures_of(&self, plugin: &str, reason: &'static str) -> u64 {
        self.failures.get_or_create(&FailureLabels { plugin: plugin.to_string(), reason }).get()
    }

    /// Reconciles of `plugin` that ended with `result`.
    pub fn reconciles_of(&self, plugin: &str, result: Outcome) -> u64 {
        self.reconciles.get_or_create(&ReconcileLabels { plugin: plugin.to_string(), result }).get()
    }

    /// Write requests `plugin` made so far, of every kind and verb.
    pub fn writes_of(&self, plugin: &str) -> u64 {
        self.plugin_writes.get_or_create(&PluginLabels { plugin: plugin.to_string() }).get()
    }

    /// The event counters of `watch` (`primary`, or the watched kind) of `plugin`.
    pub fn watch_events(&self, plugin: &str, watch: &str) -> WatchEvents {
        let labels = |result| WatchEventLabels { plugin: plugin.to_string(), watch: watch.to_string(), result };
        // One at a time: a family's guard held while it creates another entry deadlocks.
        let passed = self.watch_events.get_or_create(&labels("passed")).clone();
        let filtered = self.watch_events.get_or_create(&labels("filtered")).clone();
        WatchEvents { passed, filtered }
    }

    /// Calls of `export` of `plugin` so far.
    pub fn calls_of(&self, plugin: &str, export: &'static str) -> u64 {
        let labels = CallLabels { plugin: plugin.to_string(), export };
        self.call_counts.get_or_create(&labels).get()
    }

    /// Fuel `plugin` used so far (zero unless it runs with a fuel budget).
    pub fn fuel_of(&self, plugin: &str) -> u64 {
        self.fuel.get_or_create(&PluginLabels { plugin: plugin.to_string() }).get()
    }

    /// The gauge of `plugin`'s own-write records, shared by all its watches.
    pub fn own_write_records(&self, plugin: &str) -> Gauge {
        self.own_write_records.get_or_create(&PluginLabels { plugin: plugin.to_string() }).clone()
    }

    /// How many own-write records `plugin` holds now.
    pub fn own_write_records_of(&self, plugin: &str) -> i64 {
        self.own_write_records(plugin).get()
    }

    /// The metrics of the bounded cache pool `pool` with `budget` bytes.
    pub fn pool(&self, pool: &str, budget: u64) -> crate::informer::PoolMetrics {
        let labels = PoolLabels { pool: pool.to_string() };
        let c = &self.caches;
        c.budget.get_or_create(&labels).set(i64::try_from(budget).unwrap_or(i64::MAX));
        crate::informer::PoolMetrics {
            bytes: c.bytes.get_or_create(&labels).clone(),
            objects: c.objects.get_or_create(&labels).clone(),
            evictions: c.evictions.get_or_create(&labels).clone(),
            refetches: c.refetches.get_or_create(&labels).clone(),
            lists: c.lists.get_or_create(&labels).clone(),
        }
    }

    /// Bytes the bounded cache pool `pool` holds now.
    pub fn cache_bytes_of(&self, pool: &str) -> i64 {
        self.caches.bytes.get_or_create(&PoolLabels { pool: pool.to_string() }).get()
    }

    /// Objects the bounded cache pool `pool` evicted so far.
    pub fn cache_evictions_of(&self, pool: &str) -> u64 {
        self.caches.evictions.get_or_create(&PoolLabels { pool: pool.to_string() }).get()
    }

    /// Reads of evicted objects of `pool` that went to the API server so far.
    pub fn cache_refetches_of(&self, pool: &str) -> u64 {
        self.caches.refetches.get_or_create(&PoolLabels { pool: pool.to_string() }).get()
    }

    /// LIST requests (pages) the bounded cache pool `pool` made so far.
    pub fn cache_lists_of(&self, pool: &str) -> u64 {
        self.caches.lists.get_or_create(&PoolLabels { pool: pool.to_string() }).get()
    }

    /// Counts one check of the ReconcilerPlugin `resource`.
    pub fn plugin_resource_checked(&self, resource: &str) {
        self.plugin_resource_checks.get_or_create(&ResourceLabels { resource: resource.to_string() }).inc();
    }

    /// Counts one OCI module fetch that ended with `outcome`.
    pub fn oci_pulled(&self, outcome: &str) {
        self.oci_pulls.get_or_create(&PullLabels { outcome: outcome.to_string() }).inc();
    }

    /// OCI module fetches that ended with `outcome` so far.
    pub fn oci_pulls(&self, outcome: &str) -> u64 {
        self.oci_pulls.get_or_create(&PullLabels { outcome: outcome.to_string() }).get()
    }

    /// Checks of the ReconcilerPlugin `resource` so far.
    pub fn plugin_resource_checks(&self, resource: &str) -> u64 {
        self.plugin_resource_checks.get_or_create(&ResourceLabels { resource: resource.to_string() }).get()
    }

    /// Outgoing HTTP requests of `plugin` to `origin` that ended with `code` so far.
    pub fn http_requests_of(&self, plugin: &str, origin: &str, code: &str) -> u64 {
        let labels = HttpLabels { plugin: plugin.to_string(), origin: origin.to_string(), code: code.to_string() };
        self.http_requests.get_or_create(&labels).get()
    }

    /// Counts one inbound event request for `plugin` answered with `code`.
    pub fn inbound_request(&self, plugin: &str, code: u16) {
        self.inbound_requests
            .get_or_create(&InboundLabels { plugin: plugin.to_string(), code: code.to_string() })
            .inc();
    }

    /// Inbound event requests for `plugin` answered with `code` so far.
    pub fn inbound_requests_of(&self, plugin: &str, code: u16) -> u64 {
        self.inbound_requests.get_or_create(&InboundLabels { plugin: plugin.to_string(), code: code.to_string() }).get()
    }

    /// Conflicts `plugin` met so far.
    pub fn conflicts_of(&self, plugin: &str) -> u64 {
        self.conflicts.get_or_create(&PluginLabels { plugin: plugin.to_string() }).get()
    }

    /// The metrics in the Prometheus text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("writing to a String cannot fail");
        text
    }
}

impl crate::runtime::CallObserver for Metrics {
    fn called(&self, plugin: &str, export: &'static str, elapsed: std::time::Duration, fuel: Option<u64>) {
        let labels = CallLabels { plugin: plugin.to_string(), export };
        self.calls.get_or_create(&labels).observe(elapsed.as_secs_f64());
        self.call_counts.get_or_create(&labels).inc();
        if let Some(fuel) = fuel {
            self.fuel.get_or_create(&PluginLabels { plugin: plugin.to_string() }).inc_by(fuel);
        }
    }

    fn http_request(&self, plugin: &str, origin: &str, code: &str, elapsed: std::time::Duration) {
        let labels = HttpLabels { plugin: plugin.to_string(), origin: origin.to_string(), code: code.to_string() };
        self.http_requests.get_or_create(&labels).inc();
        let labels = OriginLabels { plugin: plugin.to_string(), origin: origin.to_string() };
        self.http_durations.get_or_create(&labels).observe(elapsed.as_secs_f64());
    }
}

/// Whether the host is ready, and if not, what it waits for.
pub type Readiness = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// Serves `/metrics`, `/healthz` (alive) and `/readyz` (`ready` says; 503 with the reason when
/// not) on `address` until `shutdown`.
pub async fn serve(
    metrics: Arc<Metrics>,
    ready: Readiness,
    address: std::net::SocketAddr,
    shutdown: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    use axum::http::StatusCode;
    use axum::routing::get;
    let readyz = move || {
        let answer = match ready() {
            Ok(()) => (StatusCode::OK, "ok".to_string()),
            Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, reason),
        };
        async move { answer }
    };
    let app = axum::Router::new()
        .route("/metrics", get(move || async move { metrics.encode() }))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz));
    let listener = tokio::net::TcpListener::bind(address).await?;
    tracing::info!(%address, "serving /metrics, /healthz and /readyz");
    axum::serve(listener, app).with_graceful_shutdown(async move { shutdown.cancelled().await }).await
}

impl crate::informer::ShardCounters for Metrics {
    fn decoded(&self, kind: &str, kept: bool) {
        self.shards.decoded(kind, kept);
    }

    fn bytes(&self, kind: &str, bytes: u64) {
        self.shards.bytes(kind, bytes);
    }

    fn server_side(&self, kind: &str, filtered: bool) {
        self.shards.server_side(kind, filtered);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_counted_per_plugin_and_encoded() {
        let metrics = Metrics::new();
        metrics.wrote("web", "ConfigMap", Verb::Apply);
        metrics.wrote("web", "WebPage", Verb::PatchStatus);
        metrics.wrote("other", "Probe", Verb::Event);
        metrics.conflict("web");
        metrics.reconciled("web", Outcome::Success);
        assert_eq!(metrics.reconciles_of("web", Outcome::Success), 1);
        assert_eq!(metrics.reconciles_of("web", Outcome::Failure), 0);
        assert_eq!(metrics.writes_of("web"), 2);
        assert_eq!(metrics.writes_of("other"), 1);
        assert_eq!(metrics.conflicts_of("web"), 1);
        let text = metrics.encode();
        assert!(text.contains("wasmop_writes_total{plugin=\"web\",kind=\"ConfigMap\",verb=\"Apply\"} 1"), "{text}");
    }

    #[test]
    fn watch_events_are_counted_per_plugin_watch_and_result() {
        let metrics = Metrics::new();
        let events = metrics.watch_events("p", "primary");
        events.count(true);
        events.count(false);
        events.count(false);
        let again = metrics.watch_events("p", "primary");
        assert_eq!((again.passed(), again.filtered()), (1, 2));
        assert_eq!(metrics.watch_events("p", "ConfigMap").passed(), 0);
        let text = metrics.encode();
        assert!(
            text.contains(r#"wasmop_watch_events_total{plugin="p",watch="primary",result="filtered"} 2"#),
            "{text}"
        );
    }

    #[test]
    fn calls_record_time_and_fuel_per_plugin() {
        use crate::runtime::CallObserver;
        let metrics = Metrics::new();
        metrics.called("web", "reconcile", std::time::Duration::from_micros(90), None);
        metrics.called("metered", "reconcile", std::time::Duration::from_micros(120), Some(5_000));
        metrics.called("metered", "desired", std::time::Duration::from_micros(80), Some(2_000));
        assert_eq!(metrics.fuel_of("metered"), 7_000);
        assert_eq!(metrics.fuel_of("web"), 0);
        assert_eq!((metrics.calls_of("metered", "reconcile"), metrics.calls_of("metered", "filter")), (1, 0));
        let text = metrics.encode();
        let count = "wasmop_plugin_call_duration_seconds_count{plugin=\"metered\",export=\"reconcile\"} 1";
        assert!(text.contains(count), "{text}");
        assert!(text.contains("wasmop_plugin_fuel_consumed_total{plugin=\"metered\"} 7000"), "{text}");
    }

    #[test]
    fn outgoing_requests_are_counted_by_origin_and_code_and_timed() {
        use crate::runtime::CallObserver;
        let metrics = Metrics::new();
        let origin = "http://127.0.0.1:8080";
        metrics.http_request("dns", origin, "200", std::time::Duration::from_millis(12));
        metrics.http_request("dns", origin, "200", std::time::Duration::from_millis(8));
        metrics.http_request("dns", "undeclared", "refused", std::time::Duration::ZERO);
        assert_eq!(metrics.http_requests_of("dns", origin, "200"), 2);
        assert_eq!(metrics.http_requests_of("dns", "undeclared", "refused"), 1);
        let text = metrics.encode();
        let count = "wasmop_plugin_http_requests_total{plugin=\"dns\",origin=\"http://127.0.0.1:8080\",code=\"200\"} 2";
        assert!(text.contains(count), "{text}");
        let timed =
            "wasmop_plugin_http_request_duration_seconds_count{plugin=\"dns\",origin=\"http://127.0.0.1:8080\"} 2";
        assert!(text.contains(timed), "{text}");
    }
}
