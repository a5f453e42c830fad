//! A webhook's timeout and failure policy as the plugin declares them, and what a failed call
//! answers: the API server applies `failurePolicy` only when it gets no answer, so the host
//! answers for the plugin as the policy says when the call traps, runs past its deadline or is
//! refused by the host.

use std::time::Duration;

use crate::runtime::bindings::wasmop::plugin::types::{FailurePolicy, Webhook};

/// The API server's timeout when the plugin declares none (kubebuilder's default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The shortest and longest timeouts the API server accepts.
const TIMEOUT_RANGE: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(30));

/// How long the API server waits for `webhook`'s answer: its declared timeout within 1-30 s,
/// else [`DEFAULT_TIMEOUT`]. Whole seconds, as `timeoutSeconds` says it.
pub fn timeout(webhook: &Webhook) -> Duration {
    let declared = webhook.timeout_ms.map_or(DEFAULT_TIMEOUT, |ms| Duration::from_millis(u64::from(ms)));
    let seconds = declared.as_secs_f64().ceil() as u64;
    Duration::from_secs(seconds).clamp(TIMEOUT_RANGE.0, TIMEOUT_RANGE.1)
}

/// The deadline of the plugin's call for a webhook with `timeout`: whichever is longer of the
/// timeout less a second and 80 % of it, so that the host's answer (the plugin's, or the failure
/// policy's) reaches the API server before it gives up.
pub fn deadline(timeout: Duration) -> Duration {
    timeout.saturating_sub(Duration::from_secs(1)).max(timeout.mul_f64(0.8))
}

/// What the host answers for a plugin whose call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failed {
    /// `Fail`: the request is denied with this message.
    Denied(String),
    /// `Ignore`: the request is admitted with this warning.
    Admitted(String),
}

/// The answer of `plugin`'s webhook under `policy` when the call failed with `error`.
pub fn failed(plugin: &str, policy: FailurePolicy, error: &str) -> Failed {
    let message =
        super::bounded::text(&format!("webhook of plugin {plugin:?} failed: {error}"), super::bounded::MAX_MESSAGE);
    match policy {
        FailurePolicy::Fail => Failed::Denied(message),
        FailurePolicy::Ignore => Failed::Admitted(format!("{message} (admitted: its failure policy is Ignore)")),
    }
}

/// The `failurePolicy` value of a webhook configuration.
pub fn name(policy: FailurePolicy) -> &'static str {
    match policy {
        FailurePolicy::Fail => "Fail",
        FailurePolicy::Ignore => "Ignore",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::bindings::wasmop::plugin::types::WebhookType;

    fn webhook(timeout_ms: Option<u32>) -> Webhook {
        Webhook {
            webhook_type: WebhookType::Validating,
            kinds: Vec::new(),
            operations: Vec::new(),
            failure_policy: FailurePolicy::Fail,
            timeout_ms,
        }
    }

    #[test]
    fn the_timeout_is_kubebuilders_default_or_the_declared_one_within_the_api_servers_range() {
        assert_eq!(timeout(&webhook(None)), Duration::from_secs(10));
        assert_eq!(timeout(&webhook(Some(2500))), Duration::from_secs(3));
        assert_eq!(timeout(&webhook(Some(10))), Duration::from_secs(1));
        assert_eq!(timeout(&webhook(Some(120_000))), Duration::from_secs(30));
    }

    #[test]
    fn the_call_ends_before_the_api_server_gives_up() {
        assert_eq!(deadline(Duration::from_secs(10)), Duration::from_secs(9));
        assert_eq!(deadline(Duration::from_secs(2)), Duration::from_millis(1600));
        assert_eq!(deadline(Duration::from_secs(1)), Duration::from_millis(800));
    }

    #[test]
    fn a_failed_call_is_denied_under_fail_and_admitted_with_a_warning_under_ignore() {
        let Failed::Denied(message) = failed("webpage", FailurePolicy::Fail, "plugin trapped: boom") else {
            panic!("Fail denies")
        };
        assert_eq!(message, "webhook of plugin \"webpage\" failed: plugin trapped: boom");
        let Failed::Admitted(warning) = failed("webpage", FailurePolicy::Ignore, "deadline") else {
            panic!("Ignore admits")
        };
        assert!(warning.starts_with("webhook of plugin \"webpage\" failed: deadline"), "{warning}");
    }
}
