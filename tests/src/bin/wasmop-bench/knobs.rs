//! The bench's settings from the environment that every controller under test shares.

/// A number from the environment, or `default`.
pub(super) fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Runtime worker threads of every controller under test, the same on both sides: `BENCH_THREADS`,
/// else the available parallelism (cgroup-aware, as `#[tokio::main]` and the host's
/// `--worker-threads` default take it). The wasmop host gets `--worker-threads`, `wasmop-native`
/// `WASMOP_WORKER_THREADS`.
pub(super) fn threads() -> usize {
    env_number("BENCH_THREADS", cores())
}

/// Reconciles in flight at once per controller, the same on both sides: `BENCH_CONCURRENCY`,
/// default 16 (the wasmop host gets `--plugin-concurrency`, `wasmop-native` its `CONCURRENCY`).
pub(super) fn concurrency() -> usize {
    env_number("BENCH_CONCURRENCY", 16)
}

/// The cores this process may use (cgroup-aware), for the report's title and [`threads`].
pub(super) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}
