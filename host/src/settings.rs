//! A plugin's effective settings: what its `describe()` asks for, overridden at deployment time
//! by the host's configuration file, with the host's defaults for what neither says.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

pub use wasmop_core::settings::{AllowedSecret, Limits as LimitSettings, ServiceAccount, Settings};

use crate::ratelimit::RateLimit;
use crate::retry::RetryPolicy;
use crate::runtime::bindings::wasmop::plugin::types::PluginConfig;
use crate::runtime::{Limits, MemoryMib};
use wasmop_core::filter::Filters;

/// The default maximum reconciliation interval (JOSDK: 10 hours).
pub const DEFAULT_MAX_RECONCILE_INTERVAL: Duration = Duration::from_secs(10 * 3600);

/// Deployment-time overrides of one plugin's `describe()`: the same [`Settings`] shape (one
/// definition, in `wasmop_core::settings`); an absent field keeps the plugin's own value.
pub type Overrides = Settings;

/// `defaults` with the limit settings applied.
pub fn limits(settings: Option<&LimitSettings>, defaults: Limits) -> Limits {
    let Some(settings) = settings else { return defaults };
    Limits {
        deadline: settings.deadline_ms.map_or(defaults.deadline, Duration::from_millis),
        memory_bytes: settings.memory_mib.map_or(defaults.memory_bytes, MemoryMib::bytes),
        fuel: match settings.fuel {
            None => defaults.fuel,
            Some(0) => None,
            Some(fuel) => Some(fuel),
        },
    }
}

/// The host's configuration file (`wasmop run --config FILE`).
///
/// ```yaml
/// plugins:
///   webpage:
///     namespace: web
///     retry: { maxAttempts: 3, initialIntervalMs: 500 }
///     rateLimit: { maxReconciles: 2, periodMs: 3000 }
/// candidates:
///   webpage: /plugins/webpage-v2.wasm
/// ```
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostConfig {
    /// Overrides per plugin name.
    #[serde(default)]
    pub plugins: BTreeMap<String, Settings>,
    /// Candidate versions per plugin name: the module file shadowed beside the plugin of that
    /// name run from a file ([`crate::shadow`]), with the plugin's overrides; beside `plugins`
    /// as a `ReconcilerPlugin`'s `spec.candidate` is beside its `spec.overrides`.
    #[serde(default)]
    pub candidates: BTreeMap<String, PathBuf>,
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
    /// Where records go (`wasmop run --record DIR`), each plugin's in `DIR/<plugin>/`; `None`
    /// records nothing, whatever the plugins' `record` settings say.
    pub record_dir: Option<PathBuf>,
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
    /// The plugin's own cache budget, if it has one.
    pub cache: Option<wasmop_core::settings::CacheBudget>,
    /// How a sharded host splits its primaries: by this key, or (`None`) on the leader alone.
    pub sharding: Option<wasmop_core::shard::ShardKey>,
    /// What the plugin records and where, when the host records (`--record DIR`).
    pub record: Option<RecordTo>,
}

/// A plugin's recording: its `record` setting (the default when it has none: failed reconciles
/// only, Secrets redacted) and its own directory of records.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordTo {
    /// `DIR/<plugin>`.
    pub dir: PathBuf,
    /// The setting.
    pub recording: wasmop_core::record::select::Recording,
}

