//! The per-call store data: WASI with nothing granted, `wasi:http` through the plugin's grant
//! ([`super::http`]), the memory limiter, captured output and the host imports
//! (`wasmop:plugin/host`), which read only the host's caches.

use std::sync::Arc;
use std::time::Instant;

use futures::future::{BoxFuture, FutureExt};
use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use wasmop_core::record::{Answer, Import};
use wasmtime_wasi::p2::bindings::random::{insecure, insecure_seed, random};

use super::bindings::wasmop::plugin::{host, types};
use super::dev::{DevSource, GUEST_DIR};
use super::http::Hooks;
use super::limits::MemoryLimiter;
use super::tap::{self, Tap};

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
    /// Keeps the delay a call of the reconcile this view serves asked for the reconcile's retry
    /// (the `retry-after` import); the last ask wins. The default drops it: only a reconcile is
    /// retried.
    fn ask_retry_after(&self, _delay: std::time::Duration) {}
    /// The delay the reconcile's calls last asked for its retry, if any.
    fn asked_retry_after(&self) -> Option<std::time::Duration> {
        None
    }
    /// Where the calls of the reconcile this view serves are recorded; `None` (the default):
    /// they are not.
    fn recorder(&self) -> Option<&tap::Recorder> {
        None
    }
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
    wasi: Wasi,
    table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    cache: Arc<dyn CacheReader>,
    http: WasiHttpCtx,
    hooks: Hooks,
    /// Bytes of stdout and stderr that earlier calls of a reused instance wrote.
    earlier_output: (usize, usize),
    /// Sees every import call when the call is recorded or replayed.
    tap: Option<Arc<Tap>>,
}

/// A call's WASI: no preopened directories (but the dev source's, read-only, when the host runs
/// one), no environment, no arguments, no sockets. WASI is
/// linked so that any component loads, but it grants nothing except clocks and randomness;
/// stdout and stderr are kept in memory. Outgoing HTTP goes only through the sandbox's `hooks`,
/// which hold it to the plugin's grant.
///
/// Its context is made on the call's first use of WASI: a call may use none, and making one
/// costs two of `wasmtime-wasi`'s default contexts (random generators seeded, clocks and
/// checks boxed), about a tenth of making a Rust plugin's instance.
struct Wasi {
    ctx: Option<WasiCtx>,
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
    /// A tapped call's clocks: its tap, and when its store was made (the monotonic clock counts
    /// from there).
    clocks: Option<(Arc<Tap>, Instant)>,
    /// The dev source, preopened read-only at [`GUEST_DIR`] when the host runs one.
    source: Option<Arc<DevSource>>,
}

impl Wasi {
    fn ctx(&mut self) -> &mut WasiCtx {
        let Self { ctx, stdout, stderr, clocks, source } = self;
        ctx.get_or_insert_with(|| {
            let mut wasi = WasiCtx::builder();
            wasi.stdout(stdout.clone()).stderr(stderr.clone());
            if let Some(source) = source
                && let Err(err) = wasi.preopened_dir(source.dir(), GUEST_DIR, FsPerms::ReadOnly)
            {
                tracing::warn!(dir = %source.dir().display(), %err, "cannot give the dev source to the plugin");
            }
            if let Some((tap, start)) = clocks {
                wasi.wall_clock(tap::WallClock(tap.clone()))
                    .monotonic_clock(tap::MonotonicClock { tap: tap.clone(), start: *start });
            }
            wasi.build()
        })
    }
}

impl Sandbox {
    /// The store data of one call: `memory_limit` bytes, reads from `cache`, outgoing HTTP
    /// through `hooks` (used only when the plugin is linked with `wasi:http`), every import
    /// call seen by `tap` when there is one (the clocks included), and `source`'s directory when
    /// the host runs a dev source.
    pub(crate) fn new(
        memory_limit: usize,
        cache: Arc<dyn CacheReader>,
        hooks: Hooks,
        tap: Option<Arc<Tap>>,
        source: Option<Arc<DevSource>>,
    ) -> Self {
        let wasi = Wasi {
            ctx: None,
            stdout: MemoryOutputPipe::new(OUTPUT_CAPACITY),
            stderr: MemoryOutputPipe::new(OUTPUT_CAPACITY),
            clocks: tap.as_ref().map(|tap| (tap.clone(), Instant::now())),
            source,
        };
        Self {
            wasi,
            table: ResourceTable::new(),
            limiter: MemoryLimiter::new(memory_limit),
            cache,
            http: WasiHttpCtx::new(),
            hooks,
            earlier_output: (0, 0),
            tap,
        }
    }

