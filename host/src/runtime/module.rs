//! A loaded plugin: its configuration and a pre-linked instance factory.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use wasmtime::{Engine, Store, Trap};

use super::bindings::PluginPre;
use super::bindings::wasmop::plugin::types::{
    CleanupOutcome, DesiredObject, Finalizer, Mapper, ObjectRef, Outcome, PluginConfig, ReconcileError,
    ReconcileRequest, SecondaryRef,
};
use super::error::{CallError, LoadError};
use super::limits::Limits;
use super::sandbox::{CacheReader, NoCache, Sandbox};
use super::{CallObserver, EPOCH_TICK};

/// What `reconcile` returned: an outcome or the plugin's own error.
pub type GuestResult = Result<Outcome, ReconcileError>;

/// A compiled, linked and described plugin, ready to be called any number of times.
pub struct Module {
    path: PathBuf,
    digest: String,
    config: PluginConfig,
    instances: Instances,
}

/// Makes a fresh sandboxed instance per call, within the plugin's limits.
pub(crate) struct Instances {
    pre: PluginPre<Sandbox>,
    engine: Engine,
    /// Whether `engine` meters fuel.
    metered: bool,
    limits: Limits,
    observer: Arc<dyn CallObserver>,
}

/// A plugin's current version: each reconcile takes the version current when it starts and
/// finishes on it, while a hot reload replaces it for the next ones.
pub struct Current(RwLock<Arc<Module>>);

impl Current {
    /// Holds `module` as the current version.
    pub fn new(module: Arc<Module>) -> Arc<Self> {
        Arc::new(Self(RwLock::new(module)))
    }

    /// The current version.
    pub fn get(&self) -> Arc<Module> {
        self.0.read().expect("never poisoned").clone()
    }

    /// Makes `module` the current version; returns the one it replaces.
    pub fn replace(&self, module: Arc<Module>) -> Arc<Module> {
        std::mem::replace(&mut *self.0.write().expect("never poisoned"), module)
    }
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module")
            .field("path", &self.path)
            .field("digest", &self.digest)
            .field("config", &self.config)
            .finish()
    }
}

impl Module {
    /// Calls `describe()` on a fresh instance and validates the answer.
    pub(crate) fn describe(path: &Path, digest: String, instances: Instances) -> Result<Self, LoadError> {
        let config = instances
            .call("", "describe", Arc::new(NoCache), |plugin, store| {
                plugin.wasmop_plugin_reconciler().call_describe(store)
            })
            .map_err(|source| LoadError::DescribeFailed { path: path.into(), source })?;
        validate(&config).map_err(|reason| LoadError::InvalidConfig { path: path.into(), reason })?;
        Ok(Self { path: path.into(), digest, config, instances })
    }

    /// The same plugin with other limits (on the same engine: metering cannot change here).
    pub(crate) fn with_limits(mut self, limits: Limits) -> Self {
        self.instances.limits = limits;
        self
    }

    /// The limits of every call.
    pub fn limits(&self) -> Limits {
        self.instances.limits
    }

    /// The plugin's own configuration, as `describe()` returned it.
    pub fn config(&self) -> &PluginConfig {
        &self.config
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The sha256 of the module's bytes, hex encoded.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Where the module was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `reconcile` in a fresh sandbox that reads from `cache`. Blocks the thread for up
    /// to the deadline: call it from a blocking-capable context.
    pub fn reconcile(&self, cache: Arc<dyn CacheReader>, request: &ReconcileRequest) -> Result<GuestResult, CallError> {
        self.instances.call(&self.config.name, "reconcile", cache, |plugin, store| {
            plugin.wasmop_plugin_reconciler().call_reconcile(store, request)
        })
    }
}

impl Module {
    /// Runs `update-error-status` after a failure no retry will follow; returns the status to
    /// merge, if the plugin gives one.
    pub fn update_error_status(
        &self,
        cache: Arc<dyn CacheReader>,
        request: &ReconcileRequest,
        error: &ReconcileError,
    ) -> Result<Option<String>, CallError> {
        self.instances.call(&self.config.name, "update-error-status", cache, |plugin, store| {
            plugin.wasmop_plugin_reconciler().call_update_error_status(store, request, error)
        })
    }

    /// Runs `desired`: the desired objects of the plugin's dependents.
    pub fn desired(
        &self,
        cache: Arc<dyn CacheReader>,
        request: &ReconcileRequest,
    ) -> Result<Result<Vec<DesiredObject>, ReconcileError>, CallError> {
        self.instances.call(&self.config.name, "desired", cache, |plugin, store| {
            plugin.wasmop_plugin_reconciler().call_desired(store, request)
        })
    }

    /// Runs `cleanup` for a primary marked for deletion.
    pub fn cleanup(
        &self,
        cache: Arc<dyn CacheReader>,
        request: &ReconcileRequest,
    ) -> Result<Result<CleanupOutcome, ReconcileError>, CallError> {
        self.instances.call(&self.config.name, "cleanup", cache, |plugin, store| {
            plugin.wasmop_plugin_reconciler().call_cleanup(store, request)
        })
    }

