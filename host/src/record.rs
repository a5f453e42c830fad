//! Recording reconciles (`wasmop run --record DIR`): the host's steps of
//! `wasmop_core::record`. Per plugin, [`Records`] decides before a reconcile whether its calls
//! are kept ([`Records::plan`]); a reconcile that keeps them reads through a [`Recorded`] view,
//! whose recorder the runtime fills with a step per export call; once the reconcile ended,
//! [`Records::finish`] writes the record or not, redacted, within the plugin's budget.
//!
//! A plugin's records are the files `DIR/<plugin>/*.json`, and its recorded webhook calls the
//! webhook fixtures `DIR/<plugin>/*.yaml` ([`Records::review`]). The budget counts the files
//! there (a write lists the directory), so records left by an earlier run count too, and the
//! oldest go first. Writes of one plugin's records take turns, on the blocking pool.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use futures::future::BoxFuture;
use wasmop_core::ObjectKey;
use wasmop_core::record::budget::{Admission, Budget, Stored};
use wasmop_core::record::format::{self, FORMAT_VERSION, Plugin, PrimaryName};
use wasmop_core::record::select::{Plan, Secrets, Selection, SettingError};
use wasmop_core::record::{Record, Step, redact};

use crate::metrics::Metrics;
use crate::runtime::bindings::wasmop::plugin::types::KindRef;
use crate::runtime::{CacheReader, GetResult, ListResult, Recorder};
use crate::settings::RecordTo;
use crate::wire::Object;

/// One plugin's recording: which reconciles, where, within what budget.
pub struct Records {
    plugin: String,
    dir: PathBuf,
    selection: Selection,
    budget: Budget,
    secrets: Secrets,
    /// The plugin's settings, as `wasmop inspect` shows them.
    settings: serde_json::Value,
    /// Records written so far, to tell apart those of one instant.
    sequence: AtomicU64,
    /// Writes take turns, so that each sees the directory the last one left.
    turn: tokio::sync::Mutex<()>,
    metrics: Arc<Metrics>,
}

impl Records {
    /// The recording of `plugin` as `to` says; `settings` go into every record. Refused in
    /// words when the setting cannot work.
    pub fn new(
        plugin: &str,
        to: &RecordTo,
        settings: serde_json::Value,
        metrics: Arc<Metrics>,
    ) -> Result<Self, SettingError> {
        Ok(Self {
            plugin: plugin.to_string(),
            dir: to.dir.clone(),
            selection: to.recording.selection()?,
            budget: to.recording.budget(),
            secrets: to.recording.secrets,
            settings,
            sequence: AtomicU64::new(0),
            turn: tokio::sync::Mutex::new(()),
            metrics,
        })
    }

    /// The plan for a reconcile of `primary`: whether its calls are kept.
    pub fn plan(&self, primary: &Object) -> Plan {
        let primary = match self.selection.reads_primary() {
            true => serde_json::to_value(primary).unwrap_or_default(),
            false => serde_json::Value::Null,
        };
        self.selection.plan(&primary, fastrand::f64())
    }

    /// Writes the record of a reconcile of `key` by the module `digest` (hex) that ended
    /// (`failed` or not), of `steps`, when `plan` says so: redacted unless the setting keeps
    /// Secrets, within the budget. Never fails: what goes wrong is logged and counted.
    pub async fn finish(self: &Arc<Self>, plan: Plan, failed: bool, digest: &str, key: &ObjectKey, steps: Vec<Step>) {
        let Some(reason) = plan.reason(failed) else { return };
        if steps.is_empty() {
            // The plugin was not called (a finalizer was added first, the primary was gone).
            return;
        }
        let mut record = Record {
            version: FORMAT_VERSION,
            recorded_at: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            reason,
            plugin: Plugin {
                name: self.plugin.clone(),
                digest: format!("sha256:{digest}"),
                settings: self.settings.clone(),
            },
            primary: PrimaryName { namespace: key.namespace.clone(), name: key.name.clone() },
            redacted: false,
            truncated: false,
            steps,
        };
        if self.secrets == Secrets::Redact
            && let Err(err) = redact::redact(&mut record)
        {
            tracing::warn!(plugin = self.plugin, object = %key, %err, "record not written: cannot redact it");
            self.metrics.recorded(&self.plugin, 0, 0, Some("error"));
            return;
        }
        let _turn = self.turn.lock().await;
        let this = self.clone();
        let written = tokio::task::spawn_blocking(move || this.write(record)).await;
        match written {
            Ok(Ok(Some(name))) => tracing::info!(plugin = self.plugin, object = %key, record = name, "recorded"),
            Ok(Ok(None)) => {}
            Ok(Err(err)) => {
                tracing::warn!(plugin = self.plugin, object = %key, %err, dir = %self.dir.display(), "cannot write a record");
                self.metrics.recorded(&self.plugin, 0, 0, Some("error"));
            }
            Err(err) => tracing::warn!(plugin = self.plugin, %err, "the record's write stopped"),
        }
    }

