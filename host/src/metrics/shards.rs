//! The shards' metrics (`wasmop run --shards`): this replica's owned part of the hash space, the
//! live members, handovers and how long they took, the objects its sharded watches decoded and
//! kept, and the primaries each plugin owns.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of a sharded watch's counters.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WatchLabels {
    kind: String,
}

/// Labels of a sharded watch's decoded objects.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecodedLabels {
    kind: String,
    /// `kept` (owned by this replica) or `dropped` (filtered here: the API server sent it).
    result: String,
}

/// Labels per plugin.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    plugin: String,
}

/// The shards' metric families.
pub struct ShardMetrics {
    owned: Gauge<f64, std::sync::atomic::AtomicU64>,
    member: Gauge,
    members: Gauge,
    handovers: Counter,
    handover_seconds: Histogram,
    first_run_seconds: Histogram,
    decoded: Family<DecodedLabels, Counter>,
    bytes: Family<WatchLabels, Counter>,
    server_side: Family<WatchLabels, Gauge>,
    objects: Family<PluginLabels, Gauge>,
}

impl ShardMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            owned: Gauge::default(),
            member: Gauge::default(),
            members: Gauge::default(),
            handovers: Counter::default(),
            handover_seconds: Histogram::new(exponential_buckets(0.01, 2.0, 14)),
            first_run_seconds: Histogram::new(exponential_buckets(0.01, 2.0, 14)),
            decoded: Family::default(),
            bytes: Family::default(),
            server_side: Family::default(),
            objects: Family::default(),
        };
        registry.register(
            "shard_owned_ratio",
            "The part of the shard key's hash space this replica owns, 0 to 1",
            metrics.owned.clone(),
        );
        registry.register(
            "shard_member",
            "Whether this replica holds its membership Lease (1), so it may write for what it owns, or not (0)",
            metrics.member.clone(),
        );
        registry.register(
            "shard_members",
            "Live members of the shards, as this replica sees them",
            metrics.members.clone(),
        );
        registry.register(
            "shard_handovers",
            "Membership changes this replica adopted after its first view",
            metrics.handovers.clone(),
        );
        registry.register(
            "shard_handover_duration_seconds",
            "From a membership change this replica saw to the moment every member had stopped running what it \
             lost, so this replica runs all it owns",
            metrics.handover_seconds.clone(),
        );
        registry.register(
            "shard_first_run_seconds",
            "From a membership change this replica saw to the first run it started in the new view: for \
             a replica that gained objects, the new owner's first run",
            metrics.first_run_seconds.clone(),
        );
        registry.register(
            "shard_watch_objects",
            "Objects of sharded watches decoded by this replica: kept (owned) or dropped (another replica's, \
             filtered here because the API server did not)",
            metrics.decoded.clone(),
        );
        registry.register(
            "shard_watch_bytes",
            "Bytes of list and watch responses of sharded watches this replica received",
            metrics.bytes.clone(),
        );
        registry.register(
            "shard_watch_server_side",
            "Whether the API server filters a sharded watch (its list answered with shardInfo): 1, or 0 when \
             this replica filters",
            metrics.server_side.clone(),
        );
        registry.register("shard_objects", "Primaries this replica owns, by plugin", metrics.objects.clone());
        metrics
    }

    /// This replica's view changed: it owns `share` of the hash space among `members`;
    /// `handover` when it is not the first view.
    pub fn view(&self, share: f64, members: usize, handover: bool) {
        self.owned.set(share);
        self.members.set(i64::try_from(members).unwrap_or(i64::MAX));
        if handover {
            self.handovers.inc();
        }
    }

    /// Whether this replica holds its membership Lease.
    pub fn member(&self, held: bool) {
        self.member.set(i64::from(held));
    }

    /// A view settled `seconds` after the membership changed.
    pub fn settled(&self, seconds: f64) {
        self.handover_seconds.observe(seconds);
    }

    /// The first run of a view started `seconds` after the membership changed.
    pub fn first_run(&self, seconds: f64) {
        self.first_run_seconds.observe(seconds);
    }

    /// A sharded watch of `kind` decoded an object; `kept` when this replica owns it.
    pub fn decoded(&self, kind: &str, kept: bool) {
        let result = if kept { "kept" } else { "dropped" };
        self.decoded.get_or_create(&DecodedLabels { kind: kind.to_string(), result: result.to_string() }).inc();
    }

    /// A sharded watch of `kind` received `bytes` of a response.
    pub fn bytes(&self, kind: &str, bytes: u64) {
        self.bytes.get_or_create(&WatchLabels { kind: kind.to_string() }).inc_by(bytes);
    }

    /// Whether the API server filters the sharded watch of `kind`.
    pub fn server_side(&self, kind: &str, filtered: bool) {
        self.server_side.get_or_create(&WatchLabels { kind: kind.to_string() }).set(i64::from(filtered));
    }

    /// `plugin` owns `objects` primaries.
    pub fn objects(&self, plugin: &str, objects: usize) {
        self.objects
            .get_or_create(&PluginLabels { plugin: plugin.to_string() })
            .set(i64::try_from(objects).unwrap_or(i64::MAX));
    }
}
