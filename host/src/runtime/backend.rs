//! An engine and the linkers of the host imports for it, with the pooling allocator's settings
//! and the epoch ticker that interrupts calls.

use std::sync::Arc;

use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::bindings::Operator;
use super::error::LoadError;
use super::sandbox::Sandbox;
use super::ticker::Ticker;

/// Bytes of each pooled linear memory kept resident between instances (reset in place).
const KEEP_RESIDENT_MEMORY: usize = 1 << 20;
/// Bytes of each pooled table kept resident between instances.
const KEEP_RESIDENT_TABLE: usize = 64 << 10;

/// An engine and the linkers of the host imports for it: one without `wasi:http`, one with it
/// for plugins that import it.
pub(super) struct Backend {
    pub(super) engine: Engine,
    pub(super) linker: Linker<Sandbox>,
    pub(super) http_linker: Linker<Sandbox>,
    pub(super) metered: bool,
    pub(super) ticker: Arc<Ticker>,
}

impl Backend {
    /// Builds an engine (pooling allocator, epoch interruption, fuel when `metered`), links WASI
    /// and the host imports, and starts the epoch ticker, which stops when the engine is dropped.
    pub(super) fn new(metered: bool) -> Result<Self, LoadError> {
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
        Operator::add_to_linker::<Sandbox, HasSelf<Sandbox>>(&mut linker, |s| s).map_err(LoadError::engine)?;
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
