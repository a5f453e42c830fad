//! Recording a reconcile and replaying it: the pure part. The host records
//! and writes; this says what a record is and which records are kept.
//!
//! A sandboxed plugin is a function of what the host hands it: the request of each export and
//! the answers to its import calls (cache reads, clocks, random values, granted HTTP). A record
//! holds exactly that, so a replay needs no cluster: with the same module it is bit-exact, and
//! with another version it shows what the new version would do differently.
//!
//! | module | rule |
//! |---|---|
//! | [`format`](mod@format) | the record: plugin, request, every import call with its answer, ending |
//! | [`select`] | the `record` setting: which reconciles are recorded (failed, selected, sampled) |
//! | [`redact`] | no Secret data and no credentials in a record unless the setting keeps them |
//! | [`budget`] | the size cap of a record (largest answers dropped first) and the directory's budget (oldest deleted first) |
//! | [`replay`] | the tape a replay answers the guest from, and the first divergent import call |
//! | [`diff`] | a readable diff of the recorded ending and a replay's |
//!
//! What the host does with these, per plugin (its records in a directory of their own under
//! `--record DIR`, so that the plugin's budget bounds that directory):
//!
//! 1. at load, [`select::Recording::selection`] and [`select::Recording::budget`] from its
//!    `record` setting (refused in words when it cannot work);
//! 2. before a reconcile, [`select::Selection::plan`]: keep its calls or not;
//! 3. while it runs, every export call as a [`Step`] and every import call as a [`Call`];
//! 4. once it ended, [`select::Plan::reason`]: write a [`Record`] or not;
//! 5. [`redact::redact`] unless the setting keeps Secrets; [`budget::Budget::admit`] with the
//!    directory's records; the deletes and the write it answers, under [`Record::file_name`];
//!    its [`budget::Counts`] added to the metrics.
//!
//! `wasmop replay` reads a record ([`Record::from_slice`]), runs each step's export with the
//! step's request, answering imports from a [`replay::Tape`], and reports a
//! [`replay::ReplayError`] or, with another module, prints a [`diff::diff`] of the endings.

pub mod budget;
pub mod diff;
pub mod format;
pub mod redact;
pub mod replay;
pub mod select;

pub use format::{Answer, Call, Ending, Import, Reason, Record, Request, Step};

#[cfg(test)]
pub(crate) mod sample;

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::format::{Outcome, ReconcileRequest};
    use super::replay::{ReplayError, Tape};
    use super::*;

    /// A guest's `reconcile`: reads the Secret its primary names, logs its token, and reports
    /// which keys the Secret has. `call` answers its imports.
    fn guest(
        primary: &str,
        call: &mut dyn FnMut(Import) -> Result<Answer, ReplayError>,
    ) -> Result<Ending, ReplayError> {
        let primary: Value = serde_json::from_str(primary).unwrap_or_default();
        let name = primary["spec"]["secretName"].as_str().unwrap_or_default().to_owned();
        let get = Import::Get { kind: sample::core_kind("Secret"), namespace: Some("ns".into()), name };
        let Answer::Object(Ok(Some(secret))) = call(get)? else { return Ok(Ending::Trapped("no secret".into())) };
        let secret: Value = serde_json::from_str(&secret).unwrap_or_default();
        let token = secret["stringData"]["token"].as_str().unwrap_or_default();
        call(Import::Log { level: "info".into(), message: format!("token {token}"), fields: vec![] })?;
        let keys: Vec<&String> = secret["data"].as_object().map(|data| data.keys().collect()).unwrap_or_default();
        let status = json!({ "keys": keys }).to_string();
        Ok(Ending::Reconciled(Outcome { status: Some(status), ..Outcome::default() }))
    }

    /// The record of `guest` run against a cluster holding the sample's Secret.
    fn recorded() -> Record {
        let primary = sample::primary().to_string();
        let mut calls = Vec::new();
        let ending = guest(&primary, &mut |import| {
            let answer = match &import {
                Import::Get { .. } => Answer::Object(Ok(Some(sample::secret().to_string()))),
                _ => Answer::Nothing,
            };
            calls.push(Call { import, answer: answer.clone() });
            Ok(answer)
        })
        .unwrap();
        let request = ReconcileRequest {
            object: primary,
            attempt: 0,
            last_attempt: false,
            dependents: vec![],
            external: vec![],
            inbound: None,
        };
        Record { steps: vec![Step { request: Request::Reconcile(request), calls, ending }], ..sample::record() }
    }

    /// Replays `record`'s one step exactly with `guest`.
    fn replay(record: &Record) -> Result<(), ReplayError> {
        let step = &record.steps[0];
        let Request::Reconcile(request) = &step.request else { panic!("a reconcile") };
        let mut tape = Tape::exact(0, step);
        let ending = guest(&request.object, &mut |import| tape.answer(&import).cloned())?;
        tape.finish(&ending)
    }

    #[test]
    fn a_record_replays_bit_exact_with_the_same_guest() {
        assert_eq!(replay(&recorded()), Ok(()));
    }

    #[test]
    fn a_redacted_record_still_replays_bit_exact_for_a_guest_that_checks_which_keys_a_secret_has() {
        let mut record = recorded();
        redact::redact(&mut record).unwrap();
        assert!(record.redacted);
        assert!(!String::from_utf8(record.to_vec()).unwrap().contains(sample::TOKEN));
        assert_eq!(replay(&record), Ok(()));
    }

    #[test]
    fn a_record_read_back_from_what_the_budget_wrote_replays_the_same() {
        let mut record = recorded();
        redact::redact(&mut record).unwrap();
        let budget = budget::Budget { max_record_bytes: 1 << 20, budget_bytes: 1 << 30 };
        let written = budget.admit(&mut record, &[]).write.unwrap();
        assert_eq!(replay(&Record::from_slice(&written).unwrap()), Ok(()));
    }
}
