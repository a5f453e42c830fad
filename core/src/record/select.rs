//! What to record: a plugin's `record` setting, and which reconciles it picks.
//!
//! ```yaml
//! record:
//!   failed: true                 # every failed reconcile (the default)
//!   selector: "team=payments"    # every reconcile of primaries matching this label selector
//!   sample: 0.01                 # and this fraction of all other reconciles
//!   secrets: redact              # or `keep`: Secret data stays in the records
//!   maxRecordKiB: 1024           # the size cap of one record
//!   budgetMiB: 256               # the total of the plugin's records on disk
//! ```
//!
//! A reconcile is recorded when it failed (and `failed` is on), when its primary matches
//! `selector`, or when the sample picks it: a random value in `[0, 1)`, which the host draws and
//! passes in, is below `sample`. Whether it failed is known only at the end, so the decision
//! comes in two parts: before the call, [`Selection::plan`] says whether the calls must be kept
//! at all ([`Plan::Skip`] when not even a failure would be recorded), and after it,
//! [`Plan::reason`] says whether the record is written, and why.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::budget::Budget;
use super::format::Reason;
use crate::selector::{LabelSelector, SelectorError};

/// The default size cap of one record, in KiB.
pub const DEFAULT_MAX_RECORD_KIB: u64 = 1024;

/// The default budget of a plugin's records, in MiB.
pub const DEFAULT_BUDGET_MIB: u64 = 256;

/// A plugin's `record` setting (camelCase, in the config file and a `ReconcilerPlugin`'s spec).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Recording {
    /// Record every failed reconcile (an error or a trap); default on.
    #[serde(default = "yes")]
    pub failed: bool,
    /// Record every reconcile of primaries matching this label selector (Kubernetes syntax).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// Record this fraction (0 to 1) of the reconciles neither of the others picks; default 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sample: f64,
    /// Whether Secret data is redacted (the default) or kept.
    #[serde(default)]
    pub secrets: Secrets,
    /// The size cap of one record, in KiB ([`DEFAULT_MAX_RECORD_KIB`] when absent).
    #[serde(default, rename = "maxRecordKiB", skip_serializing_if = "Option::is_none")]
    pub max_record_kib: Option<u64>,
    /// The budget of the plugin's records on disk, in MiB ([`DEFAULT_BUDGET_MIB`] when absent).
    #[serde(default, rename = "budgetMiB", skip_serializing_if = "Option::is_none")]
    pub budget_mib: Option<u64>,
}

/// `true`, for serde's defaults.
fn yes() -> bool {
    true
}

/// Whether a sample rate is zero, for serde.
fn is_zero(rate: &f64) -> bool {
    *rate == 0.0
}

impl Default for Recording {
    fn default() -> Self {
        Self {
            failed: true,
            selector: None,
            sample: 0.0,
            secrets: Secrets::Redact,
            max_record_kib: None,
            budget_mib: None,
        }
    }
}

/// What records do with Secret data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Secrets {
    /// Replaced by markers that keep the keys and lengths ([`crate::record::redact`]).
    #[default]
    Redact,
    /// Kept as read: for clusters where records are as protected as the Secrets.
    Keep,
}

/// A `record` setting that cannot be used.
#[derive(Debug, Clone, PartialEq)]
pub enum SettingError {
    /// The selector does not parse.
    Selector(SelectorError),
    /// The sample rate is not within 0 to 1.
    Sample(f64),
    /// A size of zero.
    Zero(&'static str),
}

impl std::fmt::Display for SettingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SettingError::Selector(e) => write!(f, "record.selector: {e}"),
            SettingError::Sample(rate) => write!(f, "record.sample: {rate} is not a fraction from 0 to 1"),
            SettingError::Zero(field) => write!(f, "record.{field}: must be above 0"),
        }
    }
}

impl std::error::Error for SettingError {}

/// A checked `record` setting, ready to pick reconciles.
#[derive(Debug, Clone)]
pub struct Selection {
    failed: bool,
    selector: Option<LabelSelector>,
    sample: f64,
}

/// What to do with one reconcile's calls, decided before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Record it, whatever its ending.
    Record(Reason),
    /// Keep its calls; write the record only if it fails.
    IfFailed,
    /// Keep nothing.
    Skip,
}

impl Recording {
    /// The setting checked: the selector parsed, the rate and sizes within bounds.
    pub fn selection(&self) -> Result<Selection, SettingError> {
        if !(0.0..=1.0).contains(&self.sample) {
            return Err(SettingError::Sample(self.sample));
        }
        if self.max_record_kib == Some(0) {
            return Err(SettingError::Zero("maxRecordKiB"));
        }
        if self.budget_mib == Some(0) {
            return Err(SettingError::Zero("budgetMiB"));
        }
        let selector = self.selector.as_deref().map(str::parse).transpose().map_err(SettingError::Selector)?;
        Ok(Selection { failed: self.failed, selector, sample: self.sample })
    }