    /// Runs `check`: whether the plugin condition `name` holds.
    pub fn check(
        &self,
        cache: Arc<dyn CacheReader>,
        name: &str,
        primary: &str,
        dependent: Option<&str>,
    ) -> Result<bool, CallError> {
        self.instances.call(&self.config.name, "check", cache, |plugin, store| {
            plugin.wasmop_plugin_reconciler().call_check(store, name, primary, dependent)
        })
    }

    /// The finalizer the host manages for this plugin, if any.
    pub fn finalizer(&self) -> Option<String> {
        match &self.config.finalizer {
            Finalizer::Derived => Some(format!("wasmop.dev/{}", self.config.name)),
            Finalizer::Named(name) => Some(name.clone()),
            Finalizer::Disabled => None,
        }
    }

    /// Runs `map-secondary`: the primaries a change of `secondary` (JSON) concerns; `Ok(Err)`
    /// is the plugin's own error.
    pub fn map_secondary(
        &self,
        cache: Arc<dyn CacheReader>,
        secondary: &str,
        previous: Option<&str>,
    ) -> Result<Result<Vec<ObjectRef>, String>, CallError> {
        self.instances.call(&self.config.name, "map-secondary", cache, |plugin, store| {
            plugin.wasmop_plugin_reconciler().call_map_secondary(store, secondary, previous)
        })
    }

    /// Runs `secondaries-of`: the secondaries `primary` (JSON) names; `Ok(Err)` is the plugin's
    /// own error.
    pub fn secondaries_of(
        &self,
        cache: Arc<dyn CacheReader>,
        primary: &str,
    ) -> Result<Result<Vec<SecondaryRef>, String>, CallError> {
        self.instances.call(&self.config.name, "secondaries-of", cache, |plugin, store| {
            plugin.wasmop_plugin_reconciler().call_secondaries_of(store, primary)
        })
    }
}

impl Instances {
    pub(crate) fn new(
        pre: PluginPre<Sandbox>,
        engine: Engine,
        metered: bool,
        limits: Limits,
        observer: Arc<dyn CallObserver>,
    ) -> Self {
        Self { pre, engine, metered, limits, observer }
    }

    /// Calls `export` of `plugin` (empty while it describes itself) in a fresh store, and tells
    /// the observer how long it took and how much fuel it used.
    fn call<R>(
        &self,
        plugin: &str,
        export: &'static str,
        cache: Arc<dyn CacheReader>,
        f: impl FnOnce(&super::bindings::Plugin, &mut Store<Sandbox>) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let started = Instant::now();
        let mut store = Store::new(&self.engine, Sandbox::new(self.limits.memory_bytes, cache));
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(self.limits.deadline.as_millis().div_ceil(EPOCH_TICK.as_millis()).max(1) as u64);
        store.epoch_deadline_trap();
        let budget = self.metered.then(|| self.limits.fuel.unwrap_or(u64::MAX));
        if let Some(budget) = budget {
            store.set_fuel(budget).expect("the engine meters fuel");
        }
        let result = match self.pre.instantiate(&mut store) {
            Ok(plugin) => f(&plugin, &mut store).map_err(|e| self.classify(&store, e)),
            Err(e) => Err(match self.classify(&store, e) {
                CallError::Trapped(msg) => CallError::InstantiateFailed(msg),
                other => other,
            }),
        };
        let used = budget.map(|budget| budget - store.get_fuel().unwrap_or(0));
        if !plugin.is_empty() {
            self.observer.called(plugin, export, started.elapsed(), used);
        }
        forward_output(if plugin.is_empty() { export } else { plugin }, &store);
        result
    }

    /// Turns a wasmtime error into the cause a user can act on.
    fn classify(&self, store: &Store<Sandbox>, err: wasmtime::Error) -> CallError {
        if let Some(exceeded) = store.data().limiter.exceeded {
            return CallError::MemoryLimitExceeded(exceeded);
        }
        match err.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => return CallError::DeadlineExceeded(self.limits.deadline),
            Some(Trap::OutOfFuel) => return CallError::FuelExhausted(self.limits.fuel.unwrap_or(u64::MAX)),
            _ => {}
        }
        let stderr = String::from_utf8_lossy(&store.data().stderr.contents()).into_owned();
        if let Some(message) = panic_message(&stderr) {
            return CallError::Panicked(message);
        }
        CallError::Trapped(format!("{err:#}"))
    }
}

/// Extracts the message of a Rust panic from the guest's stderr.
fn panic_message(stderr: &str) -> Option<String> {
    let (_, after) = stderr.split_once("panicked at ")?;
    let (location, rest) = after.split_once(":\n").unwrap_or((after, ""));
    let message = rest.lines().next().unwrap_or("").trim();
    Some(if message.is_empty() {
        format!("at {}", location.trim())
    } else {
        format!("{message} (at {})", location.trim())
    })
}

