//! The host's Prometheus metrics, served on `/metrics` (`wasmop run --metrics-address`).

use std::sync::Arc;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
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

/// Labels of the reconcile counter.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileLabels {
    plugin: String,
    result: Outcome,
}

/// How a reconcile ended.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum Outcome {
    /// It succeeded.
    Success,
    /// It failed (and may be retried).
    Failure,
}

/// The host's metrics; cheap to share.
pub struct Metrics {
    registry: Registry,
    writes: Family<WriteLabels, Counter>,
    conflicts: Family<PluginLabels, Counter>,
    reconciles: Family<ReconcileLabels, Counter>,
}

impl Metrics {
    /// A registry with every metric at zero.
    pub fn new() -> Arc<Self> {
        let mut registry = Registry::with_prefix("wasmop");
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
        Arc::new(Self { registry, writes, conflicts, reconciles })
    }

    /// Counts one write request of `plugin` on an object of `kind`.
    pub fn wrote(&self, plugin: &str, kind: &str, verb: Verb) {
        let labels = WriteLabels { plugin: plugin.to_string(), kind: kind.to_string(), verb };
        self.writes.get_or_create(&labels).inc();
    }

    /// Counts one conflict of `plugin`.
    pub fn conflict(&self, plugin: &str) {
        self.conflicts.get_or_create(&PluginLabels { plugin: plugin.to_string() }).inc();
    }

    /// Counts one reconcile of `plugin`.
    pub fn reconciled(&self, plugin: &str, result: Outcome) {
        self.reconciles.get_or_create(&ReconcileLabels { plugin: plugin.to_string(), result }).inc();
    }

    /// Reconciles of `plugin` that ended with `result`.
    pub fn reconciles_of(&self, plugin: &str, result: Outcome) -> u64 {
        self.reconciles.get_or_create(&ReconcileLabels { plugin: plugin.to_string(), result }).get()
    }

    /// Write requests `plugin` made so far, of every kind and verb.
    pub fn writes_of(&self, plugin: &str) -> u64 {
        let mut total = 0;
        // Families cannot be iterated; the encoded text is the source of truth.
        for line in self.encode().lines() {
            if line.starts_with("wasmop_writes_total{") && line.contains(&format!("plugin=\"{plugin}\"")) {
                total += line.rsplit(' ').next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            }
        }
        total
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

/// Serves `/metrics` and `/healthz` on `address` until `shutdown`.
pub async fn serve(
    metrics: Arc<Metrics>,
    address: std::net::SocketAddr,
    shutdown: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    use axum::routing::get;
    let app = axum::Router::new()
        .route("/metrics", get(move || async move { metrics.encode() }))
        .route("/healthz", get(|| async { "ok" }));
    let listener = tokio::net::TcpListener::bind(address).await?;
    tracing::info!(%address, "serving /metrics and /healthz");
    axum::serve(listener, app).with_graceful_shutdown(async move { shutdown.cancelled().await }).await
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
}
