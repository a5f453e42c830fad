//! controller-runtime's metric names, next to the `wasmop_*` ones, so that dashboards and alerts
//! written for Go operators work unchanged: the reconcile counters, timing and workers per
//! controller (one per plugin, named after it) and the work queue's (the scheduler's) depth,
//! adds, waits, work times and retries.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::scheduler::{Observer, Verdict};

/// `controller` label.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

/// `controller` and `result` labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: ReconcileResult,
}

/// `name` label of the work queue metrics.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    name: String,
}

/// controller-runtime's `result` label values.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types, reason = "the label values controller-runtime exports")]
enum ReconcileResult {
    success,
    error,
    requeue,
    requeue_after,
}

fn seconds() -> Histogram {
    // 1 ms to about 33 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

fn queue_seconds() -> Histogram {
    // controller-runtime's work queue buckets: 1 µs to 10 s, by powers of ten.
    Histogram::new(exponential_buckets(1e-6, 10.0, 8))
}

/// The families, registered once per host.
#[derive(Clone)]
pub struct ControllerRuntime {
    reconcile_total: Family<ResultLabels, Counter>,
    reconcile_errors: Family<ControllerLabels, Counter>,
    reconcile_time: Family<ControllerLabels, Histogram, fn() -> Histogram>,
    active_workers: Family<ControllerLabels, Gauge>,
    max_concurrent: Family<ControllerLabels, Gauge>,
    depth: Family<QueueLabels, Gauge>,
    adds: Family<QueueLabels, Counter>,
    queue_duration: Family<QueueLabels, Histogram, fn() -> Histogram>,
    work_duration: Family<QueueLabels, Histogram, fn() -> Histogram>,
    retries: Family<QueueLabels, Counter>,
}

impl ControllerRuntime {
    /// The families, registered in `registry` under controller-runtime's names.
    pub fn register(registry: &mut Registry) -> Self {
        let this = Self {
            reconcile_total: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_time: Family::new_with_constructor(seconds),
            active_workers: Family::default(),
            max_concurrent: Family::default(),
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(queue_seconds),
            work_duration: Family::new_with_constructor(queue_seconds),
            retries: Family::default(),
        };
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            this.reconcile_total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            this.reconcile_errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            this.reconcile_time.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            this.active_workers.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            this.max_concurrent.clone(),
        );
        registry.register("workqueue_depth", "Current depth of workqueue", this.depth.clone());
        registry.register("workqueue_adds", "Total number of adds handled by workqueue", this.adds.clone());
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            this.queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            this.work_duration.clone(),
        );
        registry.register("workqueue_retries", "Total number of retries handled by workqueue", this.retries.clone());
        this
    }

    /// The scheduler observer of the controller of plugin `name`. It holds its series, made
    /// now (as controller-runtime makes a controller's at its start), so that a run's metrics
    /// look up no labels.
    pub fn controller(&self, name: &str) -> Arc<dyn Observer> {
        let controller = ControllerLabels { controller: name.to_string() };
        let queue = QueueLabels { name: name.to_string() };
        let total =
            |result| self.reconcile_total.get_or_create(&ResultLabels { controller: name.to_string(), result }).clone();
        Arc::new(ControllerObserver {
            max_concurrent: self.max_concurrent.get_or_create(&controller).clone(),
            active_workers: self.active_workers.get_or_create(&controller).clone(),
            reconcile_time: self.reconcile_time.get_or_create(&controller).clone(),
            reconcile_errors: self.reconcile_errors.get_or_create(&controller).clone(),
            success: total(ReconcileResult::success),
            requeue_after: total(ReconcileResult::requeue_after),
            requeue: total(ReconcileResult::requeue),
            error: total(ReconcileResult::error),
            depth: self.depth.get_or_create(&queue).clone(),
            adds: self.adds.get_or_create(&queue).clone(),
            retries: self.retries.get_or_create(&queue).clone(),
            queue_duration: self.queue_duration.get_or_create(&queue).clone(),
            work_duration: self.work_duration.get_or_create(&queue).clone(),
        })
    }
}