/// Writes what the guest printed to the host log.
fn forward_output(plugin: &str, store: &Store<Sandbox>) {
    for (stream, pipe) in [("stdout", &store.data().stdout), ("stderr", &store.data().stderr)] {
        let bytes = pipe.contents();
        for line in String::from_utf8_lossy(&bytes).lines().filter(|l| !l.trim().is_empty()) {
            tracing::info!(target: "wasmop::plugin", plugin, stream, "{line}");
        }
    }
}

/// Checks what `describe()` returned before the host relies on it.
fn validate(config: &PluginConfig) -> Result<(), String> {
    let is_dns_label = |s: &str| {
        !s.is_empty() && s.len() <= 63 && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    if !is_dns_label(&config.name) {
        return Err(format!(
            "name {:?} must be a DNS label (lower case letters, digits and '-', at most 63)",
            config.name
        ));
    }
    if config.primary.version.is_empty() || config.primary.kind.is_empty() {
        return Err("primary kind needs a version and a kind".into());
    }
    if let Some(retry) = &config.retry
        && !(retry.multiplier.is_finite() && retry.multiplier >= 1.0)
    {
        return Err(format!("retry multiplier {} must be a finite number >= 1", retry.multiplier));
    }
    if let Finalizer::Named(name) = &config.finalizer
        && !(name.contains('/') && name.len() <= 253 && !name.contains(char::is_whitespace))
    {
        return Err(format!("finalizer {name:?} must be a qualified name such as example.com/cleanup"));
    }
    wasmop_core::workflow::Workflow::new(config.dependents.iter().map(Into::into).collect())?;
    if let Some(d) = config.dependents.iter().find(|d| d.kind.version.is_empty() || d.kind.kind.is_empty()) {
        return Err(format!("dependent {:?} needs a kind with a version and a kind", d.name));
    }
    for watch in &config.watches {
        let kind = &watch.kind;
        if kind.version.is_empty() || kind.kind.is_empty() {
            return Err("every watched kind needs a version and a kind".into());
        }
        if let Mapper::OwnerReferences(_) = watch.mapper {
            if let Some(cluster) = &watch.cluster {
                return Err(format!(
                    "the watch of {} on cluster {cluster:?} maps with owner references, which cannot cross \
                     clusters; use the annotations or plugin mapper",
                    kind.kind
                ));
            }
            if config.primary.namespaced && !kind.namespaced {
                return Err(format!(
                    "the watch of cluster-scoped {} maps with owner references to namespaced {}, which \
                     Kubernetes does not allow; use the annotations or plugin mapper",
                    kind.kind, config.primary.kind
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::bindings::wasmop::plugin::types::{KindRef, Owners, Watch};

    #[test]
    fn panic_message_is_taken_from_rust_panic_output() {
        let stderr = "\nthread '<unnamed>' panicked at src/lib.rs:12:5:\nfixture-panic: panicking on purpose\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(panic_message(stderr).as_deref(), Some("fixture-panic: panicking on purpose (at src/lib.rs:12:5)"));
        assert_eq!(panic_message("some other output"), None);
    }

    #[test]
    fn config_names_must_be_dns_labels() {
        let mut config = crate::runtime::bindings::test_config("");
        config.primary.version = "v1".into();
        config.primary.kind = "WebPage".into();
        config.name = "Web Page".into();
        assert!(validate(&config).unwrap_err().contains("DNS label"));
        config.name = "webpage".into();
        assert_eq!(validate(&config), Ok(()));
    }

    fn watch(kind: &str, namespaced: bool, cluster: Option<&str>, mapper: Mapper) -> Watch {
        Watch {
            kind: KindRef { group: String::new(), version: "v1".into(), kind: kind.into(), plural: None, namespaced },
            namespace: None,
            label_selector: None,
            field_selector: None,
            cluster: cluster.map(String::from),
            mapper,
            projection: None,
        }
    }

    #[test]
    fn owner_references_cannot_cross_clusters() {
        let mut config = crate::runtime::bindings::test_config("Link");
        config.watches = vec![watch("ConfigMap", true, Some("remote"), Mapper::OwnerReferences(Owners::Controller))];
        let err = validate(&config).unwrap_err();
        assert!(err.contains("cannot cross clusters") && err.contains("\"remote\""), "{err}");
        config.watches = vec![watch("ConfigMap", true, Some("remote"), Mapper::Annotations)];
        assert_eq!(validate(&config), Ok(()));
    }

    #[test]
    fn cluster_scoped_secondaries_cannot_be_owned_by_namespaced_primaries() {
        let mut config = crate::runtime::bindings::test_config("Link");
        config.watches = vec![watch("Namespace", false, None, Mapper::OwnerReferences(Owners::Any))];
        assert!(validate(&config).unwrap_err().contains("does not allow"));
        config.watches = vec![watch("Namespace", false, None, Mapper::Plugin)];
        assert_eq!(validate(&config), Ok(()));
    }
}
