//! The host: loads plugins and runs one controller per plugin on shared clusters, watches and
//! runtime; controllers start and stop while the others keep running.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::controller;
use crate::informer::{Clusters, UnknownCluster};
use crate::metrics::Metrics;
use crate::runtime::{LoadError, Module, Runtime};
use crate::settings::{Defaults, HostConfig, resolve};

/// Errors of starting the host.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// One or more plugin files were refused.
    #[error("{} plugin(s) refused:\n  {}", .0.len(), .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  "))]
    PluginsRefused(Vec<LoadError>),
    /// Two plugins describe themselves with the same name.
    #[error("two plugins are named {0:?}; plugin names must be unique")]
    DuplicateName(String),
    /// A plugin directory could not be read.
    #[error("cannot read plugin directory {}: {source}", path.display())]
    DirectoryUnreadable {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// No plugin was given.
    #[error("no plugins to run: pass --plugin FILE or --plugins DIR")]
    NoPlugins,
    /// A plugin watches a cluster the host was not given.
    #[error("plugin {plugin:?} refused: {source}")]
    UnknownCluster {
        /// The plugin.
        plugin: String,
        /// Which cluster.
        #[source]
        source: UnknownCluster,
    },
}

/// Every `*.wasm` file in `dir`, sorted.
pub fn plugin_files(dir: &Path) -> Result<Vec<PathBuf>, HostError> {
    let unreadable = |source| HostError::DirectoryUnreadable { path: dir.into(), source };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let path = entry.map_err(unreadable)?.path();
        if path.extension().is_some_and(|e| e == "wasm") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Loads every file; refuses all of them together, naming each bad file and its reason.
pub fn load_all(runtime: &Runtime, files: &[PathBuf]) -> Result<Vec<Arc<Module>>, HostError> {
    if files.is_empty() {
        return Err(HostError::NoPlugins);
    }
    let mut modules = Vec::new();
    let mut errors = Vec::new();
    for file in files {
        match runtime.load(file) {
            Ok(module) => modules.push(Arc::new(module)),
            Err(err) => errors.push(err),
        }
    }
    if !errors.is_empty() {
        return Err(HostError::PluginsRefused(errors));
    }
    let mut names = HashSet::new();
    for module in &modules {
        if !names.insert(module.name()) {
            return Err(HostError::DuplicateName(module.name().to_string()));
        }
    }
    Ok(modules)
}

/// How the host runs its plugins.
#[derive(Debug, Clone)]
pub struct HostSettings {
    /// Deployment-time overrides per plugin.
    pub config: HostConfig,
    /// What applies where neither a plugin nor its overrides say.
    pub defaults: Defaults,
    /// Reconciles in flight across all plugins.
    pub max_concurrent_reconciles: usize,
    /// Where to serve `/metrics` and `/healthz`; `None` serves nothing.
    pub metrics_address: Option<std::net::SocketAddr>,
}

/// A running controller.
struct Running {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

/// Runs one controller per plugin; plugins can be started and stopped at any time, and share
/// watches (reference-counted per cluster) and the global reconcile limit.
pub struct Host {
    clusters: Clusters,
    settings: HostSettings,
    global: Arc<Semaphore>,
    metrics: Arc<Metrics>,
    controllers: Mutex<BTreeMap<String, Running>>,
}

impl Host {
    /// A host with no plugins yet.
    pub fn new(clusters: Clusters, settings: HostSettings) -> Self {
        let global = Arc::new(Semaphore::new(settings.max_concurrent_reconciles.max(1)));
        Self { clusters, settings, global, metrics: Metrics::new(), controllers: Mutex::new(BTreeMap::new()) }
    }

    /// Checks that the host can run `module`: its name is free and every cluster it watches is
    /// known.
    pub fn check(&self, module: &Module) -> Result<(), HostError> {
        if self.controllers.lock().expect("never poisoned").contains_key(module.name()) {
            return Err(HostError::DuplicateName(module.name().to_string()));
        }
        for watch in &module.config().watches {
            self.clusters
                .get(watch.cluster.as_deref())
                .map_err(|source| HostError::UnknownCluster { plugin: module.name().to_string(), source })?;
        }
        Ok(())
    }

    /// Starts the controller of `module`. Must be called within a tokio runtime.
    pub fn start(&self, module: Arc<Module>) -> Result<(), HostError> {
        self.check(&module)?;
        let overrides = self.settings.config.plugins.get(module.name()).cloned().unwrap_or_default();
        let resolved = resolve(module.config(), &overrides, &self.settings.defaults);
        tracing::info!(plugin = module.name(), digest = module.digest(), path = %module.path().display(), ?resolved, "plugin loaded");
        let stop = CancellationToken::new();
        let name = module.name().to_string();
        let task = tokio::spawn(controller::run(
            module,
            self.clusters.clone(),
            resolved,
            Some(self.global.clone()),
            self.metrics.clone(),
            stop.clone(),
        ));
        self.controllers.lock().expect("never poisoned").insert(name, Running { stop, task });
        Ok(())
    }

    /// Stops the plugin `name` and waits for its reconciles in flight; its watches stop unless
    /// another plugin uses them. Returns whether it was running.
    pub async fn stop(&self, name: &str) -> bool {
        let Some(running) = self.controllers.lock().expect("never poisoned").remove(name) else { return false };
        running.stop.cancel();
        if let Err(err) = running.task.await {
            tracing::error!(plugin = name, %err, "a controller stopped abnormally");
        }
        tracing::info!(plugin = name, "plugin unloaded");
        true
    }

    /// The names of the running plugins.
    pub fn plugins(&self) -> Vec<String> {
        self.controllers.lock().expect("never poisoned").keys().cloned().collect()
    }

    /// The clusters the host watches.
    pub fn clusters(&self) -> &Clusters {
        &self.clusters
    }

    /// The host's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Stops every plugin.
    pub async fn stop_all(&self) {
        for name in self.plugins() {
            self.stop(&name).await;
        }
    }
}

impl Drop for Host {
    /// Stops every controller without waiting for it.
    fn drop(&mut self) {
        for running in self.controllers.lock().expect("never poisoned").values() {
            running.stop.cancel();
        }
    }
}

/// Runs a controller per module until `shutdown` fires. Refuses to start any when one cannot
/// run (for example, it watches an unknown cluster).
pub async fn run(
    clusters: Clusters,
    modules: Vec<Arc<Module>>,
    settings: HostSettings,
    shutdown: CancellationToken,
) -> Result<(), HostError> {
    let host = Host::new(clusters, settings);
    for module in &modules {
        host.check(module)?;
    }
    for module in modules {
        host.start(module)?;
    }
    if let Some(address) = host.settings.metrics_address {
        let (metrics, stop) = (host.metrics.clone(), shutdown.clone());
        tokio::spawn(async move {
            if let Err(err) = crate::metrics::serve(metrics, address, stop).await {
                tracing::error!(%address, %err, "cannot serve metrics");
            }
        });
    }
    shutdown.cancelled().await;
    host.stop_all().await;
    Ok(())
}