    /// Writes a webhook call about `object` (`key`, answered by the endpoint's `webhook`,
    /// `validate`), as the webhook fixture `fixture` (its review and the answer it got,
    /// [`crate::webhook::fixture`]), when the plan says so: `refused` (a denial, a failed call
    /// or conversion) counts as a failure. Redacted unless the setting keeps Secrets, within the
    /// budget as records are. Never fails: what goes wrong is logged and counted.
    pub async fn review(
        self: &Arc<Self>,
        (object, key): (&serde_json::Value, &ObjectKey),
        refused: bool,
        webhook: &'static str,
        mut fixture: serde_json::Value,
    ) {
        let object = if self.selection.reads_primary() { object } else { &serde_json::Value::Null };
        let Some(reason) = self.selection.plan(object, fastrand::f64()).reason(refused) else { return };
        if self.secrets == Secrets::Redact {
            redact::redact_review(&mut fixture);
        }
        let text = match serde_saphyr::to_string(&fixture) {
            Ok(text) => text,
            Err(err) => {
                tracing::warn!(plugin = self.plugin, object = %key, %err, "webhook call not recorded");
                self.metrics.recorded(&self.plugin, 0, 0, Some("error"));
                return;
            }
        };
        let recorded_at = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
        let primary = PrimaryName { namespace: key.namespace.clone(), name: key.name.clone() };
        let sequence = self.sequence.fetch_add(1, Ordering::Relaxed) + 1;
        let what = format!("{webhook}-{}", reason.as_str());
        let name = format::file_name(&recorded_at, &primary, &what, sequence, "yaml");
        let _turn = self.turn.lock().await;
        let this = self.clone();
        let written = tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&this.dir)?;
            let admission = this.budget.admit_whole(text.into_bytes(), &stored(&this.dir)?);
            this.admit(admission, &name)
        })
        .await;
        match written {
            Ok(Ok(Some(name))) => {
                tracing::info!(plugin = self.plugin, object = %key, record = name, "webhook call recorded")
            }
            Ok(Ok(None)) => {}
            Ok(Err(err)) => {
                tracing::warn!(plugin = self.plugin, object = %key, %err, dir = %self.dir.display(), "cannot record a webhook call");
                self.metrics.recorded(&self.plugin, 0, 0, Some("error"));
            }
            Err(err) => tracing::warn!(plugin = self.plugin, %err, "the webhook call's record write stopped"),
        }
    }

    /// Admits `record` into the directory: deletes what the budget says, writes the record
    /// (to a temporary file renamed into place); its file name, `None` when it was dropped.
    fn write(&self, mut record: Record) -> std::io::Result<Option<String>> {
        std::fs::create_dir_all(&self.dir)?;
        let stored = stored(&self.dir)?;
        let admission = self.budget.admit(&mut record, &stored);
        let name = record.file_name(self.sequence.fetch_add(1, Ordering::Relaxed) + 1);
        self.admit(admission, &name)
    }

    /// Carries out `admission` of the file `name`: deletes what the budget says, writes the
    /// file (to a temporary file renamed into place); its name, `None` when it was dropped.
    fn admit(&self, admission: Admission, name: &str) -> std::io::Result<Option<String>> {
        let mut deleted = 0;
        for name in &admission.delete {
            match std::fs::remove_file(self.dir.join(name)) {
                Ok(()) => deleted += 1,
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => return Err(err),
            }
        }
        let Some(bytes) = admission.write else {
            self.metrics.recorded(&self.plugin, 0, deleted, Some("size"));
            tracing::warn!(plugin = self.plugin, "record dropped: larger than the size cap or the budget");
            return Ok(None);
        };
        let partial = self.dir.join(format!(".{name}.partial"));
        std::fs::write(&partial, &bytes)?;
        std::fs::rename(&partial, self.dir.join(name))?;
        self.metrics.recorded(&self.plugin, 1, deleted, None);
        Ok(Some(name.to_string()))
    }
}

/// The records in `dir`: its `*.json` records and `*.yaml` webhook fixtures, their sizes and
/// when they were written.
fn stored(dir: &Path) -> std::io::Result<Vec<Stored>> {
    let mut stored = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !(name.ends_with(".json") || name.ends_with(".yaml")) {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        let written_at = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        stored.push(Stored { name, bytes: meta.len(), written_at });
    }
    Ok(stored)
}

/// A reconcile's cache view whose export calls are recorded.
pub struct Recorded {
    inner: Arc<dyn CacheReader>,
    recorder: Recorder,
}

impl Recorded {
    /// `inner`, recorded.
    pub fn new(inner: Arc<dyn CacheReader>) -> Self {
        Self { inner, recorder: Recorder::default() }
    }
}

