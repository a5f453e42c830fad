//! The controllers under test, each its own process, so that its CPU time and peak resident
//! memory are its own: the wasmop host running the greeting plugin, and `wasmop-native`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;

/// Clock ticks per second of `/proc/<pid>/stat`'s CPU times (`USER_HZ`, 100 on Linux).
const TICKS_PER_SECOND: f64 = 100.0;

/// Which controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// `wasmop-native`, the kube-rs controller.
    Native,
    /// The wasmop host with the greeting plugin, whole caches.
    Wasmop,
    /// The wasmop host with the greeting plugin and bounded caches (`--cache-budget-mib`).
    WasmopBounded,
}

impl Side {
    /// Its name in the report.
    pub fn label(self) -> &'static str {
        match self {
            Side::Native => "native",
            Side::Wasmop => "wasmop",
            Side::WasmopBounded => "wasmop bounded",
        }
    }
}

/// The bounded side's host budget, MiB (`BENCH_CACHE_BUDGET_MIB`, default 2).
pub fn budget_mib() -> usize {
    super::env_number("BENCH_CACHE_BUDGET_MIB", 2)
}

/// A binary built next to this one (`target/release/`).
fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let binary = exe.parent().context("the bench lies in a directory")?.join(name);
    anyhow::ensure!(binary.exists(), "{} is missing: `make bench` builds it", binary.display());
    Ok(binary)
}

/// How often the sampler reads a controller's resident memory by kind.
const SAMPLE_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// A running controller, killed when dropped.
pub struct Controller {
    child: tokio::process::Child,
    pid: u32,
    /// When it was started.
    pub started: Instant,
    /// The highest `RssAnon` sampled so far, KiB: its private data (heap, stacks, sandboxes),
    /// without the code and constants mapped from its binary (`RssFile`), which the kernel can
    /// drop and read again.
    peak_anon_kib: Arc<AtomicU64>,
    sampler: tokio::task::AbortHandle,
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.sampler.abort();
    }
}

impl Controller {
    /// Starts `side` on namespace `ns` of the cluster of `kubeconfig`; the wasmop host runs
    /// `plugins` (default: the greeting plugin) with `extra` arguments.
    pub fn start(side: Side, ns: &str, kubeconfig: &Path, extra: &[String]) -> anyhow::Result<Self> {
        let mut command = match side {
            Side::Native => {
                let mut c = tokio::process::Command::new(sibling("wasmop-native")?);
                c.arg(ns);
                c
            }
            Side::Wasmop | Side::WasmopBounded => {
                let mut c = tokio::process::Command::new(sibling("wasmop")?);
                c.args(["run", "--namespace", ns]);
                if extra.is_empty() {
                    c.arg("--plugin").arg(wasmop_tests::plugin("greeting"));
                }
                c.args(extra);
                // Extra flags for experiments, e.g. `--metrics-address 127.0.0.1:9901`.
                if let Ok(more) = std::env::var("BENCH_WASMOP_ARGS") {
                    c.args(more.split_whitespace());
                }
                if side == Side::WasmopBounded {
                    c.args(["--cache-budget-mib", &budget_mib().to_string()]);
                }
                // The host's log filter, `warn` unless `BENCH_WASMOP_LOG` says otherwise.
                c.env("RUST_LOG", std::env::var("BENCH_WASMOP_LOG").unwrap_or_else(|_| "warn".into()));
                c
            }
        };
        command.env("KUBECONFIG", kubeconfig).stdout(Stdio::null()).stderr(Stdio::inherit()).kill_on_drop(true);
        let started = Instant::now();
        let child = command.spawn()?;
        let pid = child.id().context("a running child has a pid")?;
        let peak_anon_kib = Arc::new(AtomicU64::new(0));
        let peak = peak_anon_kib.clone();
        let sampler = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(SAMPLE_EVERY);
            loop {
                ticks.tick().await;
                let Ok(kib) = status_kib(pid, "RssAnon:") else { return };
                peak.fetch_max(kib, Ordering::Relaxed);
            }
        })
        .abort_handle();
        Ok(Self { child, pid, started, peak_anon_kib, sampler })
    }

    /// CPU seconds it used so far, user and system.
    pub fn cpu_seconds(&self) -> anyhow::Result<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid))?;
        // Fields after the command name (which may hold spaces) start at the state, field 3.
        let after = stat.rsplit_once(')').context("a stat line")?.1;
        let fields: Vec<&str> = after.split_whitespace().collect();
        let (user, system): (f64, f64) = (fields[11].parse()?, fields[12].parse()?);
        Ok((user + system) / TICKS_PER_SECOND)
    }

    /// Its peak resident memory so far, MiB.
    pub fn peak_rss_mib(&self) -> anyhow::Result<f64> {
        Ok(status_kib(self.pid, "VmHWM:")? as f64 / 1024.0)
    }

    /// The highest anonymous resident memory sampled so far (every 50 ms), MiB.
    pub fn peak_anon_mib(&self) -> anyhow::Result<f64> {
        let now = status_kib(self.pid, "RssAnon:")?;
        Ok(self.peak_anon_kib.fetch_max(now, Ordering::Relaxed).max(now) as f64 / 1024.0)
    }

    /// Stops it and waits for it to go.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.child.kill().await?;
        Ok(())
    }
}

/// A KiB figure of `/proc/<pid>/status`, by its label (`VmHWM:`, `RssAnon:`).
fn status_kib(pid: u32, label: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status.lines().find(|l| l.starts_with(label)).with_context(|| format!("{label} in status"))?;
    Ok(line.split_whitespace().nth(1).context("a value")?.parse()?)
}
