//! `wasmop replay RECORD`: runs a record's steps again without a cluster, every import the
//! guest makes answered from the record.
//!
//! - With the recorded module ([`exact`]): each step's calls must be the recorded ones, in
//!   order, and each ending the recorded bytes; the first call that differs is named.
//! - With another version ([`against`]): reads are answered in any order, logs whatever they
//!   say, and the endings are compared as a diff of status, desired objects and events.

use std::sync::Arc;

use wasmop_core::record::diff::{Diff, Summary, diff};
use wasmop_core::record::replay::{ReplayError, Tape};
use wasmop_core::record::{Ending, Record};

use crate::runtime::{Module, Tap};

/// Replays `record` with `module`, which must be the recorded one: `Ok` when every step made
/// the recorded calls and ended with the recorded bytes, else the first divergence.
pub async fn exact(module: &Module, record: &'static Record) -> Result<(), ReplayError> {
    for (index, step) in record.steps.iter().enumerate() {
        let tap = Tap::replaying(Tape::exact(index, step));
        let ending = module.replay(&step.request, tap.clone()).await;
        tap.finish(&ending, true)?;
    }
    Ok(())
}

/// What another version of the plugin does with a record's requests.
#[derive(Debug)]
pub struct Against {
    /// The differences between the recorded endings and the new version's.
    pub diff: Diff,
    /// A call of the new version the record could not answer (it then saw an error), if any:
    /// the diff shows what it did without the answer.
    pub unanswered: Option<ReplayError>,
}

/// Replays `record`'s requests with `module`, another version of the recorded plugin, reads
/// answered from the record in any order; the diff of the endings.
pub async fn against(module: &Module, record: &'static Record) -> Against {
    let mut endings: Vec<Ending> = Vec::new();
    let mut unanswered = None;
    for (index, step) in record.steps.iter().enumerate() {
        let tap = Tap::replaying(Tape::lenient(index, step));
        let ending = module.replay(&step.request, Arc::clone(&tap)).await;
        if let Err(error) = tap.finish(&ending, false) {
            unanswered.get_or_insert(error);
        }
        endings.push(ending);
    }
    let recorded = Summary::of(record.steps.iter().map(|step| &step.ending));
    Against { diff: diff(&recorded, &Summary::of(&endings)), unanswered }
}

/// Checks that `bytes` are the module `record` names: their sha256 is its digest.
pub fn check_digest(record: &Record, bytes: &[u8]) -> Result<(), String> {
    use sha2::{Digest, Sha256};
    let digest = format!("sha256:{}", hex::encode(Sha256::digest(bytes)));
    if digest == record.plugin.digest {
        return Ok(());
    }
    Err(format!(
        "the module is not the one the record was made with: its digest is {digest}, the record's {}; \
         use --plugin to compare another version with the record",
        record.plugin.digest
    ))
}
