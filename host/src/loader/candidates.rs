//! Candidate versions of the plugins run from files, as the configuration file names them
//! ([`crate::settings::HostConfig::candidates`]): once the plugins given at start run, each
//! candidate's file is read and shadowed beside the live version of its name through
//! [`Host::propose`], the path a `ReconcilerPlugin`'s `spec.candidate` takes too. A candidate
//! that cannot be read or loaded, that is another plugin, or whose plugin does not run from a
//! file, is logged as an error and the live version runs on alone. Candidates are read at start:
//! a new candidate file takes a restart (or a `ReconcilerPlugin`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::host::Host;

/// Shadows each of `candidates` (module file by plugin name) beside the plugin of that name
/// that one of `files` runs.
pub async fn shadow(host: &Host, candidates: &BTreeMap<String, PathBuf>, files: &[PathBuf]) {
    for (plugin, path) in candidates {
        let mut owners = files.iter().map(|file| file.display().to_string());
        let Some(owner) = owners.find(|owner| host.owned_by(owner).contains(plugin)) else {
            tracing::error!(plugin, candidate = %path.display(), "no plugin of this name runs from a file: its candidate is not shadowed");
            continue;
        };
        let proposed = match std::fs::read(path) {
            Ok(bytes) => host.propose(&owner, path, bytes, None).await.map_err(|err| err.to_string()),
            Err(err) => Err(format!("cannot read {}: {err}", path.display())),
        };
        if let Err(err) = proposed {
            tracing::error!(plugin, candidate = %path.display(), "candidate refused; the live version runs alone: {err}");
        }
    }
}
