//! The shadow runs' metrics: reconciles a candidate version ran and the host compared, the
//! differences by kind, the candidate's failures by reason, and the webhook requests it
//! answered beside the live version, by outcome.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// Labels per plugin.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    plugin: String,
}

/// Labels of the differences.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DifferenceLabels {
    plugin: String,
    kind: &'static str,
}

/// Labels of the candidate's failures.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabels {
    plugin: String,
    reason: &'static str,
}

/// Labels of the webhook requests compared.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AnswerLabels {
    plugin: String,
    webhook: String,
    outcome: &'static str,
}

/// The shadow runs' metric families.
pub struct ShadowMetrics {
    reconciles: Family<PluginLabels, Counter>,
    differences: Family<DifferenceLabels, Counter>,
    failures: Family<FailureLabels, Counter>,
    answers: Family<AnswerLabels, Counter>,
}

impl ShadowMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            reconciles: Family::default(),
            differences: Family::default(),
            failures: Family::default(),
            answers: Family::default(),
        };
        registry.register(
            "shadow_reconciles",
            "Reconciles a candidate version ran beside the live one and the host compared, by plugin",
            metrics.reconciles.clone(),
        );
        registry.register(
            "shadow_differences",
            "Reconciles a candidate version ended differently from the live one, by plugin and kind: status \
             (status, labels, annotations), desired (dependents), events, verdict",
            metrics.differences.clone(),
        );
        registry.register(
            "shadow_failures",
            "Runs of a candidate version that failed (a trap: deadline, memory, panic) or were skipped \
             (Overloaded), by plugin and reason; never compared, never felt by the live version",
            metrics.failures.clone(),
        );
        registry.register(
            "shadow_webhook_requests",
            "Webhook requests a candidate version answered beside the live one and the host compared, by plugin, \
             webhook (`/validate/<plugin>`) and outcome: same (the same review response) or differed; only the \
             live version's answer is returned",
            metrics.answers.clone(),
        );
        metrics
    }

    /// Counts a webhook request of `plugin`'s `webhook` its candidate answered as the live
    /// version did (`same`) or not.
    pub fn answered(&self, plugin: &str, webhook: &str, same: bool) {
        let outcome = if same { "same" } else { "differed" };
        self.answers.get_or_create(&AnswerLabels { plugin: plugin.into(), webhook: webhook.into(), outcome }).inc();
    }

    /// Webhook requests of `plugin`'s `webhook` its candidate answered as the live version did
    /// (`same`) or not.
    pub fn answers_of(&self, plugin: &str, webhook: &str, same: bool) -> u64 {
        let outcome = if same { "same" } else { "differed" };
        self.answers.get_or_create(&AnswerLabels { plugin: plugin.into(), webhook: webhook.into(), outcome }).get()
    }

    /// Counts a compared reconcile of `plugin`'s candidate and each `kind` that differed.
    pub fn compared(&self, plugin: &str, kinds: &[&'static str]) {
        self.reconciles.get_or_create(&PluginLabels { plugin: plugin.to_string() }).inc();
        for kind in kinds {
            self.differences.get_or_create(&DifferenceLabels { plugin: plugin.to_string(), kind }).inc();
        }
    }

    /// Counts a failed or skipped run of `plugin`'s candidate.
    pub fn failed(&self, plugin: &str, reason: &'static str) {
        self.failures.get_or_create(&FailureLabels { plugin: plugin.to_string(), reason }).inc();
    }

    /// Compared reconciles of `plugin`'s candidate.
    pub fn reconciles_of(&self, plugin: &str) -> u64 {
        self.reconciles.get_or_create(&PluginLabels { plugin: plugin.to_string() }).get()
    }

    /// Reconciles of `plugin`'s candidate that differed in `kind`.
    pub fn differences_of(&self, plugin: &str, kind: &'static str) -> u64 {
        self.differences.get_or_create(&DifferenceLabels { plugin: plugin.to_string(), kind }).get()
    }

    /// Failed runs of `plugin`'s candidate with `reason`.
    pub fn failures_of(&self, plugin: &str, reason: &'static str) -> u64 {
        self.failures.get_or_create(&FailureLabels { plugin: plugin.to_string(), reason }).get()
    }
}
