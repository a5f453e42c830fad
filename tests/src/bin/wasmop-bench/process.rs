//! The controllers under test, each its own process, so that its CPU time and memory are its
//! own: the wasmop host running the greeting plugin, and `wasmop-native`, each with
//! [`super::knobs::threads`] runtime worker threads.
//!
//! Memory leads with what the kernel cannot drop: anonymous resident memory (`RssAnon`: heap,
//! stacks, sandboxes). Then PSS (`/proc/<pid>/smaps_rollup`), which adds the resident file pages
//! (the binary's code and constants) divided among the processes that share them, and last the
//! peak RSS (`VmHWM`), which counts those file pages whole although the kernel can drop them and
//! read them again.

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
    /// A second `wasmop-native` on Greetings of a group of its own ([`TWIN_GROUP`]): beside
    /// [`Side::Native`], its ratios to it are the bench's spread for identical controllers.
    /// Only when `BENCH_SIDES` names it.
    NativeTwin,
    /// The wasmop host with the greeting plugin, whole caches.
    Wasmop,
    /// The wasmop host with the greeting plugin and bounded caches (`--cache-budget-mib`).
    WasmopBounded,
    /// The wasmop host with the greeting plugin and the same module as its candidate, shadowed
    /// beside it (`--config`, [`shadow_config`]).
    WasmopShadowed,
}

impl Side {
    /// Its name in the report.
    pub fn label(self) -> &'static str {
        match self {
            Side::Native => "native",
            Side::NativeTwin => "native twin",
            Side::Wasmop => "wasmop",
            Side::WasmopBounded => "wasmop bounded",
            Side::WasmopShadowed => "wasmop shadowed",
        }
    }

    /// The API group of the Greetings it reconciles: the greeting plugin's for the wasmop
    /// hosts, a copy of the same resource for `wasmop-native`. Side by side, the API server's
    /// count of writes (by group) then tells the controllers apart.
    pub fn group(self) -> &'static str {
        match self {
            Side::Native => NATIVE_GROUP,
            Side::NativeTwin => TWIN_GROUP,
            Side::Wasmop | Side::WasmopBounded | Side::WasmopShadowed => WASMOP_GROUP,
        }
    }

    /// Whether it is `wasmop-native`.
    pub fn native(self) -> bool {
        matches!(self, Side::Native | Side::NativeTwin)
    }
}

/// The greeting plugin's API group.
pub const WASMOP_GROUP: &str = "example.wasmop.dev";
/// The group of `wasmop-native`'s copy of the Greeting resource: as long, so that objects and
/// events are the same size.
pub const NATIVE_GROUP: &str = "example.native.dev";
/// The group of [`Side::NativeTwin`]'s copy, as long again.
pub const TWIN_GROUP: &str = "example.second.dev";

/// The configuration file of [`Side::WasmopShadowed`]: `candidate` shadowed beside the plugin
/// `plugin`, written under `target/bench/`.
fn shadow_config(plugin: &str, candidate: &str) -> anyhow::Result<PathBuf> {
    let dir = wasmop_tests::workspace_root().join("target/bench");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("shadowed.yaml");
    std::fs::write(&path, format!("candidates:\n  {plugin}: {candidate:?}\n"))?;
    Ok(path)
}

/// The bounded side's host budget, MiB (`BENCH_CACHE_BUDGET_MIB`, default 2).
pub fn budget_mib() -> usize {
    super::knobs::env_number("BENCH_CACHE_BUDGET_MIB", 2)
}

/// A binary built next to this one (`target/release/`).
pub fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let binary = exe.parent().context("the bench lies in a directory")?.join(name);
    anyhow::ensure!(binary.exists(), "{} is missing: `make bench` builds it", binary.display());
    Ok(binary)
}

/// How often the sampler reads a controller's anonymous memory and PSS.
const SAMPLE_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// A running controller, killed when dropped.
pub struct Controller {
    child: tokio::process::Child,
    pid: u32,
    /// When it was started.
    pub started: Instant,
    /// The highest figures sampled so far.
    peaks: Arc<Sampled>,
    sampler: tokio::task::AbortHandle,
    /// Where a wasmop host serves its metrics.
    metrics: Option<std::net::SocketAddr>,
}

/// The requests a wasmop host's bounded caches made of the API server.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CacheRequests {
    /// LIST pages (`wasmop_cache_lists_total`).
    pub lists: f64,
    /// GETs of evicted objects (`wasmop_cache_refetches_total`).
    pub refetches: f64,
}

impl std::ops::Sub for CacheRequests {
    type Output = Self;
    fn sub(self, earlier: Self) -> Self {
        Self { lists: self.lists - earlier.lists, refetches: self.refetches - earlier.refetches }
    }
}

/// The highest memory figures sampled of a controller, KiB.
#[derive(Default)]
struct Sampled {
    /// `RssAnon`: its private data (heap, stacks, sandboxes), without the code and constants
    /// mapped from its binary (`RssFile`), which the kernel can drop and read again.
    anon_kib: AtomicU64,
    /// `Pss` of `smaps_rollup`: its resident memory with each shared page divided among the
    /// processes that map it.
    pss_kib: AtomicU64,
}