/// One controller's series of the families.
struct ControllerObserver {
    max_concurrent: Gauge,
    active_workers: Gauge,
    reconcile_time: Histogram,
    reconcile_errors: Counter,
    /// `controller_runtime_reconcile_total` by result.
    success: Counter,
    requeue_after: Counter,
    requeue: Counter,
    error: Counter,
    depth: Gauge,
    adds: Counter,
    retries: Counter,
    queue_duration: Histogram,
    work_duration: Histogram,
}

impl Observer for ControllerObserver {
    fn started(&self, max: usize) {
        self.max_concurrent.set(i64::try_from(max).unwrap_or(i64::MAX));
    }

    fn queue(&self, depth: usize, adds: u64, retries: u64, active: usize) {
        self.depth.set(i64::try_from(depth).unwrap_or(i64::MAX));
        self.adds.inc_by(adds);
        self.retries.inc_by(retries);
        self.active_workers.set(i64::try_from(active).unwrap_or(i64::MAX));
    }

    fn run_started(&self, waited: Duration) {
        self.queue_duration.observe(waited.as_secs_f64());
    }

    fn run_finished(&self, took: Duration, verdict: Verdict) {
        self.reconcile_time.observe(took.as_secs_f64());
        self.work_duration.observe(took.as_secs_f64());
        let total = match verdict {
            Verdict::Done { requeue_after: None } => &self.success,
            Verdict::Done { requeue_after: Some(_) } => &self.requeue_after,
            // The host added its finalizer and queued the rest (controller-runtime's `Requeue`).
            Verdict::Continue => &self.requeue,
            Verdict::Failed { .. } | Verdict::RetryAfter(_) | Verdict::Unreachable => {
                self.reconcile_errors.inc();
                &self.error
            }
        };
        total.inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;

    #[test]
    fn controller_runtime_names_count_what_the_scheduler_reports() {
        let metrics = Metrics::new();
        let observer = metrics.controller("webpage");
        // As controller-runtime's, a controller's series exist from its start, at zero.
        let text = metrics.encode();
        for line in [
            "controller_runtime_reconcile_total{controller=\"webpage\",result=\"requeue\"} 0",
            "controller_runtime_reconcile_errors_total{controller=\"webpage\"} 0",
            "workqueue_retries_total{name=\"webpage\"} 0",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
        observer.started(4);
        observer.queue(2, 3, 1, 1);
        observer.run_started(Duration::from_millis(5));
        observer.run_finished(Duration::from_millis(20), Verdict::Done { requeue_after: None });
        observer.run_finished(Duration::from_millis(20), Verdict::Failed { retry: true });
        observer.run_finished(Duration::from_millis(20), Verdict::Done { requeue_after: Some(Duration::from_secs(1)) });
        metrics.reconciled("webpage", crate::metrics::Outcome::Success);
        let text = metrics.encode();
        for line in [
            "controller_runtime_reconcile_total{controller=\"webpage\",result=\"success\"} 1",
            "controller_runtime_reconcile_total{controller=\"webpage\",result=\"error\"} 1",
            "controller_runtime_reconcile_total{controller=\"webpage\",result=\"requeue_after\"} 1",
            "controller_runtime_reconcile_errors_total{controller=\"webpage\"} 1",
            "controller_runtime_reconcile_time_seconds_count{controller=\"webpage\"} 3",
            "controller_runtime_active_workers{controller=\"webpage\"} 1",
            "controller_runtime_max_concurrent_reconciles{controller=\"webpage\"} 4",
            "workqueue_depth{name=\"webpage\"} 2",
            "workqueue_adds_total{name=\"webpage\"} 3",
            "workqueue_retries_total{name=\"webpage\"} 1",
            "workqueue_queue_duration_seconds_count{name=\"webpage\"} 1",
            "workqueue_work_duration_seconds_count{name=\"webpage\"} 3",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in:\n{text}");
        }
        assert!(text.contains("wasmop_reconciles_total{plugin=\"webpage\""), "the wasmop_* names stay: {text}");
    }
}
