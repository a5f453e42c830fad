//! The host: loads plugins and runs one controller per plugin on shared clusters, watches and
//! runtime. Plugins start, stop and are replaced by new versions while the others keep running.
//!
//! A new version of a running plugin is swapped in place when its configuration (what it
//! watches, its dependents, its settings) is unchanged: the controller, its queue and its watches
//! stay, reconciles in flight finish on the old version and later ones run the new one. A version
//! that changes the configuration gets a new controller, which shares the watches that stay in
//! use and starts reconciling once the old one has finished its reconciles in flight; every
//! primary is then reconciled by the new version.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, Semaphore, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::controller::{self, Controller, Handover};
use crate::informer::{Clusters, ImpersonationError, UnknownCluster};
use crate::metrics::Metrics;
use crate::runtime::{Current, LoadError, Module, Runtime};
use crate::secret_access::{self as access, AccessError, SelfReview};
use crate::secrets::{KubeSecrets, PluginSecrets, SecretReader};
use crate::settings::{Defaults, HostConfig, Overrides, resolve};
use crate::shadow::Shadow;
use crate::source::inbound::Inlet;

/// How long an install with new settings waits for the new controller to subscribe its watches
/// before it stops the old one (which then releases watches the new one may still need).
const HANDOVER_SUBSCRIBE: std::time::Duration = std::time::Duration::from_secs(10);

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
    /// A plugin file or module was refused.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A plugin of that name is already loaded from somewhere else.
    #[error("a plugin named {name:?} is already loaded from {owner}")]
    LoadedElsewhere {
        /// The plugin's name.
        name: String,
        /// Where the running one came from.
        owner: String,
    },
    /// The plugin's writes cannot be made as its ServiceAccount.
    #[error("plugin {plugin:?} refused: {source}")]
    Impersonation {
        /// The plugin.
        plugin: String,
        /// Why.
        #[source]
        source: ImpersonationError,
    },
    /// The plugin's `record` setting cannot work (a selector that does not parse, a sample
    /// rate outside 0 to 1, a size of zero).
    #[error("plugin {plugin:?} refused: {source}")]
    Recording {
        /// The plugin.
        plugin: String,
        /// Why.
        #[source]
        source: wasmop_core::record::select::SettingError,
    },
    /// A candidate version names another plugin than the live version it would shadow.
    #[error("the candidate is plugin {candidate:?}, not {live:?}: a candidate is another version of the live plugin")]
    CandidateRenamed {
        /// The live plugin's name.
        live: String,
        /// The name the candidate describes itself with.
        candidate: String,
    },
    /// A candidate was given while no live version of it runs.
    #[error("{0} runs no live version for the candidate to shadow")]
    NothingToShadow(String),
    /// A plugin names a Secret it may not have read for it, or would send one over plain http
    /// ([`crate::secret_access`]).
    #[error(transparent)]
    SecretAccess(#[from] AccessError),
    /// A plugin names or watches Secrets only its ServiceAccount's rights could give it, and was
    /// started without asking the API server about them ([`Host::start`]).
    #[error(
        "plugin {plugin:?} refused: whether its ServiceAccount may {access} must be asked of the API server, which Host::install does"
    )]
    SecretUnreviewed {
        /// The plugin.
        plugin: String,
        /// What its account would have to be allowed: `get Secret ns/name`, `list and watch
        /// Secrets in namespace ns`.
        access: String,
    },
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

