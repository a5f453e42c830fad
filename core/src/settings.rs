//! A plugin's settings, defined once, in the words users write them: the overrides file, a
//! `ReconcilerPlugin`'s `spec.overrides` and `wasmop inspect` all use this one shape
//! (camelCase, durations in milliseconds). A plugin's `describe()` is converted into it once, at
//! the host's edge; the overrides are laid over it ([`Settings::over`]), and the host fills in
//! its defaults for what neither says.

use serde::{Deserialize, Serialize};

use crate::filter::Filters;

/// Reconcile settings; every field is optional: absent means "not said here".
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Settings {
    /// Watch only this namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Label selector of the primary watch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
    /// Field selector of the primary watch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field_selector: Option<String>,
    /// Generation-aware filtering on or off (beats the `filters` block's own field).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation_aware: Option<bool>,
    /// Event filters; every field of the block must be given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filters: Option<Filters>,
    /// Retry policy; absent fields keep the lower settings' values.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
    /// Maximum reconciliation interval in milliseconds; 0 turns it off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_reconcile_interval_ms: Option<u64>,
    /// Per-object rate limit; `maxReconciles: 0` turns it off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
    /// Concurrent reconciles of this plugin.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrent_reconciles: Option<u32>,
    /// Resync period in milliseconds; 0 turns it off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resync_period_ms: Option<u64>,
    /// Sandbox limits of every call; absent fields keep the host's defaults.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    /// Write as this ServiceAccount (impersonated), so that cluster RBAC bounds the plugin.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccount>,
    /// Bound the caches of the primary and the declared watches (not the dependents').
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheBudget>,
    /// How a host run with `--shards` splits the primaries across replicas; a plugin declares
    /// its own in `describe()` (contract 0.7.0), and an override beats it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sharding: Option<Sharding>,
    /// Which reconciles a host run with `--record DIR` records, and how much it keeps
    /// ([`crate::record::select`]); taken whole, not merged field by field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<crate::record::select::Recording>,
    /// Secrets the host may read for the plugin (its `http` grant's secret headers, its inbound
    /// token) whatever the plugin's own identity may read. The operator's word only: taken from
    /// the overrides, never from a plugin's `describe()` ([`Settings::over`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_secrets: Option<Vec<AllowedSecret>>,
    /// Plain `http://host:port` origins of the plugin's `http` grant that its secret headers may
    /// be sent to unencrypted (a service on the node, a test); every other origin with secret
    /// headers must be `https`. The operator's word only, as `allowed_secrets`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_plain_http_secrets: Option<Vec<String>>,
    /// Whether the plugin may have the host watch Secrets for it (a primary, watch or dependent
    /// of kind `v1/Secret`), reading every Secret those watches cover whatever its own identity
    /// may list. Without it, only a plugin whose ServiceAccount may list and watch them may. The
    /// operator's word only, as `allowed_secrets`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_secret_watches: Option<bool>,
}

/// How the primaries are split across sharded replicas.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Sharding {
    /// By the primary's UID: objects spread evenly (the default).
    #[default]
    Uid,
    /// By the primary's namespace: a namespace and its dependents stay on one replica.
    Namespace,
    /// Not sharded: the leader alone runs the plugin.
    None,
}

impl Sharding {
    /// The shard key; `None` when not sharded.
    pub fn key(self) -> Option<crate::shard::ShardKey> {
        match self {
            Sharding::Uid => Some(crate::shard::ShardKey::Uid),
            Sharding::Namespace => Some(crate::shard::ShardKey::Namespace),
            Sharding::None => None,
        }
    }
}

/// A plugin's bounded caches: warm objects within a byte budget; cold ones are fetched from
/// the API server again when read (JOSDK's bounded caches).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CacheBudget {
    /// The plugin's budget in MiB, counted by the host's estimate of each object's heap bytes;
    /// within the host's budget (`--cache-budget-mib`) when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_mib: Option<u64>,
    /// Evict objects not read or changed for this many milliseconds, whatever the budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_ms: Option<u64>,
}

/// Retry policy (JOSDK's GenericRetry); absent fields keep the lower settings' values.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Retry {
    /// Retries after the first failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// First delay in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_interval_ms: Option<u64>,
    /// Growth factor of the delay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multiplier: Option<f64>,
    /// Cap of the delay in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_interval_ms: Option<u64>,
    /// Random spread as a fraction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter: Option<f64>,
}