impl Sampled {
    /// Samples `pid` once; fails once it is gone.
    fn sample(&self, pid: u32) -> anyhow::Result<()> {
        self.anon_kib.fetch_max(proc_kib(pid, "status", "RssAnon:")?, Ordering::Relaxed);
        self.pss_kib.fetch_max(proc_kib(pid, "smaps_rollup", "Pss:")?, Ordering::Relaxed);
        Ok(())
    }
}

/// A controller's peak memory, MiB.
#[derive(Debug, Clone, Copy)]
pub struct PeakMemory {
    /// The highest anonymous resident memory sampled (`RssAnon`).
    pub anon_mib: f64,
    /// The highest proportional set size sampled (`Pss`).
    pub pss_mib: f64,
    /// The peak resident set size, as the kernel kept it (`VmHWM`).
    pub rss_mib: f64,
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.sampler.abort();
    }
}

impl Controller {
    /// Starts `side` on namespace `ns` of the cluster of `kubeconfig`; the wasmop host runs
    /// `plugins` (default: the greeting plugin) with `extra` arguments, and `wasmop-native` gets
    /// `extra` as its own (`--finalizer`).
    pub fn start(side: Side, ns: &str, kubeconfig: &Path, extra: &[String]) -> anyhow::Result<Self> {
        let mut metrics = None;
        let mut command = match side {
            Side::Native | Side::NativeTwin => {
                let mut c = tokio::process::Command::new(sibling("wasmop-native")?);
                c.arg(ns).arg(super::knobs::concurrency().to_string()).args(["--group", side.group()]).args(extra);
                c.env("WASMOP_WORKER_THREADS", super::knobs::threads().to_string());
                c
            }
            Side::Wasmop | Side::WasmopBounded | Side::WasmopShadowed => {
                let greeting = wasmop_tests::plugin("greeting").display().to_string();
                let plugins: Vec<&str> = if extra.is_empty() {
                    vec![greeting.as_str()]
                } else {
                    extra.windows(2).filter(|w| w[0] == "--plugin").map(|w| w[1].as_str()).collect()
                };
                // A dev runtime describes itself only with its dev source (part `dev` times edits,
                // after the first load).
                if !extra.iter().any(|arg| arg == "--dev-source") {
                    compile_ahead(&plugins)?;
                }
                let mut c = tokio::process::Command::new(sibling("wasmop")?);
                c.args(["run", "--namespace", ns, "--worker-threads", &super::knobs::threads().to_string()]);
                c.args(["--plugin-concurrency", &super::knobs::concurrency().to_string()]);
                if extra.is_empty() {
                    c.args(["--plugin", &greeting]);
                }
                c.args(extra);
                // Its metrics, for the requests of its caches.
                let address = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
                c.args(["--metrics-address", &address.to_string()]);
                metrics = Some(address);
                // Extra flags for experiments, e.g. `--cache-idle 1m`.
                if let Ok(more) = std::env::var("BENCH_WASMOP_ARGS") {
                    c.args(more.split_whitespace());
                }
                if side == Side::WasmopBounded {
                    c.args(["--cache-budget-mib", &budget_mib().to_string()]);
                }
                if side == Side::WasmopShadowed {
                    c.arg("--config").arg(shadow_config("greeting", &greeting)?);
                }
                // The host's log filter, `warn` unless `BENCH_WASMOP_LOG` says otherwise.
                c.env("RUST_LOG", std::env::var("BENCH_WASMOP_LOG").unwrap_or_else(|_| "warn".into()));
                c
            }
        };
        command.env("KUBECONFIG", kubeconfig);
        Self::spawn(command, metrics)
    }

    /// Starts `wasmop-native webhook`: the webpage plugin's webhooks written natively, served on
    /// `address` with the certificate `cert` and its key `key` (PEM files), on
    /// [`super::knobs::threads`] runtime worker threads.
    pub fn native_webhook(address: std::net::SocketAddr, cert: &Path, key: &Path) -> anyhow::Result<Self> {
        let mut command = tokio::process::Command::new(sibling("wasmop-native")?);
        command.arg("webhook").arg(address.to_string()).arg(cert).arg(key);
        command.env("WASMOP_WORKER_THREADS", super::knobs::threads().to_string());
        Self::spawn(command, None)
    }

