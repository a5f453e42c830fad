//! The webhook endpoint's metrics under controller-runtime's names (`pkg/webhook/internal/
//! metrics`), so that dashboards written for Go operators' webhooks work unchanged: requests by
//! webhook (its path, `/validate/<plugin>`) and HTTP code, their latency, and those in flight.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// `webhook` label.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WebhookLabels {
    webhook: String,
}

/// `webhook` and `code` labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabels {
    webhook: String,
    code: String,
}

fn latency() -> Histogram {
    // 5 ms to about 10 s, as Prometheus's default buckets controller-runtime uses.
    Histogram::new(exponential_buckets(0.005, 2.0, 12))
}

/// The webhook families, registered once per host.
pub struct WebhookMetrics {
    requests: Family<CodeLabels, Counter>,
    latency: Family<WebhookLabels, Histogram, fn() -> Histogram>,
    in_flight: Family<WebhookLabels, Gauge>,
}

impl WebhookMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let this = Self {
            requests: Family::default(),
            latency: Family::new_with_constructor(latency),
            in_flight: Family::default(),
        };
        registry.register(
            "controller_runtime_webhook_requests",
            "Total number of admission requests by HTTP status code.",
            this.requests.clone(),
        );
        registry.register(
            "controller_runtime_webhook_latency_seconds",
            "Histogram of the latency of processing admission requests",
            this.latency.clone(),
        );
        registry.register(
            "controller_runtime_webhook_requests_in_flight",
            "Current number of admission requests being served.",
            this.in_flight.clone(),
        );
        this
    }

    /// Counts a request of `webhook` in flight until the guard returned is dropped.
    pub fn in_flight(&self, webhook: &str) -> InFlight {
        let gauge = self.in_flight.get_or_create(&WebhookLabels { webhook: webhook.to_string() }).clone();
        gauge.inc();
        InFlight(gauge)
    }

    /// Counts a request of `webhook` answered with `code` after `took`.
    pub fn answered(&self, webhook: &str, code: u16, took: Duration) {
        let labels = CodeLabels { webhook: webhook.to_string(), code: code.to_string() };
        self.requests.get_or_create(&labels).inc();
        self.latency.get_or_create(&WebhookLabels { webhook: webhook.to_string() }).observe(took.as_secs_f64());
    }

    /// Requests of `webhook` answered with `code` so far.
    pub fn requests_of(&self, webhook: &str, code: u16) -> u64 {
        self.requests.get_or_create(&CodeLabels { webhook: webhook.to_string(), code: code.to_string() }).get()
    }
}

/// A request in flight: counted in `controller_runtime_webhook_requests_in_flight` while alive.
pub struct InFlight(Gauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use crate::metrics::Metrics;
    use std::time::Duration;

    #[test]
    fn requests_are_counted_under_controller_runtimes_names() {
        let metrics = Metrics::new();
        let webhooks = metrics.webhooks();
        let flying = webhooks.in_flight("/validate/webpage");
        assert!(
            metrics.encode().contains("controller_runtime_webhook_requests_in_flight{webhook=\"/validate/webpage\"} 1")
        );
        drop(flying);
        webhooks.answered("/validate/webpage", 200, Duration::from_millis(3));
        let text = metrics.encode();
        for line in [
            "controller_runtime_webhook_requests_total{webhook=\"/validate/webpage\",code=\"200\"} 1",
            "controller_runtime_webhook_latency_seconds_count{webhook=\"/validate/webpage\"} 1",
            "controller_runtime_webhook_requests_in_flight{webhook=\"/validate/webpage\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in:\n{text}");
        }
        assert_eq!(webhooks.requests_of("/validate/webpage", 200), 1);
    }
}
