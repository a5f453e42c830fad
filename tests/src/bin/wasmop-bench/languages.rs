//! Part `languages`: the Greeting written in Rust, Python (componentize-py), TypeScript
//! (componentize-js) and Go (standard Go, wasmop-componentize), the same plugin and the same object, side by side:
//!
//! - the component's size;
//! - its first start (compile, store in an empty cache directory, describe) and a cached start
//!   (a fresh engine loading what the first start stored, then describe), each timed in this
//!   process;
//! - `BENCH_LANGUAGE_CALLS` (default 500) `reconcile` calls, each in a fresh sandbox as the host
//!   makes them, after 20 unmeasured ones;
//! - a `wasmop run` process with the plugin reconciling `BENCH_LANGUAGE_OBJECTS` (default 100)
//!   Greetings: its peak anonymous memory and PSS, and its CPU seconds.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Client;
use serde_json::{Value, json};
use wasmop::runtime::{CacheReader, Limits, Runtime, RuntimeConfig};
use wasmop_tests::{EmptyCache, first_request, plugin, workspace_root};

use super::load::{self, Tracker};
use super::process::{Controller, Side};

/// The languages, by the file their Greeting builds to.
const LANGUAGES: [(&str, &str); 4] =
    [("Rust", "greeting"), ("Python", "greeting-py"), ("TypeScript", "greeting-ts"), ("Go", "greeting-go")];

/// How long the process's Greetings may take to show their status.
const SETTLE: Duration = Duration::from_secs(300);

/// What one language measured.
struct Figures {
    language: &'static str,
    bytes: u64,
    first_start: Duration,
    cached_start: Duration,
    calls: Vec<Duration>,
    anon_mib: f64,
    pss_mib: f64,
    cpu_seconds: f64,
}

fn runtime(cache: &Path) -> anyhow::Result<Runtime> {
    let config = RuntimeConfig {
        cache_dir: Some(cache.to_path_buf()),
        limits: Limits::default(),
        observer: None,
        dev_source: None,
    };
    Ok(Runtime::new(config)?)
}

fn greeting(name: &str) -> Value {
    json!({
        "apiVersion": "example.wasmop.dev/v1", "kind": "Greeting",
        "metadata": { "name": name, "namespace": "bench", "generation": 1, "uid": "6c0a3d43-5b4e-4b8e-9d0e-3f1c6c9b1f20",
                      "resourceVersion": "1" },
        "spec": { "name": "world" }
    })
}

/// Starts, calls and runs one language's Greeting.
async fn measure(
    client: &Client,
    kubeconfig: &Path,
    language: &'static str,
    file: &str,
    calls: usize,
    objects: usize,
) -> anyhow::Result<Figures> {
    let path = plugin(file);
    let cache = workspace_root().join("target/bench/languages-cache").join(file);
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::create_dir_all(&cache)?;

    let started = Instant::now();
    runtime(&cache)?.load(&path)?;
    let first_start = started.elapsed();
    let started = Instant::now();
    let module = runtime(&cache)?.load(&path)?;
    let cached_start = started.elapsed();

    let request = first_request(&greeting("g"));
    let empty: Arc<dyn CacheReader> = Arc::new(EmptyCache);
    let mut timed = Vec::with_capacity(calls);
    for i in 0..calls + 20 {
        let started = Instant::now();
        let outcome = module.reconcile(empty.clone(), &request).await?.map_err(|e| anyhow::anyhow!("{e:?}"))?;
        if i >= 20 {
            timed.push(started.elapsed());
        }
        anyhow::ensure!(
            outcome.status.as_deref().is_some_and(|s| s.contains("Hello, world!")),
            "{language}: {outcome:?}"
        );
    }
    timed.sort();

    let ns = wasmop_tests::namespace(client, &format!("bench-lang-{file}")).await?;
    let api = load::greetings(client, &ns, Side::Wasmop.group());
    let tracker = Tracker::start(&api).await?;
    let args = ["--plugin".to_string(), path.display().to_string(), "--cache-dir".into(), cache.display().to_string()];
    let controller = Controller::start(Side::Wasmop, &ns, kubeconfig, &args)?;
    let cpu = controller.cpu_seconds()?;
    load::create(&api, &tracker, 0..objects, "v0").await?;
    tracker.settle(SETTLE).await?;
    let cpu_seconds = controller.cpu_seconds()? - cpu;
    let memory = controller.peak_memory()?;
    controller.stop().await?;
    Ok(Figures {
        language,
        bytes: std::fs::metadata(&path)?.len(),
        first_start,
        cached_start,
        calls: timed,
        anon_mib: memory.anon_mib,
        pss_mib: memory.pss_mib,
        cpu_seconds,
    })
}

fn mean(v: &[Duration]) -> Duration {
    v.iter().sum::<Duration>() / v.len().max(1) as u32
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Runs the part; returns its JSON and markdown.
pub async fn languages(
    client: &Client,
    kubeconfig: &Path,
    calls: usize,
    objects: usize,
) -> anyhow::Result<(Value, String)> {
    super::e2e::install(client).await?;
    let mut all = Vec::new();
    for (language, file) in LANGUAGES {
        all.push(measure(client, kubeconfig, language, file, calls, objects).await?);
    }
    let rust = mean(&all[0].calls).as_secs_f64();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mut md = format!(
        "## Languages\n\nThe Greeting in each language: component size, first start (compile and store) and \
         cached start (a fresh engine loading the stored code), each with `describe`; {calls} `reconcile` \
         calls in a fresh sandbox each; a host reconciling {objects} Greetings (peak memory, CPU).\n\n\
         | language | size MiB | first start s | cached start s | call mean us | p50 us | p99 us | x Rust | \
         anon MiB | PSS MiB | CPU s |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
    );
    let mut json = serde_json::Map::new();
    for f in &all {
        let ratio = mean(&f.calls).as_secs_f64() / rust;
        md.push_str(&format!(
            "| {} | {:.1} | {:.2} | {:.3} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} |\n",
            f.language,
            f.bytes as f64 / (1 << 20) as f64,
            f.first_start.as_secs_f64(),
            f.cached_start.as_secs_f64(),
            us(mean(&f.calls)),
            us(percentile(&f.calls, 0.5)),
            us(percentile(&f.calls, 0.99)),
            ratio,
            f.anon_mib,
            f.pss_mib,
            f.cpu_seconds,
        ));
        json.insert(
            f.language.to_string(),
            json!({
                "bytes": f.bytes, "firstStartS": f.first_start.as_secs_f64(), "cachedStartS": f.cached_start.as_secs_f64(),
                "callMeanUs": us(mean(&f.calls)), "callP50Us": us(percentile(&f.calls, 0.5)),
                "callP99Us": us(percentile(&f.calls, 0.99)), "callRatio": ratio,
                "anonMib": f.anon_mib, "pssMib": f.pss_mib, "cpuSeconds": f.cpu_seconds,
            }),
        );
    }
    Ok((Value::Object(json), md))
}