impl CacheReader for Recorded {
    fn get<'a>(&'a self, kind: &'a KindRef, namespace: Option<&'a str>, name: &'a str) -> BoxFuture<'a, GetResult> {
        self.inner.get(kind, namespace, name)
    }
    fn list<'a>(
        &'a self,
        kind: &'a KindRef,
        namespace: Option<&'a str>,
        selector: Option<&'a str>,
    ) -> BoxFuture<'a, ListResult> {
        self.inner.list(kind, namespace, selector)
    }
    fn secondaries<'a>(&'a self, kind: &'a KindRef) -> BoxFuture<'a, ListResult> {
        self.inner.secondaries(kind)
    }
    fn ask_retry_after(&self, delay: std::time::Duration) {
        self.inner.ask_retry_after(delay);
    }
    fn asked_retry_after(&self) -> Option<std::time::Duration> {
        self.inner.asked_retry_after()
    }
    fn recorder(&self) -> Option<&Recorder> {
        Some(&self.recorder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmop_core::record::select::Recording;

    fn records(dir: &Path, recording: Recording) -> Arc<Records> {
        let to = RecordTo { dir: dir.join("p"), recording };
        Arc::new(Records::new("p", &to, serde_json::json!({}), Metrics::new()).unwrap())
    }

    fn step(status: &str) -> Step {
        use wasmop_core::record::format::{Outcome, ReconcileRequest};
        use wasmop_core::record::{Ending, Request};
        let request = ReconcileRequest {
            object: "{}".into(),
            attempt: 0,
            last_attempt: false,
            dependents: vec![],
            external: vec![],
            inbound: None,
        };
        let ending = Ending::Reconciled(Outcome { status: Some(status.into()), ..Outcome::default() });
        Step { request: Request::Reconcile(request), calls: vec![], ending }
    }

    fn files(dir: &Path) -> Vec<(String, u64)> {
        let mut files: Vec<_> = stored(&dir.join("p")).unwrap().into_iter().map(|s| (s.name, s.bytes)).collect();
        files.sort();
        files
    }

    #[test]
    fn the_plan_reads_the_primary_s_labels_only_for_a_selector() {
        use wasmop_core::record::Reason;
        let object = |labels: serde_json::Value| -> Object {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "a", "labels": labels }
            }))
            .unwrap()
        };
        let dir = std::env::temp_dir();
        let selected = records(&dir, Recording { selector: Some("team=a".into()), ..Recording::default() });
        assert_eq!(selected.plan(&object(serde_json::json!({ "team": "a" }))), Plan::Record(Reason::Selected));
        assert_eq!(selected.plan(&object(serde_json::json!({ "team": "b" }))), Plan::IfFailed);
        let failed = records(&dir, Recording::default());
        assert_eq!(failed.plan(&object(serde_json::json!({ "team": "a" }))), Plan::IfFailed);
        let sampled = records(&dir, Recording { sample: 1.0, failed: false, ..Recording::default() });
        assert_eq!(sampled.plan(&object(serde_json::json!({}))), Plan::Record(Reason::Sampled));
    }

    #[tokio::test]
    async fn only_what_the_plan_picks_is_written_and_the_budget_holds() {
        let dir = std::env::temp_dir().join(format!("wasmop-records-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let key = ObjectKey { namespace: Some("ns".into()), name: "web".into() };
        let records = records(&dir, Recording::default());
        records.finish(Plan::IfFailed, false, "ab", &key, vec![step("{}")]).await;
        assert!(!dir.join("p").exists(), "a success is not recorded by default");
        records.finish(Plan::IfFailed, true, "ab", &key, vec![]).await;
        assert!(!dir.join("p").exists(), "nothing ran: no record");
        records.finish(Plan::IfFailed, true, "ab", &key, vec![step("{}")]).await;
        let written = files(&dir);
        assert_eq!(written.len(), 1);
        assert!(written[0].0.ends_with("-ns-web-failed-000001.json"), "{written:?}");
        let record = Record::from_slice(&std::fs::read(dir.join("p").join(&written[0].0)).unwrap()).unwrap();
        assert_eq!(record.plugin.digest, "sha256:ab");
        // Each record is over 4 KiB; the budget (1 MiB) holds about 200.
        let big = format!("{{\"x\":\"{}\"}}", "y".repeat(5000));
        let records = self::records(&dir, Recording { budget_mib: Some(1), ..Recording::default() });
        for _ in 0..300 {
            records.finish(Plan::IfFailed, true, "ab", &key, vec![step(&big)]).await;
        }
        let total: u64 = files(&dir).iter().map(|(_, bytes)| bytes).sum();
        assert!(total <= 1 << 20 && total > (1 << 20) - 10_000, "{total}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
