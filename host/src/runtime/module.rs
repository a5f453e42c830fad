//! A loaded plugin: its configuration and a pre-linked instance factory.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use wasmtime::{Engine, Store, Trap, UpdateDeadline};

use super::CallObserver;
use super::bindings::wasmop::plugin::types::{
    CleanupOutcome, DesiredObject, Finalizer, Mapper, ObjectRef, Outcome, PluginConfig, ReconcileError,
    ReconcileRequest, SecondaryRef,
};
use super::bindings::{Plugin, PluginPre};
use super::error::{CallError, LoadError};
use super::limits::Limits;
use super::sandbox::{CacheReader, NoCache, Sandbox};

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

/// One call in progress: its store and the plugin instantiated in it.
struct Call<'a> {
    store: Store<Sandbox>,
    plugin: Plugin,
    report: Report<'a>,
}

/// What the observer and the log are told when a call ends.
struct Report<'a> {
    /// The plugin's name; empty while it describes itself.
    name: &'a str,
    export: &'static str,
    started: Instant,
    /// The fuel the call started with, when metered.
    budget: Option<u64>,
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
    /// Calls `describe()` on a fresh instance and validates the answer. Blocks the thread until
    /// it returns (it reads nothing, so no runtime is needed): call it where loading may block.
    pub(crate) fn describe(path: &Path, digest: String, instances: Instances) -> Result<Self, LoadError> {
        let described = async {
            let mut call = instances.enter("", "describe", Arc::new(NoCache)).await?;
            let config = call.plugin.wasmop_plugin_reconciler().call_describe(&mut call.store).await;
            instances.leave(call, config)
        };
        let config = futures::executor::block_on(described)
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

    /// Runs `reconcile` in a fresh sandbox that reads from `cache`. The call yields to the
    /// runtime at every epoch tick and fails at the deadline.
    pub async fn reconcile(
        &self,
        cache: Arc<dyn CacheReader>,
        request: &ReconcileRequest,
    ) -> Result<GuestResult, CallError> {
        let mut call = self.instances.enter(&self.config.name, "reconcile", cache).await?;
        let result = call.plugin.wasmop_plugin_reconciler().call_reconcile(&mut call.store, request).await;
        self.instances.leave(call, result)
    }
}

impl Module {
    /// Runs `update-error-status` after a failure no retry will follow; returns the status to
    /// merge, if the plugin gives one.
    pub async fn update_error_status(
        &self,
        cache: Arc<dyn CacheReader>,
        request: &ReconcileRequest,
        error: &ReconcileError,
    ) -> Result<Option<String>, CallError> {
        let mut call = self.instances.enter(&self.config.name, "update-error-status", cache).await?;
        let result =
            call.plugin.wasmop_plugin_reconciler().call_update_error_status(&mut call.store, request, error).await;
        self.instances.leave(call, result)
    }

    /// Runs `desired`: the desired objects of the plugin's dependents.
    pub async fn desired(
        &self,
        cache: Arc<dyn CacheReader>,
        request: &ReconcileRequest,
    ) -> Result<Result<Vec<DesiredObject>, ReconcileError>, CallError> {
        let mut call = self.instances.enter(&self.config.name, "desired", cache).await?;
        let result = call.plugin.wasmop_plugin_reconciler().call_desired(&mut call.store, request).await;
        self.instances.leave(call, result)
    }

    /// Runs `cleanup` for a primary marked for deletion.
    pub async fn cleanup(
        &self,
        cache: Arc<dyn CacheReader>,
        request: &ReconcileRequest,
    ) -> Result<Result<CleanupOutcome, ReconcileError>, CallError> {
        let mut call = self.instances.enter(&self.config.name, "cleanup", cache).await?;
        let result = call.plugin.wasmop_plugin_reconciler().call_cleanup(&mut call.store, request).await;
        self.instances.leave(call, result)
    }

