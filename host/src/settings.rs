//! A plugin's effective settings: what its `describe()` asks for, overridden at deployment time
//! by the host's configuration file, with the host's defaults for what neither says.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::controller::Filters;
use crate::ratelimit::RateLimit;
use crate::retry::RetryPolicy;
use crate::runtime::bindings::wasmop::plugin::types::PluginConfig;
use crate::runtime::{Limits, MemoryMib};

/// The default maximum reconciliation interval (JOSDK: 10 hours).
pub const DEFAULT_MAX_RECONCILE_INTERVAL: Duration = Duration::from_secs(10 * 3600);

/// Deployment-time overrides of one plugin's `describe()`; an absent field keeps the plugin's
/// own value. Field names are camelCase in the configuration file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Overrides {
    /// Watch only this namespace.
    pub namespace: Option<String>,
    /// Label selector of the primary watch.
    pub label_selector: Option<String>,
    /// Field selector of the primary watch.
    pub field_selector: Option<String>,
    /// Generation-aware filtering on or off.
    pub generation_aware: Option<bool>,
    /// Event filters; every field of the block must be given.
    pub filters: Option<Filters>,
    /// Retry policy; absent fields keep the plugin's values.
    pub retry: Option<RetryOverrides>,
    /// Maximum reconciliation interval in milliseconds; 0 turns it off.
    pub max_reconcile_interval_ms: Option<u64>,
    /// Per-object rate limit; `maxReconciles: 0` turns it off.
    pub rate_limit: Option<RateLimitOverrides>,
    /// Concurrent reconciles of this plugin.
    pub max_concurrent_reconciles: Option<u32>,
    /// Resync period in milliseconds; 0 turns it off.
    pub resync_period_ms: Option<u64>,
    /// Sandbox limits of every call; absent fields keep the host's defaults.
    pub limits: Option<LimitOverrides>,
    /// Write as this ServiceAccount (impersonated), so that cluster RBAC bounds the plugin.
    pub service_account: Option<ServiceAccountRef>,
}

/// Overrides of the sandbox limits.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitOverrides {
    /// Wall-clock budget of one call in milliseconds.
    pub deadline_ms: Option<u64>,
    /// Memory cap of one instance in MiB (1 to 4096).
    pub memory_mib: Option<MemoryMib>,
    /// Fuel budget of one call; 0 runs unmetered.
    pub fuel: Option<u64>,
}

impl LimitOverrides {
    /// `defaults` with these overrides applied.
    pub fn apply(&self, defaults: Limits) -> Limits {
        Limits {
            deadline: self.deadline_ms.map_or(defaults.deadline, Duration::from_millis),
            memory_bytes: self.memory_mib.map_or(defaults.memory_bytes, MemoryMib::bytes),
            fuel: match self.fuel {
                None => defaults.fuel,
                Some(0) => None,
                Some(fuel) => Some(fuel),
            },
        }
    }
}

/// A ServiceAccount the host impersonates.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceAccountRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl ServiceAccountRef {
    /// The user name the API server knows it by.
    pub fn user(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }
}

/// Overrides of the retry policy.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetryOverrides {
    /// Retries after the first failure.
    pub max_attempts: Option<u32>,
    /// First delay in milliseconds.
    pub initial_interval_ms: Option<u64>,
    /// Growth factor of the delay.
    pub multiplier: Option<f64>,
    /// Cap of the delay in milliseconds.
    pub max_interval_ms: Option<u64>,
    /// Random spread as a fraction.
    pub jitter: Option<f64>,
}

/// Override of the rate limit.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateLimitOverrides {
    /// Reconciles per window; 0 turns the limit off.
    pub max_reconciles: u32,
    /// Window length in milliseconds.
    pub period_ms: u64,
}

/// The host's configuration file (`wasmop run --config FILE`).
///
/// ```yaml
/// plugins:
///   webpage:
///     namespace: web
///     retry: { maxAttempts: 3, initialIntervalMs: 500 }
///     rateLimit: { maxReconciles: 2, periodMs: 3000 }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostConfig {
    /// Overrides per plugin name.
    #[serde(default)]
    pub plugins: BTreeMap<String, Overrides>,
}

