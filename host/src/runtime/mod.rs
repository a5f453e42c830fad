//! The wasm edge: one wasmtime [`Engine`] for the host, modules compiled once (and cached on
//! disk), and a fresh sandboxed store per call from a pre-linked `InstancePre`.

mod artifacts;
mod backend;
pub mod bindings;
pub mod dev;
mod error;
mod exports;
pub mod http;
mod limits;
mod module;
mod observer;
pub(crate) mod recorded;
mod sandbox;
pub mod tap;
mod ticker;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::{Component, types::ComponentItem};

pub use error::{CallError, LoadError};
pub use limits::{Limits, MemoryLimitExceeded, MemoryMib, WALL_CLOCK_FACTOR};
pub use module::{Current, GuestResult, Module};
pub use observer::CallObserver;
use observer::Unobserved;
pub use sandbox::{CacheReader, GetResult, ListResult};
pub use tap::{Recorder, Tap};

use artifacts::ArtifactCache;
use backend::Backend;
use bindings::{ADMISSION_INTERFACE, COMPATIBLE_VERSIONS, CONTRACT_VERSION, RECONCILER_INTERFACE};

pub use ticker::EPOCH_TICK;

/// Runtime settings.
#[derive(Clone, Default)]
pub struct RuntimeConfig {
    /// Directory for compiled artifacts; `None` compiles every time.
    pub cache_dir: Option<PathBuf>,
    /// Default limits for every plugin.
    pub limits: Limits,
    /// Told about every call; `None` records nothing.
    pub observer: Option<Arc<dyn CallObserver>>,
    /// The source directory given to every plugin instance (`wasmop run --dev-source`); `None`
    /// gives them no directory.
    pub dev_source: Option<dev::DevSource>,
}

/// Compiles and links plugins; cheap to share behind an `Arc`. Plugins without a fuel budget run
/// on an unmetered engine; the metered one is built when the first plugin with a budget loads.
pub struct Runtime {
    plain: Backend,
    metered: OnceLock<Backend>,
    artifacts: ArtifactCache,
    limits: Limits,
    observer: Arc<dyn CallObserver>,
    http: Arc<http::Services>,
    dev_source: Option<Arc<dev::DevSource>>,
}

impl Runtime {
    /// Builds the unmetered engine and links the host imports.
    pub fn new(config: RuntimeConfig) -> Result<Self, LoadError> {
        let observer = config.observer.unwrap_or_else(|| Arc::new(Unobserved));
        Ok(Self {
            plain: Backend::new(false)?,
            metered: OnceLock::new(),
            artifacts: ArtifactCache::new(config.cache_dir),
            limits: config.limits,
            http: Arc::new(http::Services::new(observer.clone())),
            observer,
            dev_source: config.dev_source.map(Arc::new),
        })
    }

    /// Refuses `addresses` (the API server's) to every granted host name from now on, as
    /// loopback and link-local addresses are; a grant that names one literally still reaches it.
    pub fn refuse_addresses(&self, addresses: Vec<std::net::IpAddr>) {
        self.http.unreachable.set(addresses);
    }

    /// Reads the Secrets of plugin `plugin` (its secret headers, [`http`]) with `secrets` from
    /// now on; until then its requests with a secret header fail, saying no cluster is connected.
    /// The host gives each plugin a reader of only the Secrets it may read
    /// ([`crate::secret_access`]).
    pub fn read_secrets_for(&self, plugin: &str, secrets: Arc<dyn crate::secrets::SecretReader>) {
        self.http.read_secrets_for(plugin, Some(secrets));
    }

    /// Forgets plugin `plugin`'s reader of Secrets (it stopped).
    pub fn forget_secrets_of(&self, plugin: &str) {
        self.http.read_secrets_for(plugin, None);
    }

    /// Plugin `plugin`'s reader of Secrets; one that reads nothing when it has none.
    pub fn secrets_of(&self, plugin: &str) -> Arc<dyn crate::secrets::SecretReader> {
        self.http.secrets(plugin)
    }

    /// The limits of plugins that set none.
    pub fn default_limits(&self) -> Limits {
        self.limits
    }