    /// The size cap and the budget in bytes, the defaults filled in.
    pub fn budget(&self) -> Budget {
        Budget {
            max_record_bytes: self.max_record_kib.unwrap_or(DEFAULT_MAX_RECORD_KIB).saturating_mul(1 << 10),
            budget_bytes: self.budget_mib.unwrap_or(DEFAULT_BUDGET_MIB).saturating_mul(1 << 20),
        }
    }
}

impl Selection {
    /// Whether [`Selection::plan`] reads the primary (a selector is set): a host may then skip
    /// making its JSON.
    pub fn reads_primary(&self) -> bool {
        self.selector.is_some()
    }

    /// The plan for a reconcile of `primary` (JSON), `random` a value the host drew in `[0, 1)`.
    pub fn plan(&self, primary: &Value, random: f64) -> Plan {
        if self.selector.as_ref().is_some_and(|s| s.matches_object(primary)) {
            Plan::Record(Reason::Selected)
        } else if random < self.sample {
            Plan::Record(Reason::Sampled)
        } else if self.failed {
            Plan::IfFailed
        } else {
            Plan::Skip
        }
    }
}

impl Plan {
    /// Whether the calls of the reconcile must be kept while it runs.
    pub fn keeps_calls(self) -> bool {
        self != Plan::Skip
    }

    /// Why the reconcile is recorded now that it ended (`failed`: with an error or a trap), or
    /// `None` when it is not. A failure recorded for another reason is still a failure.
    pub fn reason(self, failed: bool) -> Option<Reason> {
        match self {
            _ if failed && self.keeps_calls() => Some(Reason::Failed),
            Plan::Record(reason) => Some(reason),
            Plan::IfFailed | Plan::Skip => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::record::sample;

    fn setting(yaml_like: Value) -> Recording {
        serde_json::from_value(yaml_like).unwrap()
    }

    #[test]
    fn by_default_only_failed_reconciles_are_recorded_and_secrets_redacted() {
        let recording = setting(json!({}));
        assert_eq!(recording, Recording::default());
        assert!(!recording.selection().unwrap().reads_primary());
        assert_eq!(recording.secrets, Secrets::Redact);
        assert_eq!(recording.budget(), Budget { max_record_bytes: 1 << 20, budget_bytes: 256 << 20 });
        let plan = recording.selection().unwrap().plan(&sample::primary(), 0.0);
        assert_eq!(plan, Plan::IfFailed);
        assert_eq!(plan.reason(true), Some(Reason::Failed));
        assert_eq!(plan.reason(false), None);
    }

    #[test]
    fn every_reconcile_of_a_selected_primary_is_recorded() {
        let selection = setting(json!({ "selector": "team=payments" })).selection().unwrap();
        assert!(selection.reads_primary());
        let plan = selection.plan(&sample::primary(), 0.99);
        assert_eq!(plan, Plan::Record(Reason::Selected));
        assert_eq!(plan.reason(false), Some(Reason::Selected));
        assert_eq!(plan.reason(true), Some(Reason::Failed));
        let other = json!({ "metadata": { "name": "b", "labels": { "team": "search" } } });
        assert_eq!(selection.plan(&other, 0.99), Plan::IfFailed);
    }

    #[test]
    fn the_sample_picks_by_the_random_value_passed_in() {
        let selection = setting(json!({ "sample": 0.1, "failed": false })).selection().unwrap();
        assert_eq!(selection.plan(&sample::primary(), 0.05), Plan::Record(Reason::Sampled));
        assert_eq!(selection.plan(&sample::primary(), 0.1), Plan::Skip);
        assert!(!Plan::Skip.keeps_calls());
        assert_eq!(Plan::Skip.reason(true), None);
        let picked = (0..1000).filter(|i| selection.plan(&sample::primary(), f64::from(*i) / 1000.0) != Plan::Skip);
        assert_eq!(picked.count(), 100);
    }

    #[test]
    fn the_setting_reads_as_users_write_it() {
        let recording = setting(json!({
            "failed": true, "selector": "tier in (a, b)", "sample": 0.5, "secrets": "keep",
            "maxRecordKiB": 64, "budgetMiB": 2
        }));
        assert_eq!(recording.secrets, Secrets::Keep);
        assert_eq!(recording.budget(), Budget { max_record_bytes: 64 << 10, budget_bytes: 2 << 20 });
        assert_eq!(serde_json::to_value(&recording).unwrap()["maxRecordKiB"], 64);
        assert!(serde_json::from_value::<Recording>(json!({ "when": "all" })).is_err());
    }

    #[test]
    fn a_setting_that_cannot_work_is_refused_in_words() {
        let refused = |value| setting(value).selection().unwrap_err().to_string();
        assert_eq!(refused(json!({ "sample": 1.5 })), "record.sample: 1.5 is not a fraction from 0 to 1");
        assert_eq!(refused(json!({ "budgetMiB": 0 })), "record.budgetMiB: must be above 0");
        assert_eq!(refused(json!({ "maxRecordKiB": 0 })), "record.maxRecordKiB: must be above 0");
        assert!(refused(json!({ "selector": "a in b" })).starts_with("record.selector: invalid label selector"));
    }
}