/// Combines `describe()`, the overrides and the host defaults, in that order of precedence
/// from lowest to highest: overrides beat the plugin, the plugin beats the defaults.
pub fn resolve(config: &PluginConfig, overrides: &Settings, defaults: &Defaults) -> Resolved {
    let s = overrides.over(&crate::runtime::bindings::settings(config));
    let base = RetryPolicy::default();
    let retry = match &s.retry {
        None => base,
        Some(r) => RetryPolicy {
            max_attempts: r.max_attempts.unwrap_or(base.max_attempts),
            initial_interval: r.initial_interval_ms.map_or(base.initial_interval, Duration::from_millis),
            multiplier: r.multiplier.unwrap_or(base.multiplier),
            max_interval: r.max_interval_ms.map_or(base.max_interval, Duration::from_millis),
            jitter: r.jitter.unwrap_or(base.jitter),
        },
    };
    let max_interval = match s.max_reconcile_interval_ms {
        None => Some(DEFAULT_MAX_RECONCILE_INTERVAL),
        Some(0) => None,
        Some(ms) => Some(Duration::from_millis(ms)),
    };
    let rate_limit = s
        .rate_limit
        .filter(|r| r.max_reconciles > 0 && r.period_ms > 0)
        .map(|r| RateLimit { max_reconciles: r.max_reconciles, period: Duration::from_millis(r.period_ms) });
    let mut filters = s.filters.clone().unwrap_or_default();
    if let Some(aware) = s.generation_aware {
        filters.generation_aware = aware;
    }
    let max_concurrent = s.max_concurrent_reconciles.unwrap_or(defaults.max_concurrent_reconciles).max(1) as usize;
    Resolved {
        namespace: s.namespace.or_else(|| defaults.namespace.clone()),
        label_selector: s.label_selector,
        field_selector: s.field_selector,
        filters,
        retry,
        max_interval,
        rate_limit,
        max_concurrent,
        resync_period: s.resync_period_ms.filter(|ms| *ms > 0).map(Duration::from_millis),
        cache: s.cache,
        sharding: s.sharding.unwrap_or_default().key(),
        record: defaults
            .record_dir
            .as_ref()
            .map(|dir| RecordTo { dir: dir.join(&config.name), recording: s.record.unwrap_or_default() }),
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
        Defaults { namespace: Some("default-ns".into()), max_concurrent_reconciles: 8, record_dir: None }
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
    fn the_plugins_sharding_applies_and_an_override_beats_it() {
        use crate::runtime::bindings::wasmop::plugin::types::Sharding as Declared;
        use wasmop_core::shard::ShardKey;
        let declaring = |sharding| PluginConfig { sharding: Some(sharding), ..config() };
        let plain = Overrides::default();
        assert_eq!(resolve(&config(), &plain, &defaults()).sharding, Some(ShardKey::Uid), "the host's default");
        assert_eq!(resolve(&declaring(Declared::Uid), &plain, &defaults()).sharding, Some(ShardKey::Uid));
        assert_eq!(resolve(&declaring(Declared::Namespace), &plain, &defaults()).sharding, Some(ShardKey::Namespace));
        assert_eq!(resolve(&declaring(Declared::None), &plain, &defaults()).sharding, None, "the leader alone");
        let over = |yaml: &str| serde_saphyr::from_str::<HostConfig>(yaml).unwrap().plugins["p"].clone();
        let by_uid = over("plugins:\n  p:\n    sharding: uid\n");
        assert_eq!(resolve(&declaring(Declared::None), &by_uid, &defaults()).sharding, Some(ShardKey::Uid));
        let unsharded = over("plugins:\n  p:\n    sharding: none\n");
        assert_eq!(resolve(&declaring(Declared::Namespace), &unsharded, &defaults()).sharding, None);
        let by_ns = over("plugins:\n  p:\n    maxConcurrentReconciles: 2\n");
        assert_eq!(
            resolve(&declaring(Declared::Namespace), &by_ns, &defaults()).sharding,
            Some(ShardKey::Namespace),
            "an override that says nothing of sharding keeps the plugin's"
        );
    }

    #[test]
    fn the_record_setting_comes_from_the_overrides_whole() {
        let yaml = "plugins:\n  p:\n    record: { selector: team=a, sample: 0.5, budgetMiB: 2 }\n";
        let host: HostConfig = serde_saphyr::from_str(yaml).unwrap();
        assert_eq!(resolve(&config(), &host.plugins["p"], &defaults()).record, None, "no --record DIR");
        let recording = Defaults { record_dir: Some("/records".into()), ..defaults() };
        let default = resolve(&config(), &Overrides::default(), &recording).record.unwrap();
        assert_eq!(default.dir, PathBuf::from("/records/p"));
        assert_eq!(default.recording, wasmop_core::record::select::Recording::default());
        let record = resolve(&config(), &host.plugins["p"], &recording).record.unwrap().recording;
        assert_eq!((record.selector.as_deref(), record.sample, record.budget_mib), (Some("team=a"), 0.5, Some(2)));
        assert!(record.failed);
        let err = serde_saphyr::from_str::<HostConfig>("plugins:\n  p:\n    record: { when: all }\n").unwrap_err();
        assert!(err.to_string().contains("unknown field `when`"), "{err}");
    }

    #[test]
    fn limit_overrides_replace_the_defaults_field_by_field() {
        let defaults = Limits { fuel: Some(1_000), ..Limits::default() };
        let yaml = "deadlineMs: 250\nfuel: 0\n";
        let limits = super::limits(Some(&serde_saphyr::from_str::<LimitSettings>(yaml).unwrap()), defaults);
        assert_eq!(limits, Limits { deadline: Duration::from_millis(250), fuel: None, ..Limits::default() });
        let overrides = serde_saphyr::from_str::<LimitSettings>("memoryMib: 8\nfuel: 5\n").unwrap();
        let limits = super::limits(Some(&overrides), defaults);
        assert_eq!((limits.memory_bytes, limits.fuel, limits.deadline), (8 << 20, Some(5), defaults.deadline));
    }

    #[test]
    fn a_memory_limit_out_of_range_is_an_error_not_an_overflow() {
        for mib in ["0", "4097", "17592186044416"] {
            let err = serde_saphyr::from_str::<LimitSettings>(&format!("memoryMib: {mib}\n")).unwrap_err();
            assert!(err.to_string().contains("out of range: 1 to 4096 MiB"), "{mib}: {err}");
        }
    }

    #[test]
    fn candidates_are_named_beside_the_overrides() {
        let yaml = "plugins:\n  p:\n    namespace: ns\ncandidates:\n  p: dist/p-v2.wasm\n";
        let host: HostConfig = serde_saphyr::from_str(yaml).unwrap();
        assert_eq!(host.candidates, BTreeMap::from([("p".to_string(), PathBuf::from("dist/p-v2.wasm"))]));
        assert_eq!(host.plugins["p"].namespace.as_deref(), Some("ns"));
        let err = serde_saphyr::from_str::<HostConfig>("plugins:\n  p:\n    candidate: p.wasm\n").unwrap_err();
        assert!(err.to_string().contains("unknown field `candidate`"), "{err}");
    }

    #[test]
    fn unknown_fields_in_the_configuration_are_errors() {
        let err = serde_saphyr::from_str::<HostConfig>("plugins:\n  p:\n    retries: 3\n").unwrap_err();
        assert!(err.to_string().contains("unknown field `retries`"), "{err}");
    }
}