    /// Reads, compiles, checks and links the plugin at `path` and calls its `describe()`.
    pub fn load(&self, path: &Path) -> Result<Module, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::ReadFailed { path: path.into(), source })?;
        self.load_bytes(path, &bytes)
    }

    /// Like [`Runtime::load`] for bytes already in memory; `origin` names them in errors.
    pub fn load_bytes(&self, origin: &Path, bytes: &[u8]) -> Result<Module, LoadError> {
        self.load_with(origin, bytes, &|_| None)
    }

    /// Like [`Runtime::load_bytes`], with the limits `limits_for(name)` gives for the plugin's
    /// name (`None`: the defaults). A plugin with a fuel budget is compiled for the metered
    /// engine; `describe()` itself always runs with the default limits.
    pub fn load_with(
        &self,
        origin: &Path,
        bytes: &[u8],
        limits_for: &dyn Fn(&str) -> Option<Limits>,
    ) -> Result<Module, LoadError> {
        let digest = hex::encode(Sha256::digest(bytes));
        let backend = if self.limits.fuel.is_some() { self.metered()? } else { &self.plain };
        let module = self.build(backend, origin, bytes, &digest)?;
        let Some(limits) = limits_for(module.name()) else { return Ok(module) };
        if limits.fuel.is_some() == self.limits.fuel.is_some() {
            return Ok(module.with_limits(limits));
        }
        let backend = if limits.fuel.is_some() { self.metered()? } else { &self.plain };
        Ok(self.build(backend, origin, bytes, &digest)?.with_limits(limits))
    }

    fn metered(&self) -> Result<&Backend, LoadError> {
        if let Some(backend) = self.metered.get() {
            return Ok(backend);
        }
        let backend = Backend::new(true)?;
        Ok(self.metered.get_or_init(|| backend))
    }

    /// Compiles (or loads from the cache), checks, links and describes a plugin on `backend`.
    fn build(&self, backend: &Backend, origin: &Path, bytes: &[u8], digest: &str) -> Result<Module, LoadError> {
        let component = self
            .artifacts
            .load_or_compile(&backend.engine, digest, bytes)
            .map_err(|e| LoadError::CompileFailed { path: origin.into(), reason: format!("{e:#}") })?;
        let version = check_contract(origin, &backend.engine, &component)?;
        let imports_http = http::imports_http(&backend.engine, &component);
        let linker = if imports_http { &backend.http_linker } else { &backend.linker };
        let instance_pre = linker
            .instantiate_pre(&component)
            .map_err(|e| LoadError::LinkFailed { path: origin.into(), reason: format!("{e:#}") })?;
        let mismatch = |interface: &str, reason| LoadError::ExportMismatch {
            path: origin.into(),
            interface: format!("{interface}@{version}"),
            reason,
        };
        let exports =
            exports::Exports::new(&instance_pre, version).map_err(|reason| mismatch(RECONCILER_INTERFACE, reason))?;
        let admission =
            exports::Admission::find(&instance_pre, version).map_err(|reason| mismatch(ADMISSION_INTERFACE, reason))?;
        let call = module::Instances::new(
            instance_pre,
            exports,
            admission,
            backend,
            self.limits,
            self.observer.clone(),
            self.http.clone(),
        )
        .with_source(self.dev_source.clone());
        // With a dev source, a saved edit of it is a new version of the plugin.
        let identity = self.dev_source.as_ref().map_or_else(|| digest.to_string(), |source| source.identity(digest));
        let module = Module::describe(origin, identity, call)?;
        if imports_http && module.config().http.is_none() {
            return Err(LoadError::HttpNotGranted { path: origin.into() });
        }
        Ok(module)
    }
}

/// Finds the exported `wasmop:plugin/reconciler@<version>` and refuses versions the host does
/// not load; returns the version.
fn check_contract(path: &Path, engine: &Engine, component: &Component) -> Result<&'static str, LoadError> {
    let ty = component.component_type();
    let mut found = None;
    for (name, export) in ty.exports(engine) {
        if let (Some(version), ComponentItem::ComponentInstance(_)) =
            (name.strip_prefix(RECONCILER_INTERFACE).and_then(|v| v.strip_prefix('@')), export.ty)
        {
            found = Some(version.to_string());
        }
    }
    match found {
        Some(v)
            if let Some(known) = std::iter::once(&CONTRACT_VERSION).chain(COMPATIBLE_VERSIONS).find(|k| **k == v) =>
        {
            Ok(known)
        }
        Some(v) => Err(LoadError::ContractMismatch { path: path.into(), found: v, supported: CONTRACT_VERSION }),
        None => Err(LoadError::NotAPlugin { path: path.into() }),
    }
}