    /// Runs `command`, its output discarded and its errors shown, and samples its memory.
    fn spawn(mut command: tokio::process::Command, metrics: Option<std::net::SocketAddr>) -> anyhow::Result<Self> {
        command.stdout(Stdio::null()).stderr(Stdio::inherit()).kill_on_drop(true);
        let started = Instant::now();
        let child = command.spawn()?;
        let pid = child.id().context("a running child has a pid")?;
        let peaks = Arc::new(Sampled::default());
        let sampled = peaks.clone();
        let sampler = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(SAMPLE_EVERY);
            loop {
                ticks.tick().await;
                if sampled.sample(pid).is_err() {
                    return;
                }
            }
        })
        .abort_handle();
        Ok(Self { child, pid, started, peaks, sampler, metrics })
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

    /// Its peak memory so far: anonymous memory and PSS as sampled (every 50 ms and now), RSS
    /// as the kernel kept it.
    pub fn peak_memory(&self) -> anyhow::Result<PeakMemory> {
        self.peaks.sample(self.pid)?;
        let mib = |kib: u64| kib as f64 / 1024.0;
        Ok(PeakMemory {
            anon_mib: mib(self.peaks.anon_kib.load(Ordering::Relaxed)),
            pss_mib: mib(self.peaks.pss_kib.load(Ordering::Relaxed)),
            rss_mib: mib(proc_kib(self.pid, "status", "VmHWM:")?),
        })
    }

    /// The requests its bounded caches made so far; `None` for the native controller (whose
    /// caches hold every object and make no such requests).
    pub fn cache_requests(&self) -> anyhow::Result<Option<CacheRequests>> {
        let Some(text) = self.scrape()? else { return Ok(None) };
        Ok(Some(CacheRequests {
            lists: sum(&text, "wasmop_cache_lists_total"),
            refetches: sum(&text, "wasmop_cache_refetches_total"),
        }))
    }

    /// The sum of a wasmop host's metric lines that start with `prefix` (0 for the native
    /// controller).
    pub fn metric(&self, prefix: &str) -> anyhow::Result<f64> {
        Ok(self.scrape()?.map_or(0.0, |text| sum(&text, prefix)))
    }

    /// A wasmop host's metrics text; `None` for the native controller.
    fn scrape(&self) -> anyhow::Result<Option<String>> {
        use std::io::{Read, Write};
        let Some(address) = self.metrics else { return Ok(None) };
        // A host just started serves its metrics once it has loaded its plugins.
        let connecting = Instant::now();
        let mut stream = loop {
            match std::net::TcpStream::connect_timeout(&address, std::time::Duration::from_secs(5)) {
                Ok(stream) => break stream,
                Err(err) if connecting.elapsed() > std::time::Duration::from_secs(60) => return Err(err.into()),
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
            }
        };
        stream.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
        stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
        let mut text = String::new();
        stream.read_to_string(&mut text)?;
        Ok(Some(text))
    }

    /// Stops it and waits for it to go: killed, or with `BENCH_STOP=term` shut down as by
    /// [`Controller::terminate`] (so that a host built with `-Cprofile-generate` writes its
    /// profile, for `make layout`).
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if std::env::var("BENCH_STOP").is_ok_and(|v| v == "term") {
            return self.terminate().await;
        }
        self.child.kill().await?;
        Ok(())
    }

    /// Shuts it down as its pod would be (SIGTERM), so that it leaves its shard group and
    /// releases its Leases, and waits for it to go; killed after [`SHUTDOWN`]. Killed instead,
    /// a sharded host's Lease stays until it expires, and the next hosts in its group wait for
    /// that before they own its share.
    pub async fn terminate(mut self) -> anyhow::Result<()> {
        let status = std::process::Command::new("kill").args(["-TERM", &self.pid.to_string()]).status()?;
        anyhow::ensure!(status.success(), "kill -TERM {} failed: {status}", self.pid);
        if tokio::time::timeout(SHUTDOWN, self.child.wait()).await.is_err() {
            self.child.kill().await?;
            anyhow::bail!("the host did not stop within {SHUTDOWN:?} of SIGTERM");
        }
        Ok(())
    }
}

/// The longest [`Controller::terminate`] waits for a host to shut down.
const SHUTDOWN: std::time::Duration = std::time::Duration::from_secs(30);

/// The sum of the metric lines of `text` that start with `prefix`.
fn sum(text: &str, prefix: &str) -> f64 {
    let lines = text.lines().filter(|l| l.starts_with(prefix) && !l.starts_with('#'));
    // Folded from +0: an empty f64 sum is -0, which the table would print as "-0".
    lines.filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).fold(0.0, |sum, v| sum + v)
}

/// A KiB figure of `/proc/<pid>/<file>` (`status`, `smaps_rollup`), by its label (`VmHWM:`,
/// `RssAnon:`, `Pss:`).
fn proc_kib(pid: u32, file: &str, label: &str) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}"))?;
    let line = text.lines().find(|l| l.starts_with(label)).with_context(|| format!("{label} in {file}"))?;
    Ok(line.split_whitespace().nth(1).context("a value")?.parse()?)
}

/// Compiles `plugins` into the host's on-disk cache of compiled modules (`wasmop inspect` loads
/// them as `run` does) before a measured process starts: a host runs from that cache on every
/// start but its machine's first, and compiling with cranelift in the measured process would
/// count a one-time compile's memory in every round.
fn compile_ahead(plugins: &[&str]) -> anyhow::Result<()> {
    for plugin in plugins {
        let status = std::process::Command::new(sibling("wasmop")?)
            .args(["inspect", plugin])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?;
        anyhow::ensure!(status.success(), "wasmop inspect {plugin} failed");
    }
    Ok(())
}
