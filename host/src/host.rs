//! The host: loads plugins and runs one controller per plugin on a shared client and runtime.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kube::Client;
use tokio_util::sync::CancellationToken;

use tokio::sync::Semaphore;

use crate::controller;
use crate::informer::Registry;
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
}

/// Runs a controller per module until `shutdown` fires.
pub async fn run(client: Client, modules: Vec<Arc<Module>>, settings: HostSettings, shutdown: CancellationToken) {
    let global = Arc::new(Semaphore::new(settings.max_concurrent_reconciles.max(1)));
    let registry = Registry::new(client.clone());
    let mut controllers = tokio::task::JoinSet::new();
    for module in modules {
        let overrides = settings.config.plugins.get(module.name()).cloned().unwrap_or_default();
        let resolved = resolve(module.config(), &overrides, &settings.defaults);
        tracing::info!(plugin = module.name(), digest = module.digest(), path = %module.path().display(), ?resolved, "plugin loaded");
        let registry = registry.clone();
        controllers.spawn(controller::run(
            module,
            client.clone(),
            registry,
            resolved,
            Some(global.clone()),
            shutdown.clone(),
        ));
    }
    while let Some(done) = controllers.join_next().await {
        if let Err(err) = done {
            tracing::error!(%err, "a controller stopped abnormally");
        }
    }
}
