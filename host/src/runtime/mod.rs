//! The wasm edge: one wasmtime [`Engine`] for the host, modules compiled once (and cached on
//! disk), and a fresh sandboxed store per call from a pre-linked `InstancePre`.

mod artifacts;
pub mod bindings;
mod error;
mod limits;
mod module;
mod sandbox;

use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasSelf, Linker, types::ComponentItem};
use wasmtime::{Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

pub use error::{CallError, LoadError};
pub use limits::{Limits, MemoryLimitExceeded};
pub use module::{GuestResult, Module};
pub use sandbox::CacheReader;

use artifacts::ArtifactCache;
use bindings::{CONTRACT_VERSION, Plugin, PluginPre, RECONCILER_INTERFACE};
use sandbox::Sandbox;

/// How often the epoch advances; deadlines are rounded up to this granularity.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Runtime settings.
#[derive(Debug, Clone, Default)]
pub struct RuntimeConfig {
    /// Directory for compiled artifacts; `None` compiles every time.
    pub cache_dir: Option<PathBuf>,
    /// Default limits for every plugin.
    pub limits: Limits,
}

/// Compiles and links plugins; cheap to share behind an `Arc`.
pub struct Runtime {
    engine: Engine,
    linker: Linker<Sandbox>,
    artifacts: ArtifactCache,
    limits: Limits,
}

impl Runtime {
    /// Builds the engine (pooling allocator, epoch interruption), links WASI and the host
    /// imports, and starts the epoch ticker, which stops when the engine is dropped.
    pub fn new(config: RuntimeConfig) -> Result<Self, LoadError> {
        let mut wasm = wasmtime::Config::new();
        wasm.wasm_component_model(true).epoch_interruption(true);
        wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(PoolingAllocationConfig::default()));
        let engine = Engine::new(&wasm).map_err(LoadError::engine)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(LoadError::engine)?;
        Plugin::add_to_linker::<Sandbox, HasSelf<Sandbox>>(&mut linker, |s| s).map_err(LoadError::engine)?;
        spawn_epoch_ticker(&engine);
        Ok(Self { engine, linker, artifacts: ArtifactCache::new(config.cache_dir), limits: config.limits })
    }

    /// Reads, compiles, checks and links the plugin at `path` and calls its `describe()`.
    pub fn load(&self, path: &Path) -> Result<Module, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::ReadFailed { path: path.into(), source })?;
        self.load_bytes(path, &bytes)
    }

    /// Like [`Runtime::load`] for bytes already in memory; `origin` names them in errors.
    pub fn load_bytes(&self, origin: &Path, bytes: &[u8]) -> Result<Module, LoadError> {
        let digest = hex::encode(Sha256::digest(bytes));
        let component = self
            .artifacts
            .load_or_compile(&self.engine, &digest, bytes)
            .map_err(|e| LoadError::CompileFailed { path: origin.into(), reason: format!("{e:#}") })?;
        check_contract(origin, &self.engine, &component)?;
        let instance_pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| LoadError::LinkFailed { path: origin.into(), reason: format!("{e:#}") })?;
        let pre = PluginPre::new(instance_pre)
            .map_err(|e| LoadError::LinkFailed { path: origin.into(), reason: format!("{e:#}") })?;
        Module::describe(origin, digest, pre, self.engine.clone(), self.limits)
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

/// Advances the engine's epoch every [`EPOCH_TICK`] on a thread that holds only a weak
/// reference, so it ends with the engine.
fn spawn_epoch_ticker(engine: &Engine) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("wasmop-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        })
        .expect("spawning the epoch ticker thread");
}