    /// Whether the call's imports are recorded or replayed: its instance is not kept for
    /// another call, whose clocks would be this one's.
    pub(crate) fn tapped(&self) -> bool {
        self.tap.is_some()
    }

    /// Readies the store of an instance kept from an earlier call for the next one: reads from
    /// `cache`, outgoing HTTP through `hooks`, the memory cap not hit, and only the output
    /// written from now on reported.
    pub(crate) fn reuse(&mut self, cache: Arc<dyn CacheReader>, hooks: Hooks) {
        self.cache = cache;
        self.hooks = hooks;
        self.limiter.exceeded = None;
        self.earlier_output = (self.wasi.stdout.contents().len(), self.wasi.stderr.contents().len());
    }

    /// What the current call wrote to stdout and to stderr.
    pub(crate) fn output(&self) -> [(&'static str, bytes::Bytes); 2] {
        let (stdout, stderr) = self.earlier_output;
        let Wasi { stdout: out, stderr: err, .. } = &self.wasi;
        [("stdout", out.contents().slice(stdout..)), ("stderr", err.contents().slice(stderr..))]
    }

    /// Whether the output buffers are more than half full: an instance kept for later calls
    /// would soon drop what they write.
    pub(crate) fn output_mostly_used(&self) -> bool {
        self.wasi.stdout.contents().len().max(self.wasi.stderr.contents().len()) > OUTPUT_CAPACITY / 2
    }
}

impl WasiView for Sandbox {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: self.wasi.ctx(), table: &mut self.table }
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
        if let Some(tap) = &self.tap {
            let level = match level {
                LogLevel::Trace => "trace",
                LogLevel::Debug => "debug",
                LogLevel::Info => "info",
                LogLevel::Warn => "warn",
                LogLevel::Error => "error",
            };
            let import = Import::Log { level: level.into(), message: message.clone(), fields: fields.clone() };
            if tap.replayed(&import).is_none() {
                tap.answered(import, Answer::Nothing);
            }
        }
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
        let Some(tap) = self.tap.clone() else {
            return self.cache.get(&kind, namespace.as_deref(), &name).await;
        };
        let import = Import::Get { kind: (&kind).into(), namespace: namespace.clone(), name: name.clone() };
        match tap.replayed(&import) {
            Some(Answer::Object(result)) => result,
            Some(_) => Err(tap::unanswered("get")),
            None => {
                let result = self.cache.get(&kind, namespace.as_deref(), &name).await;
                tap.answered(import, Answer::Object(result.clone()));
                result
            }
        }
    }

    async fn list(
        &mut self,
        kind: types::KindRef,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> ListResult {
        let Some(tap) = self.tap.clone() else {
            return self.cache.list(&kind, namespace.as_deref(), label_selector.as_deref()).await;
        };
        let import =
            Import::List { kind: (&kind).into(), namespace: namespace.clone(), label_selector: label_selector.clone() };
        match tap.replayed(&import) {
            Some(Answer::Objects(result)) => result,
            Some(_) => Err(tap::unanswered("list")),
            None => {
                let result = self.cache.list(&kind, namespace.as_deref(), label_selector.as_deref()).await;
                tap.answered(import, Answer::Objects(result.clone()));
                result
            }
        }
    }

    async fn secondaries(&mut self, kind: types::KindRef) -> ListResult {
        let Some(tap) = self.tap.clone() else { return self.cache.secondaries(&kind).await };
        let import = Import::Secondaries { kind: (&kind).into() };
        match tap.replayed(&import) {
            Some(Answer::Objects(result)) => result,
            Some(_) => Err(tap::unanswered("secondaries")),
            None => {
                let result = self.cache.secondaries(&kind).await;
                tap.answered(import, Answer::Objects(result.clone()));
                result
            }
        }
    }

    // Not taped: it answers nothing, and a replayed or shadowed call is never retried.
    async fn retry_after(&mut self, delay_ms: u64) {
        self.cache.ask_retry_after(std::time::Duration::from_millis(delay_ms));
    }
}

