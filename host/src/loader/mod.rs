//! Where plugins come from at run time: files and directories watched for changes
//! ([`files`]), and `ReconcilerPlugin` resources ([`resource`]). Both hand modules to
//! [`crate::host::Host::install`], which starts, swaps or refuses them; [`run`] starts them all,
//! and shadows the candidates the configuration file names for them ([`candidates`]).
//! The loader depends on the host, never the reverse.

pub mod candidates;
pub mod cap;
pub mod fetch;
pub mod files;
pub mod oci;
pub mod resource;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::host::{Host, HostError, plugin_files};
use crate::runtime::LoadError;

/// Where the host finds its plugins.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// Plugin files.
    pub files: Vec<PathBuf>,
    /// Directories: every `*.wasm` file in them is a plugin.
    pub dirs: Vec<PathBuf>,
    /// Candidate versions of the plugins of those files, module file by plugin name
    /// ([`candidates`]); watched too.
    pub candidates: BTreeMap<String, PathBuf>,
    /// Reload files and directories when they change.
    pub watch_files: bool,
    /// The dev source's directory (`wasmop run --dev-source`): a change in it reloads the files.
    pub dev_source: Option<crate::runtime::dev::DevSource>,
    /// Run the plugins that `ReconcilerPlugin` resources name.
    pub resources: bool,
    /// What those resources may fetch.
    pub fetch_policy: fetch::FetchPolicy,
}

/// Runs the plugins of `sources` until `shutdown` fires, serving metrics on `metrics_address`.
/// The files given at start must all load, or none runs; later changes are hot reloads, and a
/// version that fails to load is refused while the running one stays.
pub async fn run(
    host: Arc<Host>,
    sources: Sources,
    metrics_address: Option<std::net::SocketAddr>,
    shutdown: CancellationToken,
) -> Result<(), HostError> {
    let mut files = sources.files.clone();
    for dir in &sources.dirs {
        files.extend(plugin_files(dir)?);
    }
    if files.is_empty() && !sources.resources {
        return Err(HostError::NoPlugins);
    }
    let mut refused = Vec::new();
    for file in &files {
        match std::fs::read(file) {
            Err(source) => refused.push(LoadError::ReadFailed { path: file.clone(), source }),
            Ok(bytes) => match host.install(&file.display().to_string(), file, bytes, None).await {
                Ok(_) => {}
                Err(HostError::Load(err)) => refused.push(err),
                Err(err) => {
                    host.stop_all().await;
                    return Err(err);
                }
            },
        }
    }
    if !refused.is_empty() {
        host.stop_all().await;
        return Err(HostError::PluginsRefused(refused));
    }
    candidates::shadow(&host, &sources.candidates, &files).await;
    host.loaded();
    let mut tasks = tokio::task::JoinSet::new();
    if sources.watch_files {
        let (host, stop) = (host.clone(), shutdown.clone());
        tasks.spawn(files::watch(host, sources.files, sources.dirs, sources.candidates, sources.dev_source, stop));
    }
    if sources.resources {
        let (host, stop) = (host.clone(), shutdown.clone());
        tasks.spawn(resource::run(host, sources.fetch_policy.clone(), stop));
    }
    if let Some(address) = metrics_address {
        let (metrics, stop) = (host.metrics().clone(), shutdown.clone());
        let probe = host.clone();
        let ready: crate::metrics::Readiness = Arc::new(move || probe.ready());
        tasks.spawn(async move {
            if let Err(err) = crate::metrics::serve(metrics, ready, address, stop).await {
                tracing::error!(%address, %err, "cannot serve metrics");
            }
        });
    }
    shutdown.cancelled().await;
    while tasks.join_next().await.is_some() {}
    host.stop_all().await;
    Ok(())
}