/// Errors of reading the configuration file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read configuration {}: {source}", path.display())]
    ReadFailed {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid.
    #[error("invalid configuration {}: {source}", path.display())]
    ParseFailed {
        /// The file.
        path: std::path::PathBuf,
        /// The YAML error (boxed: it carries the location and a snippet).
        #[source]
        source: Box<serde_saphyr::Error>,
    },
}

impl HostConfig {
    /// Reads a YAML configuration file.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::ReadFailed { path: path.into(), source })?;
        serde_saphyr::from_str(&text)
            .map_err(|source| ConfigError::ParseFailed { path: path.into(), source: Box::new(source) })
    }
}

/// What the host uses for a plugin when neither `describe()` nor the overrides say.
#[derive(Debug, Clone, PartialEq)]
pub struct Defaults {
    /// Namespace to watch; `None` watches all.
    pub namespace: Option<String>,
    /// Concurrent reconciles per plugin.
    pub max_concurrent_reconciles: u32,
}

/// A plugin's effective settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// Namespace to watch; `None` watches all.
    pub namespace: Option<String>,
    /// Label selector of the primary watch.
    pub label_selector: Option<String>,
    /// Field selector of the primary watch.
    pub field_selector: Option<String>,
    /// Which changes reconcile.
    pub filters: Filters,
    /// Retry policy.
    pub retry: RetryPolicy,
    /// Maximum reconciliation interval; `None` is off.
    pub max_interval: Option<Duration>,
    /// Per-object rate limit; `None` is off.
    pub rate_limit: Option<RateLimit>,
    /// Concurrent reconciles of this plugin.
    pub max_concurrent: usize,
    /// How often every cached primary is reconciled again; `None` is never.
    pub resync_period: Option<Duration>,
}

