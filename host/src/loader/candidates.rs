//! Candidate versions of the plugins run from files, as the configuration file names them
//! ([`crate::settings::HostConfig::candidates`]): once the plugins given at start run, each
//! candidate's file is read and shadowed beside the live version of its name through
//! [`Host::propose`], the path a `ReconcilerPlugin`'s `spec.candidate` takes too. With
//! `--watch`, a candidate file that changes is read again ([`super::files`]): new bytes make a
//! new candidate, a file gone drops it, and a plugin file started again gets its candidate back.
//! A candidate that cannot be read or loaded, that is another plugin, or whose plugin does not
//! run from a file, is logged as an error and the live version runs on alone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::host::Host;

/// Shadows each of `candidates` (module file by plugin name) beside the plugin of that name
/// that one of `files` runs.
pub async fn shadow(host: &Host, candidates: &BTreeMap<String, PathBuf>, files: &[PathBuf]) {
    for (plugin, path) in candidates {
        reread(host, plugin, path, files).await;
    }
}

/// Reads the candidate file `path` of `plugin` and shadows what it holds beside the plugin of
/// that name that one of `files` runs; a file gone drops the candidate.
pub async fn reread(host: &Host, plugin: &str, path: &Path, files: &[PathBuf]) {
    let mut owners = files.iter().map(|file| file.display().to_string());
    let Some(owner) = owners.find(|owner| host.owned_by(owner).iter().any(|name| name == plugin)) else {
        tracing::error!(plugin, candidate = %path.display(), "no plugin of this name runs from a file: its candidate is not shadowed");
        return;
    };
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        // Removed: the candidate it held is dropped.
        Err(err) if err.kind() == std::io::ErrorKind::NotFound && host.shadowed(plugin).is_some() => {
            host.abandon(&owner);
            return;
        }
        Err(err) => {
            tracing::error!(plugin, candidate = %path.display(), %err, "cannot read the candidate; the live version runs alone");
            return;
        }
    };
    if let Err(err) = host.propose(&owner, path, bytes, None).await {
        tracing::error!(plugin, candidate = %path.display(), "candidate refused; the live version runs alone: {err}");
    }
}