/// At most `maxReconciles` reconciles of one object per `periodMs`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateLimit {
    /// Reconciles per window; 0 turns the limit off.
    pub max_reconciles: u32,
    /// Window length in milliseconds.
    pub period_ms: u64,
}

/// Sandbox limits of one call; absent fields keep the host's defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Limits {
    /// Wall-clock budget of one call in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
    /// Memory cap of one instance in MiB (1 to 4096).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<MemoryMib>,
    /// Fuel budget of one call; 0 runs unmetered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fuel: Option<u64>,
}

/// A ServiceAccount the host impersonates.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceAccount {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// A Secret the operator lets the host read for a plugin.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AllowedSecret {
    /// Its namespace; absent: the host's `--namespace`, else `default` (where a plugin's Secret
    /// that names no namespace is read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

impl ServiceAccount {
    /// The user name the API server knows it by.
    pub fn user(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }
}

impl Settings {
    /// These settings laid over `lower`: what these say wins; the retry policy and the limits
    /// merge field by field. What only the operator may say (`allowed_secrets`,
    /// `allow_plain_http_secrets`, `allow_secret_watches`) is taken from these settings alone: `lower` is a plugin's own
    /// word.
    pub fn over(&self, lower: &Settings) -> Settings {
        fn pick<T: Clone>(high: &Option<T>, low: &Option<T>) -> Option<T> {
            high.clone().or_else(|| low.clone())
        }
        let retry = match (&self.retry, &lower.retry) {
            (Some(high), Some(low)) => Some(Retry {
                max_attempts: high.max_attempts.or(low.max_attempts),
                initial_interval_ms: high.initial_interval_ms.or(low.initial_interval_ms),
                multiplier: high.multiplier.or(low.multiplier),
                max_interval_ms: high.max_interval_ms.or(low.max_interval_ms),
                jitter: high.jitter.or(low.jitter),
            }),
            (high, low) => pick(high, low),
        };
        let limits = match (&self.limits, &lower.limits) {
            (Some(high), Some(low)) => Some(Limits {
                deadline_ms: high.deadline_ms.or(low.deadline_ms),
                memory_mib: high.memory_mib.or(low.memory_mib),
                fuel: high.fuel.or(low.fuel),
            }),
            (high, low) => pick(high, low),
        };
        Settings {
            namespace: pick(&self.namespace, &lower.namespace),
            label_selector: pick(&self.label_selector, &lower.label_selector),
            field_selector: pick(&self.field_selector, &lower.field_selector),
            generation_aware: pick(&self.generation_aware, &lower.generation_aware),
            filters: pick(&self.filters, &lower.filters),
            retry,
            max_reconcile_interval_ms: pick(&self.max_reconcile_interval_ms, &lower.max_reconcile_interval_ms),
            rate_limit: pick(&self.rate_limit, &lower.rate_limit),
            max_concurrent_reconciles: pick(&self.max_concurrent_reconciles, &lower.max_concurrent_reconciles),
            resync_period_ms: pick(&self.resync_period_ms, &lower.resync_period_ms),
            limits,
            service_account: pick(&self.service_account, &lower.service_account),
            cache: match (self.cache, lower.cache) {
                (Some(high), Some(low)) => Some(CacheBudget {
                    budget_mib: high.budget_mib.or(low.budget_mib),
                    idle_ms: high.idle_ms.or(low.idle_ms),
                }),
                (high, low) => high.or(low),
            },
            sharding: self.sharding.or(lower.sharding),
            record: pick(&self.record, &lower.record),
            allowed_secrets: self.allowed_secrets.clone(),
            allow_plain_http_secrets: self.allow_plain_http_secrets.clone(),
            allow_secret_watches: self.allow_secret_watches,
        }
    }
}

/// A memory cap in MiB, checked to lie within 1 to 4096 MiB: a wasm32 memory cannot grow past
/// 4 GiB, and the byte count can then never overflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(try_from = "u64", into = "u64")]
pub struct MemoryMib(u32);

impl MemoryMib {
    /// The largest cap: all a wasm32 memory can address.
    pub const MAX: u32 = 4096;