    /// Runs `check`: whether the plugin condition `name` holds.
    pub async fn check(
        &self,
        cache: Arc<dyn CacheReader>,
        name: &str,
        primary: &str,
        dependent: Option<&str>,
    ) -> Result<bool, CallError> {
        let mut call = self.instances.enter(&self.config.name, "check", cache).await?;
        let result = call.plugin.wasmop_plugin_reconciler().call_check(&mut call.store, name, primary, dependent).await;
        self.instances.leave(call, result)
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
    pub async fn map_secondary(
        &self,
        cache: Arc<dyn CacheReader>,
        secondary: &str,
        previous: Option<&str>,
    ) -> Result<Result<Vec<ObjectRef>, String>, CallError> {
        let mut call = self.instances.enter(&self.config.name, "map-secondary", cache).await?;
        let result =
            call.plugin.wasmop_plugin_reconciler().call_map_secondary(&mut call.store, secondary, previous).await;
        self.instances.leave(call, result)
    }

    /// Runs `secondaries-of`: the secondaries `primary` (JSON) names; `Ok(Err)` is the plugin's
    /// own error.
    pub async fn secondaries_of(
        &self,
        cache: Arc<dyn CacheReader>,
        primary: &str,
    ) -> Result<Result<Vec<SecondaryRef>, String>, CallError> {
        let mut call = self.instances.enter(&self.config.name, "secondaries-of", cache).await?;
        let result = call.plugin.wasmop_plugin_reconciler().call_secondaries_of(&mut call.store, primary).await;
        self.instances.leave(call, result)
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

    /// Starts a call of `export` of the plugin `name` (empty while it describes itself): a
    /// fresh store within the plugin's limits, with the plugin instantiated in it. The call
    /// yields to the runtime at every epoch tick and traps once its deadline has passed, so a
    /// plugin that spins holds a runtime thread for at most a tick at a time.
    async fn enter<'a>(
        &self,
        name: &'a str,
        export: &'static str,
        cache: Arc<dyn CacheReader>,
    ) -> Result<Call<'a>, CallError> {
        let started = Instant::now();
        let mut store = Store::new(&self.engine, Sandbox::new(self.limits.memory_bytes, cache));
        store.limiter(|s| &mut s.limiter);
        let deadline = started + self.limits.deadline;
        store.epoch_deadline_callback(move |_| match Instant::now() < deadline {
            true => Ok(UpdateDeadline::Yield(1)),
            false => Err(Trap::Interrupt.into()),
        });
        store.set_epoch_deadline(1);
        let budget = self.metered.then(|| self.limits.fuel.unwrap_or(u64::MAX));
        if let Some(budget) = budget {
            store.set_fuel(budget).expect("the engine meters fuel");
        }
        let report = Report { name, export, started, budget };
        match self.pre.instantiate_async(&mut store).await {
            Ok(plugin) => Ok(Call { store, plugin, report }),
            Err(e) => {
                let err = match self.classify(&store, e) {
                    CallError::Trapped(msg) => CallError::InstantiateFailed(msg),
                    other => other,
                };
                self.report(&report, &store);
                Err(err)
            }
        }
    }

    /// Ends `call` with the export's `result`.
    fn leave<R>(&self, call: Call<'_>, result: wasmtime::Result<R>) -> Result<R, CallError> {
        let result = result.map_err(|e| self.classify(&call.store, e));
        self.report(&call.report, &call.store);
        result
    }

    /// Tells the observer how long a call took and how much fuel it used, and logs what the
    /// guest printed.
    fn report(&self, report: &Report<'_>, store: &Store<Sandbox>) {
        let used = report.budget.map(|budget| budget - store.get_fuel().unwrap_or(0));
        if !report.name.is_empty() {
            self.observer.called(report.name, report.export, report.started.elapsed(), used);
        }
        forward_output(if report.name.is_empty() { report.export } else { report.name }, store);
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
