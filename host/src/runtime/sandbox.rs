//! The per-call store data: WASI with nothing granted, `wasi:http` through the plugin's grant
//! ([`super::http`]), the memory limiter, captured output and the host imports
//! (`wasmop:plugin/host`), which read only the host's caches.

use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt};
use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::bindings::wasmop::plugin::{host, types};
use super::http::Hooks;
use super::limits::MemoryLimiter;

/// Bytes of stdout/stderr kept per call; the rest is dropped.
const OUTPUT_CAPACITY: usize = 64 << 10;

/// One object as JSON, `None` when absent; `Err` says why it cannot be read.
pub type GetResult = Result<Option<String>, String>;
/// Objects as JSON; `Err` says why they cannot be read.
pub type ListResult = Result<Vec<String>, String>;

/// Read access to cached objects, as the guest's `get`, `list` and `secondaries` imports see
/// it. Reads are asynchronous: a bounded cache fetches an evicted object from the API server,
/// and the call waits for it without holding a runtime thread.
pub trait CacheReader: Send + Sync {
    /// One object as JSON, `Ok(None)` when absent, `Err` when the kind is not watched.
    fn get<'a>(
        &'a self,
        kind: &'a types::KindRef,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, GetResult>;
    /// Objects of a kind as JSON, optionally in one namespace and matching a label selector.
    fn list<'a>(
        &'a self,
        kind: &'a types::KindRef,
        namespace: Option<&'a str>,
        selector: Option<&'a str>,
    ) -> BoxFuture<'a, ListResult>;
    /// The objects of a watched kind that belong to the primary being reconciled, as JSON;
    /// `Err` when the kind is not watched or no primary is being reconciled.
    fn secondaries<'a>(&'a self, kind: &'a types::KindRef) -> BoxFuture<'a, ListResult>;
}

/// A reader with nothing in it: what `describe()` sees.
pub(crate) struct NoCache;

impl NoCache {
    fn refuse<T>(kind: &types::KindRef) -> Result<T, String> {
        Err(format!("no cache is available during describe() (asked for {})", kind.kind))
    }
}

impl CacheReader for NoCache {
    fn get<'a>(&'a self, kind: &'a types::KindRef, _: Option<&'a str>, _: &'a str) -> BoxFuture<'a, GetResult> {
        futures::future::ready(Self::refuse(kind)).boxed()
    }
    fn list<'a>(
        &'a self,
        kind: &'a types::KindRef,
        _: Option<&'a str>,
        _: Option<&'a str>,
    ) -> BoxFuture<'a, ListResult> {
        futures::future::ready(Self::refuse(kind)).boxed()
    }
    fn secondaries<'a>(&'a self, kind: &'a types::KindRef) -> BoxFuture<'a, ListResult> {
        futures::future::ready(Self::refuse(kind)).boxed()
    }
}

/// Store data for one call into a plugin.
pub(crate) struct Sandbox {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) stdout: MemoryOutputPipe,
    pub(crate) stderr: MemoryOutputPipe,
    cache: Arc<dyn CacheReader>,
    http: WasiHttpCtx,
    hooks: Hooks,
    /// Bytes of stdout and stderr that earlier calls of a reused instance wrote.
    earlier_output: (usize, usize),
}

impl Sandbox {
    /// The store data of one call: `memory_limit` bytes, reads from `cache`, outgoing HTTP
    /// through `hooks` (used only when the plugin is linked with `wasi:http`).
    pub(crate) fn new(memory_limit: usize, cache: Arc<dyn CacheReader>, hooks: Hooks) -> Self {
        let stdout = MemoryOutputPipe::new(OUTPUT_CAPACITY);
        let stderr = MemoryOutputPipe::new(OUTPUT_CAPACITY);
        // No preopened directories, no environment, no arguments, no sockets: WASI is linked so
        // that any component loads, but it grants nothing except clocks and randomness. Outgoing
        // HTTP goes only through `hooks`, which hold it to the plugin's grant.
        let wasi = WasiCtx::builder().stdout(stdout.clone()).stderr(stderr.clone()).build();
        Self {
            wasi,
            table: ResourceTable::new(),
            limiter: MemoryLimiter::new(memory_limit),
            stdout,
            stderr,
            cache,
            http: WasiHttpCtx::new(),
            hooks,
            earlier_output: (0, 0),
        }
    }

    /// Readies the store of an instance kept from an earlier call for the next one: reads from
    /// `cache`, outgoing HTTP through `hooks`, the memory cap not hit, and only the output
    /// written from now on reported.
    pub(crate) fn reuse(&mut self, cache: Arc<dyn CacheReader>, hooks: Hooks) {
        self.cache = cache;
        self.hooks = hooks;
        self.limiter.exceeded = None;
        self.earlier_output = (self.stdout.contents().len(), self.stderr.contents().len());
    }

    /// What the current call wrote to stdout and to stderr.
    pub(crate) fn output(&self) -> [(&'static str, bytes::Bytes); 2] {
        let (stdout, stderr) = self.earlier_output;
        [("stdout", self.stdout.contents().slice(stdout..)), ("stderr", self.stderr.contents().slice(stderr..))]
    }

    /// Whether the output buffers are more than half full: an instance kept for later calls
    /// would soon drop what they write.
    pub(crate) fn output_mostly_used(&self) -> bool {
        self.stdout.contents().len().max(self.stderr.contents().len()) > OUTPUT_CAPACITY / 2
    }
}

impl WasiView for Sandbox {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl WasiHttpView for Sandbox {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView { ctx: &mut self.http, table: &mut self.table, hooks: &mut self.hooks }
    }
}

impl types::Host for Sandbox {}

impl host::Host for Sandbox {
    async fn log(&mut self, level: types::LogLevel, message: String, fields: Vec<(String, String)>) {
        use types::LogLevel;
        let fields = Fields(&fields);
        match level {
            LogLevel::Trace => tracing::trace!(target: "wasmop::plugin", %fields, "{message}"),
            LogLevel::Debug => tracing::debug!(target: "wasmop::plugin", %fields, "{message}"),
            LogLevel::Info => tracing::info!(target: "wasmop::plugin", %fields, "{message}"),
            LogLevel::Warn => tracing::warn!(target: "wasmop::plugin", %fields, "{message}"),
            LogLevel::Error => tracing::error!(target: "wasmop::plugin", %fields, "{message}"),
        }
    }

    async fn get(&mut self, kind: types::KindRef, namespace: Option<String>, name: String) -> GetResult {
        self.cache.get(&kind, namespace.as_deref(), &name).await
    }

    async fn list(
        &mut self,
        kind: types::KindRef,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> ListResult {
        self.cache.list(&kind, namespace.as_deref(), label_selector.as_deref()).await
    }

    async fn secondaries(&mut self, kind: types::KindRef) -> ListResult {
        self.cache.secondaries(&kind).await
    }
}

/// Guest log fields rendered as `k=v` pairs (`-` when there are none).
struct Fields<'a>(&'a [(String, String)]);

impl std::fmt::Display for Fields<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return f.write_str("-");
        }
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}