/// Loads every file with the limits `config` gives each plugin; refuses all of them together,
/// naming each bad file and its reason.
pub fn load_all(runtime: &Runtime, files: &[PathBuf], config: &HostConfig) -> Result<Vec<Arc<Module>>, HostError> {
    if files.is_empty() {
        return Err(HostError::NoPlugins);
    }
    let mut modules = Vec::new();
    let mut errors = Vec::new();
    for file in files {
        let loaded = std::fs::read(file)
            .map_err(|source| LoadError::ReadFailed { path: file.clone(), source })
            .and_then(|bytes| load(runtime, config, file, &bytes, None));
        match loaded {
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

/// Loads a module with the limits of its overrides: `overrides` if given, else those `config`
/// names for the plugin. Blocks while it compiles.
pub fn load(
    runtime: &Runtime,
    config: &HostConfig,
    origin: &Path,
    bytes: &[u8],
    overrides: Option<&Overrides>,
) -> Result<Module, LoadError> {
    let defaults = runtime.default_limits();
    let limits_for = |name: &str| {
        let overrides = overrides.or_else(|| config.plugins.get(name))?;
        overrides.limits.as_ref().map(|l| crate::settings::limits(Some(l), defaults))
    };
    runtime.load_with(origin, bytes, &limits_for)
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
    /// Leader election: runs start and writes go out only while this replica leads.
    pub fence: crate::fence::Fence,
    /// The process's shutdown: once it stops, no controller starts a run.
    pub shutdown: crate::shutdown::Shutdown,
    /// The host's budget for bounded caches; `None`: only plugins with a budget of their own
    /// have bounded caches.
    pub cache: Option<crate::informer::Budget>,
    /// Set when the replicas shard the primaries (`--shards`): sharded plugins run their share
    /// through the membership's fence; the others run on the leader ([`HostSettings::fence`]).
    pub shards: Option<crate::shards::Joined>,
}

/// What [`Host::install`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The plugin was not running; it is now.
    Started,
    /// The new version replaced the old in place: same controller, queue and watches.
    Swapped,
    /// The new version changes the configuration: it runs in a new controller, which took over
    /// once the old one finished.
    Restarted,
    /// The same module with the same settings already runs.
    Unchanged,
}

/// A plugin the host runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// The plugin's name.
    pub name: String,
    /// The sha256 of the running module.
    pub digest: String,
    /// What the install did.
    pub change: Change,
}

/// A running controller.
struct Running {
    module: Arc<Current>,
    /// Who loaded it (a file path, a ReconcilerPlugin): only they may replace or remove it.
    owner: String,
    overrides: Overrides,
    /// Asks the controller to reconcile every primary (after a swap).
    reconcile_all: Arc<Notify>,
    /// Set once its caches have synced.
    synced: Arc<AtomicBool>,
    /// Why it does not reconcile: the declared kinds the API server does not serve.
    unserved: controller::Unserved,
    stop: CancellationToken,
    task: JoinHandle<()>,
    /// Where the events endpoint hands the plugin's inbound events.
    inlet: Inlet,
    /// Where its reconciles and webhook calls are recorded, when they are.
    records: Option<Arc<crate::record::Records>>,
}

/// Runs one controller per plugin; plugins can be started, replaced and stopped at any time,
/// and share watches (reference-counted per cluster) and the global reconcile limit.
pub struct Host {
    clusters: Clusters,
    runtime: Arc<Runtime>,
    settings: HostSettings,
    global: Arc<Semaphore>,
    metrics: Arc<Metrics>,
    controllers: Mutex<BTreeMap<String, Running>>,
    pools: crate::informer::Pools,
    /// One install or removal at a time.
    changing: tokio::sync::Mutex<()>,
    /// The plugins given at start are loaded (see [`Host::loaded`]).
    loaded: AtomicBool,
    /// Reads Secrets as the host: those the operator names, and those the operator allowed a
    /// plugin (each plugin's reader, [`PluginSecrets`], shares its cache, keyed by identity).
    secrets: Arc<KubeSecrets>,
    /// Each running plugin's candidate version, if any, by plugin name.
    shadows: Mutex<HashMap<String, Arc<Shadow>>>,
    /// Told whenever a plugin starts, is replaced or stops ([`Host::changes`]).
    changes: tokio::sync::watch::Sender<()>,
}

impl Host {
    /// A host with no plugins yet, loading modules with `runtime` and counting into `metrics`.
    pub fn new(clusters: Clusters, runtime: Arc<Runtime>, metrics: Arc<Metrics>, settings: HostSettings) -> Self {
        let global = Arc::new(Semaphore::new(settings.max_concurrent_reconciles.max(1)));
        // Secrets are read from the local cluster; each plugin gets its reader when it starts.
        let secrets =
            Arc::new(KubeSecrets::new(clusters.local().client().clone(), settings.defaults.namespace.clone()));
        let counted = metrics.clone();
        let pools =
            crate::informer::Pools::new(settings.cache, Arc::new(move |pool, budget| counted.pool(pool, budget)));
        Self {
            pools,
            clusters,
            runtime,
            settings,
            global,
            metrics,
            controllers: Mutex::new(BTreeMap::new()),
            changing: tokio::sync::Mutex::new(()),
            loaded: AtomicBool::new(false),
            secrets,
            shadows: Mutex::new(HashMap::new()),
            changes: tokio::sync::watch::Sender::new(()),
        }
    }

    /// Marked changed whenever a plugin starts, is replaced by a new version or stops: what
    /// keeps something per running plugin (the webhook configurations) looks again.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<()> {
        self.changes.subscribe()
    }

    /// Checks that the host can run `module` beside the running plugins: its name is free and
    /// every cluster it watches is known.
    pub fn check(&self, module: &Module) -> Result<(), HostError> {
        if self.controllers.lock().expect("never poisoned").contains_key(module.name()) {
            return Err(HostError::DuplicateName(module.name().to_string()));
        }
        self.check_clusters(module)
    }

    fn check_clusters(&self, module: &Module) -> Result<(), HostError> {
        for watch in &module.config().watches {
            self.clusters
                .get(watch.cluster.as_deref())
                .map_err(|source| HostError::UnknownCluster { plugin: module.name().to_string(), source })?;
        }
        Ok(())
    }

    /// Starts the controller of an already loaded `module`, owned by its file, with the
    /// configuration file's overrides. Must be called within a tokio runtime. It asks the API
    /// server nothing: a plugin naming or watching Secrets that only its ServiceAccount's rights
    /// could give it is refused ([`HostError::SecretUnreviewed`]); [`Host::install`] asks.
    pub fn start(&self, module: Arc<Module>) -> Result<(), HostError> {
        self.check(&module)?;
        let overrides = self.settings.config.plugins.get(module.name()).cloned().unwrap_or_default();
        let owner = module.path().display().to_string();
        let (plan, own) = self.secret_plan(&module, &overrides)?;
        let named = plan.to_review.iter().map(|named| format!("get Secret {}", named.secret));
        let watched = plan.watches_to_review.iter().map(|watch| format!("list and watch Secrets {}", watch.place()));
        if let Some(access) = named.chain(watched).next() {
            return Err(HostError::SecretUnreviewed { plugin: module.name().to_string(), access });
        }
        let secrets = self.plugin_secrets(&module, plan, own.map(|(_, reader)| reader));
        let running = self.spawn(module.clone(), owner, overrides, None, secrets)?;
        self.controllers.lock().expect("never poisoned").insert(module.name().to_string(), running);
        self.changes.send_replace(());
        Ok(())
    }

    /// Loads `bytes` (named `origin` in errors) on the blocking pool and runs them: starts the
    /// plugin, or replaces the version `owner` loaded before. `overrides` beat the configuration
    /// file's; their limits apply to every call of the new version. A module that does not
    /// load, or that another owner's plugin of the same name holds, is refused and whatever
    /// ran before keeps running.
    pub async fn install(
        &self,
        owner: &str,
        origin: &Path,
        bytes: Vec<u8>,
        overrides: Option<Overrides>,
    ) -> Result<Installed, HostError> {
        let (runtime, config) = (self.runtime.clone(), self.settings.config.clone());
        let (origin, given) = (origin.to_path_buf(), overrides.clone());
        let module = tokio::task::spawn_blocking(move || load(&runtime, &config, &origin, &bytes, given.as_ref()))
            .await
            .expect("loading a module does not panic")?;
        let overrides =
            overrides.or_else(|| self.settings.config.plugins.get(module.name()).cloned()).unwrap_or_default();
        self.put(owner, Arc::new(module), overrides).await
    }

    /// Loads `bytes` (named `origin` in errors) as the candidate version of the live plugin
    /// `owner` runs, with the same `overrides`, and shadows it from the next reconcile on (see
    /// [`crate::shadow`]); returns its digest. Its outgoing HTTP is refused. A candidate that
    /// does not load, or that is another plugin, is refused; the live version never notices.
    pub async fn propose(
        &self,
        owner: &str,
        origin: &Path,
        bytes: Vec<u8>,
        overrides: Option<Overrides>,
    ) -> Result<String, HostError> {
        let live = self.owned_by(owner).pop().ok_or_else(|| HostError::NothingToShadow(owner.to_string()))?;
        let (runtime, config) = (self.runtime.clone(), self.settings.config.clone());
        let origin = origin.to_path_buf();
        let module = tokio::task::spawn_blocking(move || load(&runtime, &config, &origin, &bytes, overrides.as_ref()))
            .await
            .expect("loading a module does not panic")?;
        if module.name() != live {
            return Err(HostError::CandidateRenamed { live, candidate: module.name().to_string() });
        }
        let digest = module.digest().to_string();
        let shadow = self.shadow(&live);
        if shadow.candidate().is_none_or(|running| running.digest() != digest || running.limits() != module.limits()) {
            tracing::info!(plugin = live, candidate = digest, "candidate version shadowed");
            shadow.propose(Some(Arc::new(module.without_http())));
        }
        Ok(digest)
    }

    /// Stops shadowing the candidate of every plugin `owner` runs; its runs in flight finish
    /// uncounted.
    pub fn abandon(&self, owner: &str) {
        for name in self.owned_by(owner) {
            if let Some(shadow) = self.shadows.lock().expect("never poisoned").get(&name)
                && shadow.candidate().is_some()
            {
                tracing::info!(plugin = name, "candidate version dropped");
                shadow.propose(None);
            }
        }
    }

    /// Plugin `name`'s candidate version and what its shadow runs came to, if it has one.
    pub fn shadowed(&self, name: &str) -> Option<(Arc<Module>, wasmop_core::shadow::Tally)> {
        let shadow = self.shadows.lock().expect("never poisoned").get(name)?.clone();
        shadow.candidate().map(|candidate| (candidate, shadow.tally()))
    }

    /// Where plugin `name`'s reconciles and webhook calls are recorded, if it runs and records.
    pub(crate) fn records_of(&self, name: &str) -> Option<Arc<crate::record::Records>> {
        self.controllers.lock().expect("never poisoned").get(name).and_then(|r| r.records.clone())
    }

    /// Plugin `name`'s shadow, if it ever had a candidate.
    pub(crate) fn shadow_of(&self, name: &str) -> Option<Arc<Shadow>> {
        self.shadows.lock().expect("never poisoned").get(name).cloned()
    }

    /// Plugin `name`'s shadow, made the first time it is asked for.
    fn shadow(&self, name: &str) -> Arc<Shadow> {
        let mut shadows = self.shadows.lock().expect("never poisoned");
        shadows.entry(name.to_string()).or_insert_with(|| Shadow::new(name, self.metrics.clone())).clone()
    }

    /// What `module` may have read (and watched) for it under `overrides` without asking the API
    /// server ([`access::plan`]), and a client and reader as its ServiceAccount, if it has one.
    fn secret_plan(
        &self,
        module: &Module,
        overrides: &Overrides,
    ) -> Result<(access::Plan, Option<(kube::Client, KubeSecrets)>), HostError> {
        let namespace = resolve(module.config(), overrides, &self.settings.defaults).namespace;
        let watches = controller::covered(module.config(), namespace.as_deref());
        let plan = access::plan(module.config(), &watches, overrides, self.secrets.namespace())?;
        let Some(account) = &overrides.service_account else { return Ok((plan, None)) };
        // Only a plugin that names or watches Secrets needs a client of its own.
        if plan.to_review.is_empty() && plan.watches_to_review.is_empty() {
            return Ok((plan, None));
        }
        let client = self
            .clusters
            .impersonating(&account.user())
            .map_err(|source| HostError::Impersonation { plugin: module.name().to_string(), source })?;
        let reader = self.secrets.as_user(&account.user(), client.clone());
        Ok((plan, Some((client, reader))))
    }

    /// The reader of the Secrets `module` may have read for it: those `plan` allows as the host,
    /// any other as its ServiceAccount (`own`).
    fn plugin_secrets(&self, module: &Module, plan: access::Plan, own: Option<KubeSecrets>) -> PluginSecrets {
        PluginSecrets::new(module.name(), plan.allowed, self.secrets.clone(), own)
    }

    /// Checks the Secrets `module` names ([`crate::secret_access`]), asking the API server as
    /// its ServiceAccount about those only the account's rights could give it, and makes its
    /// reader.
    async fn checked_secrets(&self, module: &Module, overrides: &Overrides) -> Result<PluginSecrets, HostError> {
        let (plan, own) = self.secret_plan(module, overrides)?;
        let own = match (own, &overrides.service_account) {
            (Some((client, reader)), Some(account)) => {
                access::review(module.name(), &plan, account, &SelfReview(client)).await?;
                Some(reader)
            }
            _ => None,
        };
        Ok(self.plugin_secrets(module, plan, own))
    }

    /// Runs `module` for `owner`: see [`Host::install`].
    async fn put(&self, owner: &str, module: Arc<Module>, overrides: Overrides) -> Result<Installed, HostError> {
        let _changing = self.changing.lock().await;
        self.check_clusters(&module)?;
        let secrets = self.checked_secrets(&module, &overrides).await?;
        let name = module.name().to_string();
        let installed = |change| Installed { name: name.clone(), digest: module.digest().to_string(), change };
        let previous = {
            let controllers = self.controllers.lock().expect("never poisoned");
            controllers.get(&name).map(|r| (r.owner.clone(), r.module.get(), r.overrides == overrides))
        };
        let Some((running_owner, running, same_overrides)) = previous else {
            let running = self.spawn(module.clone(), owner.to_string(), overrides, None, secrets)?;
            self.controllers.lock().expect("never poisoned").insert(name.clone(), running);
            self.changes.send_replace(());
            tracing::info!(plugin = name, digest = module.digest(), owner, "plugin started");
            return Ok(installed(Change::Started));
        };
        if running_owner != owner {
            return Err(HostError::LoadedElsewhere { name, owner: running_owner });
        }
        if same_overrides && running.digest() == module.digest() && running.limits() == module.limits() {
            return Ok(installed(Change::Unchanged));
        }
        if same_overrides && same_configuration(&running, &module) {
            self.runtime.read_secrets_for(&name, Arc::new(secrets));
            let controllers = self.controllers.lock().expect("never poisoned");
            controllers[&name].module.replace(module.clone());
            // Level-based: every primary is reconciled by the new version, live changes first.
            controllers[&name].reconcile_all.notify_one();
            self.changes.send_replace(());
            tracing::info!(plugin = name, from = running.digest(), to = module.digest(), "plugin swapped in place");
            return Ok(installed(Change::Swapped));
        }
        // The new controller subscribes now (sharing the watches that stay) and reconciles once
        // the old one has stopped: one object is never reconciled by both.
        let (handover, after) = oneshot::channel();
        let (subscribed, successor_subscribed) = oneshot::channel();
        let taking_over = Some(Handover { subscribed, after });
        let successor = self.spawn(module.clone(), owner.to_string(), overrides, taking_over, secrets)?;
        // Bounded: a successor that cannot reach the API server must not hold the install up.
        if tokio::time::timeout(HANDOVER_SUBSCRIBE, successor_subscribed).await.is_err() {
            tracing::warn!(
                plugin = name,
                "the new controller has not subscribed its watches yet; stopping the old one"
            );
        }
        let old = self.controllers.lock().expect("never poisoned").insert(name.clone(), successor);
        if let Some(old) = old {
            old.stop.cancel();
            if let Err(err) = old.task.await {
                tracing::error!(plugin = name, %err, "the replaced controller stopped abnormally");
            }
        }
        handover.send(()).ok();
        self.changes.send_replace(());
        tracing::info!(
            plugin = name,
            from = running.digest(),
            to = module.digest(),
            "plugin restarted with a new configuration"
        );
        Ok(installed(Change::Restarted))
    }

    /// Spawns the controller of `module`, whose Secrets `secrets` reads from then on.
    fn spawn(
        &self,
        module: Arc<Module>,
        owner: String,
        overrides: Overrides,
        handover: Option<Handover>,
        secrets: PluginSecrets,
    ) -> Result<Running, HostError> {
        let resolved = resolve(module.config(), &overrides, &self.settings.defaults);
        // Refused whether or not this host records: the setting is wrong either way.
        if let Some(recording) = &overrides.record {
            let plugin = module.name().to_string();
            recording.selection().map_err(|source| HostError::Recording { plugin, source })?;
        }
        let (fence, shards) = match (&self.settings.shards, resolved.sharding) {
            (Some(joined), Some(_)) => (joined.fence.clone(), Some(joined.clone())),
            _ => (self.settings.fence.clone(), None),
        };
        let user = overrides.service_account.as_ref().map(|account| account.user());
        let writes = self
            .clusters
            .writing(&fence, user.as_deref())
            .map_err(|source| HostError::Impersonation { plugin: module.name().to_string(), source })?;
        // Past the last refusal: from here on the plugin (and, for a restart, the version it
        // replaces) reads its Secrets under these overrides.
        self.runtime.read_secrets_for(module.name(), Arc::new(secrets));
        tracing::info!(plugin = module.name(), digest = module.digest(), path = %module.path().display(),
            limits = ?module.limits(), ?resolved, "plugin loaded");
        let stop = CancellationToken::new();
        let pool = self.pools.for_plugin(module.name(), resolved.cache);
        let current = Current::new(module.clone());
        let reconcile_all = Arc::new(Notify::new());
        let synced = Arc::new(AtomicBool::new(false));
        let unserved = controller::Unserved::default();
        let inlet = Inlet::new(module.config());
        let records = controller::records(module.config(), &resolved, &self.metrics);
        let controller = Controller {
            inlet: inlet.clone(),
            synced: synced.clone(),
            unserved: unserved.clone(),
            fence,
            shards,
            agreement: self.settings.shards.as_ref().map(|joined| joined.shards.clone()),
            shutdown: self.settings.shutdown.clone(),
            reconcile_all: reconcile_all.clone(),
            module: current.clone(),
            clusters: self.clusters.clone(),
            pool,
            settings: resolved,
            global: Some(self.global.clone()),
            metrics: self.metrics.clone(),
            writes,
            records: records.clone(),
            handover,
            shadow: self.shadow(module.name()),
        };
        let task = tokio::spawn(controller::run(controller, stop.clone()));
        Ok(Running { module: current, owner, overrides, reconcile_all, synced, unserved, stop, task, inlet, records })
    }

    /// Says that the plugins given at start are loaded: from now on [`Host::ready`] depends on
    /// their caches alone.
    pub fn loaded(&self) {
        self.loaded.store(true, Ordering::Release);
    }

    /// Whether the host is ready (`/readyz`): the plugins given at start are loaded and every
    /// running plugin's caches have synced. The error names what it waits for.
    pub fn ready(&self) -> Result<(), String> {
        if !self.loaded.load(Ordering::Acquire) {
            return Err("loading the plugins".into());
        }
        if let Some(joined) = &self.settings.shards
            && !joined.shards.share().assigned
        {
            return Err("waiting for the first shard assignment".into());
        }
        let controllers = self.controllers.lock().expect("never poisoned");
        let waiting: Vec<String> = controllers
            .iter()
            .filter(|(_, r)| !r.synced.load(Ordering::Acquire))
            .map(|(name, r)| match r.unserved.get() {
                Some(unserved) => format!("{name} ({unserved})"),
                None => name.clone(),
            })
            .collect();
        if waiting.is_empty() { Ok(()) } else { Err(format!("caches not synced yet: {}", waiting.join(", "))) }
    }

    /// Why plugin `name` does not reconcile, if it waits for kinds the API server does not
    /// serve: each kind, with the served kind closest to it.
    pub fn unserved(&self, name: &str) -> Option<String> {
        self.controllers.lock().expect("never poisoned").get(name).and_then(|r| r.unserved.get())
    }

    /// Stops every plugin `owner` loaded (see [`Host::stop`]); returns their names.
    pub async fn remove(&self, owner: &str) -> Vec<String> {
        let owned: Vec<String> = {
            let controllers = self.controllers.lock().expect("never poisoned");
            controllers.iter().filter(|(_, r)| r.owner == owner).map(|(name, _)| name.clone()).collect()
        };
        for name in &owned {
            self.stop(name).await;
        }
        owned
    }

    /// The names of the plugins `owner` loaded.
    pub fn owned_by(&self, owner: &str) -> Vec<String> {
        let controllers = self.controllers.lock().expect("never poisoned");
        controllers.iter().filter(|(_, r)| r.owner == owner).map(|(name, _)| name.clone()).collect()
    }

    /// Stops the plugin `name` and waits for its reconciles in flight; its watches stop unless
    /// another plugin uses them. Returns whether it was running.
    pub async fn stop(&self, name: &str) -> bool {
        let _changing = self.changing.lock().await;
        let Some(running) = self.controllers.lock().expect("never poisoned").remove(name) else { return false };
        if let Some(shadow) = self.shadows.lock().expect("never poisoned").remove(name) {
            shadow.propose(None);
        }
        running.stop.cancel();
        if let Err(err) = running.task.await {
            tracing::error!(plugin = name, %err, "a controller stopped abnormally");
        }
        self.runtime.forget_secrets_of(name);
        self.changes.send_replace(());
        tracing::info!(plugin = name, "plugin unloaded");
        true
    }

    /// The names of the running plugins.
    pub fn plugins(&self) -> Vec<String> {
        self.controllers.lock().expect("never poisoned").keys().cloned().collect()
    }

    /// The module plugin `name` currently runs.
    pub fn module(&self, name: &str) -> Option<Arc<Module>> {
        self.controllers.lock().expect("never poisoned").get(name).map(|r| r.module.get())
    }

    /// Plugin `name`'s current module and the inlet of its inbound events, if it runs.
    pub fn inlet(&self, name: &str) -> Option<(Arc<Module>, Inlet)> {
        let controllers = self.controllers.lock().expect("never poisoned");
        controllers.get(name).map(|r| (r.module.get(), r.inlet.clone()))
    }

    /// Reads Secrets as the host, with the local cluster's client: for what the operator names
    /// (registry credentials), never for what a plugin names ([`Host::secrets_of`]). Secrets that
    /// name no namespace are read in the host's (`--namespace`), else in `default`.
    pub fn secrets(&self) -> &dyn SecretReader {
        self.secrets.as_ref()
    }

    /// Reads the Secrets plugin `name` may have read for it ([`crate::secret_access`]); one
    /// that reads nothing when it does not run.
    pub fn secrets_of(&self, name: &str) -> Arc<dyn SecretReader> {
        self.runtime.secrets_of(name)
    }

    /// The clusters the host watches.
    pub fn clusters(&self) -> &Clusters {
        &self.clusters
    }

    /// Whether this replica leads, and may write.
    pub fn fence(&self) -> &crate::fence::Fence {
        &self.settings.fence
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

/// Whether two versions of a plugin run with the same controller: what `describe()` returns
/// decides every watch, dependent and setting.
fn same_configuration(a: &Module, b: &Module) -> bool {
    serde_json::to_value(a.config()).ok() == serde_json::to_value(b.config()).ok()
}

impl Drop for Host {
    /// Stops every controller without waiting for it.
    fn drop(&mut self) {
        for running in self.controllers.lock().expect("never poisoned").values() {
            running.stop.cancel();
        }
    }
}
