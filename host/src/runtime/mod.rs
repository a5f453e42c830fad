//! The wasm edge: one wasmtime [`Engine`] for the host, modules compiled once (and cached on
//! disk), and a fresh sandboxed store per call from a pre-linked `InstancePre`.

mod artifacts;
pub mod bindings;
mod error;
mod exports;
pub mod http;
mod limits;
mod module;
pub(crate) mod recorded;
mod sandbox;
pub mod tap;
mod ticker;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasSelf, Linker, types::ComponentItem};
use wasmtime::{Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

pub use error::{CallError, LoadError};
pub use limits::{Limits, MemoryLimitExceeded, MemoryMib, WALL_CLOCK_FACTOR};
pub use module::{Current, GuestResult, Module};
pub use sandbox::{CacheReader, GetResult, ListResult};
pub use tap::{Recorder, Tap};

use artifacts::ArtifactCache;
use bindings::{CONTRACT_VERSION, Plugin, RECONCILER_INTERFACE};
use sandbox::Sandbox;
use ticker::Ticker;

/// Bytes of each pooled linear memory kept resident between instances (reset in place).
const KEEP_RESIDENT_MEMORY: usize = 1 << 20;
/// Bytes of each pooled table kept resident between instances.
const KEEP_RESIDENT_TABLE: usize = 64 << 10;

pub use ticker::EPOCH_TICK;

/// Told about every call into a plugin: how long it took and, when metered, the fuel it used;
/// and about every outgoing HTTP request a plugin makes.
pub trait CallObserver: Send + Sync {
    /// `plugin`'s export `export` returned (or trapped) after `elapsed`, using `fuel` units.
    fn called(&self, plugin: &str, export: &'static str, elapsed: Duration, fuel: Option<u64>);

    /// An outgoing request of `plugin` to `origin` (`scheme://host:port` of a granted origin, or
    /// [`http::UNDECLARED`]) ended with `code` ([`http::Code::label`]: the status, `refused`,
    /// `timeout`, `too_large` or `error`) after `elapsed`, its body read included.
    fn http_request(&self, plugin: &str, origin: &str, code: &str, elapsed: Duration) {
        let _ = (plugin, origin, code, elapsed);
    }
}

/// Observes nothing.
struct Unobserved;

impl CallObserver for Unobserved {
    fn called(&self, _: &str, _: &'static str, _: Duration, _: Option<u64>) {}
}

/// Runtime settings.
#[derive(Clone, Default)]
pub struct RuntimeConfig {
    /// Directory for compiled artifacts; `None` compiles every time.
    pub cache_dir: Option<PathBuf>,
    /// Default limits for every plugin.
    pub limits: Limits,
    /// Told about every call; `None` records nothing.
    pub observer: Option<Arc<dyn CallObserver>>,
}

/// An engine and the linkers of the host imports for it: one without `wasi:http`, one with it
/// for plugins that import it.
struct Backend {
    engine: Engine,
    linker: Linker<Sandbox>,
    http_linker: Linker<Sandbox>,
    metered: bool,
    ticker: Arc<Ticker>,
}

impl Backend {
    /// Builds an engine (pooling allocator, epoch interruption, fuel when `metered`), links WASI
    /// and the host imports, and starts the epoch ticker, which stops when the engine is dropped.
    fn new(metered: bool) -> Result<Self, LoadError> {
        let mut wasm = wasmtime::Config::new();
        wasm.wasm_component_model(true).epoch_interruption(true).consume_fuel(metered);
        // A call's instance gives its slot back dirty. By default every touched page is then
        // madvised away and faulted in again by the next call: over half of a 2 KB reconcile's
        // time (page faults, TLB shootdowns). Instead, keep the first MiB of each memory (and
        // 64 KiB of each table) resident and reset only the pages the call wrote, found with
        // Linux's PAGEMAP_SCAN where the kernel has it (6.7+): 55-60 us per call became 23-30 us.
        let mut pooling = PoolingAllocationConfig::default();
        pooling
            .linear_memory_keep_resident(KEEP_RESIDENT_MEMORY)
            .table_keep_resident(KEEP_RESIDENT_TABLE)
            .pagemap_scan(wasmtime::Enabled::Auto);
        wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
        let engine = Engine::new(&wasm).map_err(LoadError::engine)?;
        let mut linker = Linker::new(&engine);
        // Async imports and exports (here and in `bindings`): a call runs as a fiber on the
        // runtime thread that awaits it, with no hop to a blocking thread, and yields at every
        // epoch tick (see `Instances::enter`).
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(LoadError::engine)?;
        Plugin::add_to_linker::<Sandbox, HasSelf<Sandbox>>(&mut linker, |s| s).map_err(LoadError::engine)?;
        // wasi:random through the sandbox, which records and replays it when a call is tapped.
        {
            use wasmtime_wasi::p2::bindings::random::{insecure, insecure_seed, random};
            linker.allow_shadowing(true);
            random::add_to_linker::<Sandbox, HasSelf<Sandbox>>(&mut linker, |s| s).map_err(LoadError::engine)?;
            insecure::add_to_linker::<Sandbox, HasSelf<Sandbox>>(&mut linker, |s| s).map_err(LoadError::engine)?;
            insecure_seed::add_to_linker::<Sandbox, HasSelf<Sandbox>>(&mut linker, |s| s).map_err(LoadError::engine)?;
            linker.allow_shadowing(false);
        }
        let mut http_linker = linker.clone();
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut http_linker).map_err(LoadError::engine)?;
        let ticker = Ticker::start(&engine);
        Ok(Self { engine, linker, http_linker, metered, ticker })
    }
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
        check_contract(origin, &backend.engine, &component)?;
        let imports_http = http::imports_http(&backend.engine, &component);
        let linker = if imports_http { &backend.http_linker } else { &backend.linker };
        let instance_pre = linker
            .instantiate_pre(&component)
            .map_err(|e| LoadError::LinkFailed { path: origin.into(), reason: format!("{e:#}") })?;
        let exports = exports::Exports::new(&instance_pre)
            .map_err(|reason| LoadError::ExportMismatch { path: origin.into(), reason })?;
        let call = module::Instances::new(
            instance_pre,
            exports,
            backend,
            self.limits,
            self.observer.clone(),
            self.http.clone(),
        );
        let module = Module::describe(origin, digest.to_string(), call)?;
        if imports_http && module.config().http.is_none() {
            return Err(LoadError::HttpNotGranted { path: origin.into() });
        }
        Ok(module)
    }
}

/// Finds the exported `wasmop:plugin/reconciler@<version>` and refuses other versions.
fn check_contract(path: &Path, engine: &Engine, component: &Component) -> Result<(), LoadError> {
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
        Some(v) if v == CONTRACT_VERSION => Ok(()),
        Some(v) => Err(LoadError::ContractMismatch { path: path.into(), found: v, supported: CONTRACT_VERSION }),
        None => Err(LoadError::NotAPlugin { path: path.into() }),
    }
}