/// Combines `describe()`, the overrides and the host defaults, in that order of precedence
/// from lowest to highest: overrides beat the plugin, the plugin beats the defaults.
pub fn resolve(config: &PluginConfig, overrides: &Overrides, defaults: &Defaults) -> Resolved {
    let plugin_retry = config.retry.as_ref().map_or_else(RetryPolicy::default, |r| RetryPolicy {
        max_attempts: r.max_attempts,
        initial_interval: Duration::from_millis(r.initial_interval_ms),
        multiplier: r.multiplier,
        max_interval: Duration::from_millis(r.max_interval_ms),
        jitter: r.jitter,
    });
    let retry = match &overrides.retry {
        None => plugin_retry,
        Some(o) => RetryPolicy {
            max_attempts: o.max_attempts.unwrap_or(plugin_retry.max_attempts),
            initial_interval: o.initial_interval_ms.map_or(plugin_retry.initial_interval, Duration::from_millis),
            multiplier: o.multiplier.unwrap_or(plugin_retry.multiplier),
            max_interval: o.max_interval_ms.map_or(plugin_retry.max_interval, Duration::from_millis),
            jitter: o.jitter.unwrap_or(plugin_retry.jitter),
        },
    };
    let max_interval = match overrides.max_reconcile_interval_ms.or(config.max_reconcile_interval_ms) {
        None => Some(DEFAULT_MAX_RECONCILE_INTERVAL),
        Some(0) => None,
        Some(ms) => Some(Duration::from_millis(ms)),
    };
    let rate_limit = match &overrides.rate_limit {
        Some(o) => (o.max_reconciles, o.period_ms),
        None => config.rate_limit.as_ref().map_or((0, 0), |r| (r.max_reconciles, r.period_ms)),
    };
    let rate_limit = (rate_limit.0 > 0 && rate_limit.1 > 0)
        .then(|| RateLimit { max_reconciles: rate_limit.0, period: Duration::from_millis(rate_limit.1) });
    let mut filters = overrides.filters.clone().unwrap_or_else(|| Filters::from_config(config));
    if let Some(aware) = overrides.generation_aware {
        filters.generation_aware = aware;
    }
    let max_concurrent = overrides
        .max_concurrent_reconciles
        .or(config.max_concurrent_reconciles)
        .unwrap_or(defaults.max_concurrent_reconciles)
        .max(1) as usize;
    Resolved {
        namespace: overrides.namespace.clone().or_else(|| defaults.namespace.clone()),
        label_selector: overrides.label_selector.clone().or_else(|| config.label_selector.clone()),
        field_selector: overrides.field_selector.clone().or_else(|| config.field_selector.clone()),
        filters,
        retry,
        max_interval,
        rate_limit,
        max_concurrent,
        resync_period: overrides
            .resync_period_ms
            .or(config.resync_period_ms)
            .filter(|ms| *ms > 0)
            .map(Duration::from_millis),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::bindings::wasmop::plugin::types::RateLimit as WitRateLimit;

    fn config() -> PluginConfig {
        PluginConfig {
            label_selector: Some("app=a".into()),
            rate_limit: Some(WitRateLimit { max_reconciles: 5, period_ms: 1000 }),
            ..crate::runtime::bindings::test_config("K")
        }
    }

    fn defaults() -> Defaults {
        Defaults { namespace: Some("default-ns".into()), max_concurrent_reconciles: 8 }
    }

    #[test]
    fn without_overrides_the_plugin_and_host_defaults_apply() {
        let r = resolve(&config(), &Overrides::default(), &defaults());
        assert_eq!(r.retry, RetryPolicy::default());
        assert_eq!(r.max_interval, Some(DEFAULT_MAX_RECONCILE_INTERVAL));
        assert_eq!(r.rate_limit, Some(RateLimit { max_reconciles: 5, period: Duration::from_secs(1) }));
        assert_eq!(r.max_concurrent, 8);
        assert_eq!(r.namespace.as_deref(), Some("default-ns"));
        assert_eq!(r.label_selector.as_deref(), Some("app=a"));
        assert!(r.filters.generation_aware);
        assert_eq!(r.resync_period, None);
    }

    #[test]
    fn overrides_beat_the_plugin_field_by_field() {
        let yaml = "plugins:\n  p:\n    namespace: ns\n    retry: { maxAttempts: 2 }\n    rateLimit: { maxReconciles: 0, periodMs: 0 }\n    maxReconcileIntervalMs: 0\n    resyncPeriodMs: 60000\n    generationAware: false\n    maxConcurrentReconciles: 3\n";
        let host: HostConfig = serde_saphyr::from_str(yaml).unwrap();
        let r = resolve(&config(), &host.plugins["p"], &defaults());
        assert_eq!(r.retry, RetryPolicy { max_attempts: 2, ..RetryPolicy::default() });
        assert_eq!(r.rate_limit, None);
        assert_eq!(r.max_interval, None);
        assert_eq!(r.resync_period, Some(Duration::from_secs(60)));
        assert!(!r.filters.generation_aware);
        assert_eq!(r.max_concurrent, 3);
        assert_eq!(r.namespace.as_deref(), Some("ns"));
    }

    #[test]
    fn limit_overrides_replace_the_defaults_field_by_field() {
        let defaults = Limits { fuel: Some(1_000), ..Limits::default() };
        let yaml = "deadlineMs: 250\nfuel: 0\n";
        let limits = serde_saphyr::from_str::<LimitOverrides>(yaml).unwrap().apply(defaults);
        assert_eq!(limits, Limits { deadline: Duration::from_millis(250), fuel: None, ..Limits::default() });
        let overrides = serde_saphyr::from_str::<LimitOverrides>("memoryMib: 8\nfuel: 5\n").unwrap();
        let limits = overrides.apply(defaults);
        assert_eq!((limits.memory_bytes, limits.fuel, limits.deadline), (8 << 20, Some(5), defaults.deadline));
    }

    #[test]
    fn a_memory_limit_out_of_range_is_an_error_not_an_overflow() {
        for mib in ["0", "4097", "17592186044416"] {
            let err = serde_saphyr::from_str::<LimitOverrides>(&format!("memoryMib: {mib}\n")).unwrap_err();
            assert!(err.to_string().contains("out of range: 1 to 4096 MiB"), "{mib}: {err}");
        }
    }

    #[test]
    fn unknown_fields_in_the_configuration_are_errors() {
        let err = serde_saphyr::from_str::<HostConfig>("plugins:\n  p:\n    retries: 3\n").unwrap_err();
        assert!(err.to_string().contains("unknown field `retries`"), "{err}");
    }
}