    /// The cap in bytes.
    pub fn bytes(self) -> usize {
        usize::try_from(u64::from(self.0) << 20).unwrap_or(usize::MAX)
    }
}

impl TryFrom<u64> for MemoryMib {
    type Error = String;

    fn try_from(mib: u64) -> Result<Self, Self::Error> {
        match u32::try_from(mib) {
            Ok(mib @ 1..=Self::MAX) => Ok(Self(mib)),
            _ => Err(format!(
                "a memory limit of {mib} MiB is out of range: 1 to {} MiB (a wasm32 memory cannot exceed 4 GiB)",
                Self::MAX
            )),
        }
    }
}

impl std::str::FromStr for MemoryMib {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse::<u64>().map_err(|e| format!("{s:?} is not a number of MiB: {e}"))?.try_into()
    }
}

impl std::fmt::Display for MemoryMib {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl From<MemoryMib> for u64 {
    fn from(mib: MemoryMib) -> u64 {
        u64::from(mib.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_caps_are_checked_before_they_become_bytes() {
        assert_eq!("64".parse::<MemoryMib>().unwrap().bytes(), 64 << 20);
        assert_eq!("4096".parse::<MemoryMib>().unwrap().bytes(), 4 << 30);
        for bad in ["0", "4097", "18446744073709551615", "-1", "lots"] {
            let err = bad.parse::<MemoryMib>().unwrap_err();
            assert!(err.contains("MiB"), "{bad}: {err}");
        }
    }

    #[test]
    fn higher_settings_win_and_retry_merges_field_by_field() {
        let plugin = Settings {
            label_selector: Some("app=a".into()),
            retry: Some(Retry { max_attempts: Some(5), initial_interval_ms: Some(100), ..Retry::default() }),
            ..Settings::default()
        };
        let overrides = Settings {
            namespace: Some("ns".into()),
            retry: Some(Retry { max_attempts: Some(2), ..Retry::default() }),
            ..Settings::default()
        };
        let merged = overrides.over(&plugin);
        assert_eq!(merged.namespace.as_deref(), Some("ns"));
        assert_eq!(merged.label_selector.as_deref(), Some("app=a"));
        let retry = merged.retry.unwrap();
        assert_eq!((retry.max_attempts, retry.initial_interval_ms), (Some(2), Some(100)));
    }

    #[test]
    fn what_only_the_operator_may_say_never_comes_from_the_lower_settings() {
        let plugin = Settings {
            allowed_secrets: Some(vec![AllowedSecret { namespace: None, name: "registry".into() }]),
            allow_plain_http_secrets: Some(vec!["http://10.0.0.1:80".into()]),
            allow_secret_watches: Some(true),
            ..Settings::default()
        };
        let merged = Settings::default().over(&plugin);
        assert_eq!((merged.allowed_secrets, merged.allow_plain_http_secrets), (None, None));
        assert_eq!(merged.allow_secret_watches, None);
        let yaml_like = serde_json::json!({
            "allowedSecrets": [{ "name": "dns-api-token" }, { "namespace": "ops", "name": "hook" }],
            "allowPlainHttpSecrets": ["http://127.0.0.1:18053"],
            "allowSecretWatches": false,
        });
        let operator: Settings = serde_json::from_value(yaml_like.clone()).unwrap();
        assert_eq!(serde_json::to_value(operator.over(&plugin)).unwrap(), yaml_like);
        let keyed = serde_json::json!({ "allowedSecrets": [{ "name": "s", "key": "token" }] });
        let err = serde_json::from_value::<Settings>(keyed).unwrap_err();
        assert!(err.to_string().contains("unknown field `key`"), "{err}");
    }

    #[test]
    fn settings_read_and_write_in_the_same_words() {
        let yaml_like =
            serde_json::json!({ "retry": { "maxAttempts": 3 }, "limits": { "memoryMib": 16 }, "resyncPeriodMs": 0 });
        let settings: Settings = serde_json::from_value(yaml_like.clone()).unwrap();
        assert_eq!(serde_json::to_value(&settings).unwrap(), yaml_like);
        let unknown = serde_json::from_value::<Settings>(serde_json::json!({ "retries": 3 })).unwrap_err();
        assert!(unknown.to_string().contains("unknown field `retries`"), "{unknown}");
    }
}