/// `wasi:random`, which shadows `wasmtime-wasi`'s in the linker so that a tapped call's random
/// values are recorded or replayed; an untapped call gets `wasmtime-wasi`'s.
impl Sandbox {
    /// The answer to `import`: the tape's when replaying (`replayed` reads it; `None` when it
    /// is of another shape), else the host's (`host`), recorded when tapped (`answer`).
    fn random<T>(
        &mut self,
        import: impl FnOnce() -> Import,
        host: impl FnOnce(&mut wasmtime_wasi::random::WasiRandomCtx) -> wasmtime::Result<T>,
        answer: impl FnOnce(&T) -> Answer,
        replayed: impl FnOnce(Answer) -> Option<T>,
    ) -> wasmtime::Result<T> {
        let Some(tap) = self.tap.clone() else { return host(self.wasi.ctx().random()) };
        let import = import();
        if let Some(recorded) = tap.replayed(&import) {
            return replayed(recorded).ok_or_else(|| wasmtime::Error::msg(tap::unanswered(import.name())));
        }
        let value = host(self.wasi.ctx().random())?;
        tap.answered(import, answer(&value));
        Ok(value)
    }
}

impl random::Host for Sandbox {
    fn get_random_bytes(&mut self, len: u64) -> wasmtime::Result<Vec<u8>> {
        self.random(
            || Import::RandomBytes { len },
            |ctx| random::Host::get_random_bytes(ctx, len),
            |bytes| Answer::Bytes(bytes.clone()),
            |answer| if let Answer::Bytes(bytes) = answer { Some(bytes) } else { None },
        )
    }

    fn get_random_u64(&mut self) -> wasmtime::Result<u64> {
        self.random(|| Import::RandomU64, random::Host::get_random_u64, |n| Answer::Number(*n), number)
    }
}

impl insecure::Host for Sandbox {
    fn get_insecure_random_bytes(&mut self, len: u64) -> wasmtime::Result<Vec<u8>> {
        self.random(
            || Import::InsecureRandomBytes { len },
            |ctx| insecure::Host::get_insecure_random_bytes(ctx, len),
            |bytes| Answer::Bytes(bytes.clone()),
            |answer| if let Answer::Bytes(bytes) = answer { Some(bytes) } else { None },
        )
    }

    fn get_insecure_random_u64(&mut self) -> wasmtime::Result<u64> {
        self.random(
            || Import::InsecureRandomU64,
            insecure::Host::get_insecure_random_u64,
            |n| Answer::Number(*n),
            number,
        )
    }
}

impl insecure_seed::Host for Sandbox {
    fn insecure_seed(&mut self) -> wasmtime::Result<(u64, u64)> {
        self.random(
            || Import::InsecureSeed,
            insecure_seed::Host::insecure_seed,
            |(a, b)| Answer::Seed(*a, *b),
            |answer| if let Answer::Seed(a, b) = answer { Some((a, b)) } else { None },
        )
    }
}

/// A recorded number.
fn number(answer: Answer) -> Option<u64> {
    if let Answer::Number(n) = answer { Some(n) } else { None }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox(tap: Option<Arc<Tap>>) -> Sandbox {
        Sandbox::new(1 << 20, Arc::new(NoCache), Hooks::new("reconcile", None, tap.clone()), tap, None)
    }

    /// A call that uses no WASI makes no context; the first use makes it, later ones reuse it.
    #[test]
    fn the_wasi_context_is_made_on_first_use_only() {
        let mut sandbox = sandbox(None);
        assert!(sandbox.wasi.ctx.is_none());
        assert!(sandbox.output().iter().all(|(_, bytes)| bytes.is_empty()));
        let first: *const WasiCtx = WasiView::ctx(&mut sandbox).ctx;
        let again: *const WasiCtx = WasiView::ctx(&mut sandbox).ctx;
        assert_eq!(first, again);
    }

    /// A tapped call's clocks and random values still go through its tap when its context is
    /// made late.
    #[test]
    fn a_context_made_late_still_records_a_tapped_calls_clocks_and_randomness() {
        use wasmtime_wasi::clocks::WasiClocksView;
        use wasmtime_wasi::p2::bindings::clocks::wall_clock;
        let tap = Tap::recording();
        let mut sandbox = sandbox(Some(tap.clone()));
        random::Host::get_random_u64(&mut sandbox).unwrap();
        wall_clock::Host::now(&mut sandbox.clocks()).unwrap();
        let Tap::Record(calls) = &*tap else { unreachable!("a recording tap") };
        let imports: Vec<_> = calls.lock().unwrap().iter().map(|call| call.import.name()).collect();
        assert_eq!(imports, ["random-u64", "wall-clock"]);
    }
}
