//! The bench's report: every end-to-end run, the wasmop/native ratios (and the shadowing host's
//! over the host alone's) per scenario and metric
//! (lowest to highest over the rounds), and the other parts' figures; written as markdown and
//! JSON under `target/bench/` and printed. Its header gives the controllers' worker threads and
//! the host's layout ([`super::layout`]); every table and run gives memory first: peak anonymous memory, peak PSS, peak RSS.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::layout::Layout;
use super::load::Latencies;
use super::process::{CacheRequests, PeakMemory, Side};

/// The metrics compared between the sides, in the order of the tables: memory first, anonymous
/// memory leading (what the kernel cannot drop). Throughput is better higher, the rest lower.
const METRICS: [&str; 7] =
    ["peak anon MiB", "peak PSS MiB", "peak RSS MiB", "CPU s", "throughput /s", "p50 ms", "p99 ms"];

/// The sides compared, each over its base: the hosts over native, the host shadowing a
/// candidate over the host alone (part `shadow`), and native's twin over native (the spread of
/// identical controllers).
const COMPARED: [(Side, Side); 4] = [
    (Side::Wasmop, Side::Native),
    (Side::WasmopBounded, Side::Native),
    (Side::WasmopShadowed, Side::Wasmop),
    (Side::NativeTwin, Side::Native),
];

/// One phase of one controller.
pub struct Run {
    side: Side,
    scenario: String,
    round: usize,
    changes: usize,
    seconds: f64,
    /// Change to status, sorted.
    latencies: Vec<Duration>,
    /// The API server's answers to the writes, sorted.
    writes: Vec<Duration>,
    cpu_seconds: f64,
    memory: PeakMemory,
    /// What a wasmop host's bounded caches asked the API server during the run.
    cache: Option<CacheRequests>,
    /// The controller's write requests, by the API server's count (when no other controller of its phase wrote Greetings of its group).
    api_writes: Option<f64>,
}

/// A run as `report.json` gives it, memory first.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RunJson<'a> {
    side: &'static str,
    scenario: &'a str,
    round: usize,
    peak_anon_mib: f64,
    peak_pss_mib: f64,
    peak_rss_mib: f64,
    cpu_seconds: f64,
    changes: usize,
    seconds: f64,
    throughput_per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    write_p99_ms: f64,
    write_max_ms: f64,
    /// LIST pages the host's bounded caches requested (none for native).
    cache_lists: Option<f64>,
    /// GETs of evicted objects (none for native).
    cache_refetches: Option<f64>,
    /// The controller's write requests on the primaries and Events, by the API server's count
    /// (none when another controller of its phase wrote Greetings of its group).
    api_writes: Option<f64>,
}

impl Run {
    /// A run of `changes` that took `elapsed` with these latencies, CPU seconds and peak memory.
    #[allow(clippy::too_many_arguments, reason = "one record, its fields named at the call site")]
    pub fn new(
        side: Side,
        scenario: &str,
        round: usize,
        changes: usize,
        elapsed: Duration,
        latencies: Latencies,
        cpu_seconds: f64,
        memory: PeakMemory,
    ) -> Self {
        let Latencies { to_status: mut latencies, mut writes } = latencies;
        latencies.sort();
        writes.sort();
        let seconds = elapsed.as_secs_f64();
        Self {
            side,
            scenario: scenario.into(),
            round,
            changes,
            seconds,
            latencies,
            writes,
            cpu_seconds,
            memory,
            cache: None,
            api_writes: None,
        }
    }

    /// The run with what the host's caches asked the API server during it.
    pub fn with_cache_requests(self, cache: Option<CacheRequests>) -> Self {
        Self { cache, ..self }
    }

    /// The run with the controller's write requests, by the API server's count.
    pub fn with_api_writes(self, api_writes: Option<f64>) -> Self {
        Self { api_writes, ..self }
    }

    /// The cache's LIST pages and GETs as a cell: `-` for native.
    fn cache_cell(&self) -> String {
        self.cache.map_or_else(|| "-".to_string(), |c| format!("{:.0} / {:.0}", c.lists, c.refetches))
    }

    fn percentile_ms(&self, p: f64) -> f64 {
        percentile_ms(&self.latencies, p)
    }

    fn throughput(&self) -> f64 {
        self.changes as f64 / self.seconds
    }

    /// The values of [`METRICS`], in their order.
    fn metrics(&self) -> [f64; METRICS.len()] {
        [
            self.memory.anon_mib,
            self.memory.pss_mib,
            self.memory.rss_mib,
            self.cpu_seconds,
            self.throughput(),
            self.percentile_ms(0.5),
            self.percentile_ms(0.99),
        ]
    }

    fn json(&self) -> RunJson<'_> {
        RunJson {
            side: self.side.label(),
            scenario: &self.scenario,
            round: self.round,
            peak_anon_mib: self.memory.anon_mib,
            peak_pss_mib: self.memory.pss_mib,
            peak_rss_mib: self.memory.rss_mib,
            cpu_seconds: self.cpu_seconds,
            changes: self.changes,
            seconds: self.seconds,
            throughput_per_second: self.throughput(),
            p50_ms: self.percentile_ms(0.5),
            p99_ms: self.percentile_ms(0.99),
            max_ms: self.percentile_ms(1.0),
            write_p99_ms: percentile_ms(&self.writes, 0.99),
            write_max_ms: percentile_ms(&self.writes, 1.0),
            cache_lists: self.cache.map(|c| c.lists),
            cache_refetches: self.cache.map(|c| c.refetches),
            api_writes: self.api_writes,
        }
    }
}

/// The `p`-quantile of `sorted`, in milliseconds (NaN when empty).
fn percentile_ms(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// Everything the bench measured.
pub struct Report {
    /// Runtime worker threads of every controller under test ([`super::knobs::threads`]).
    pub worker_threads: usize,
    /// The end-to-end runs.
    pub runs: Vec<Run>,
    /// Other parts' figures as JSON, by part.
    pub parts: BTreeMap<&'static str, Value>,
    /// Other parts' figures as markdown, in order.
    pub sections: Vec<String>,
    /// How much of its function order the measured host's build holds.
    pub layout: Option<Layout>,
}

/// One ratio of `report.json`: a metric of a side over its base's, over the rounds.
#[derive(Serialize)]
struct RatioJson<'a> {
    scenario: &'a str,
    metric: &'static str,
    lowest: f64,
    highest: f64,
}

/// `report.json`, its header first.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReportJson<'a> {
    seconds: f64,
    cores: usize,
    worker_threads: usize,
    layout: Option<Layout>,
    runs: Vec<RunJson<'a>>,
    ratios: BTreeMap<&'static str, Vec<RatioJson<'a>>>,
    parts: &'a BTreeMap<&'static str, Value>,
}

/// A side's ratios to its base: by scenario, per [`METRICS`] entry, (lowest, highest) over the
/// rounds.
type Ratios<'a> = BTreeMap<&'a str, [Option<(f64, f64)>; METRICS.len()]>;

impl Report {
    /// An empty report of controllers that run `worker_threads` worker threads each.
    pub fn new(worker_threads: usize) -> Self {
        Self { worker_threads, runs: Vec::new(), parts: BTreeMap::new(), sections: Vec::new(), layout: None }
    }

    /// The report's title: how long it ran, on how many cores, with how many threads.
    fn title(&self, seconds: f64) -> String {
        format!(
            "wasmop bench: {seconds:.0} s on {} cores, {} worker threads and {} concurrent reconciles per controller (both sides)",
            super::knobs::cores(),
            self.worker_threads,
            super::knobs::concurrency()
        )
    }

    /// `side`'s ratio to `base` per scenario and metric: (lowest, highest) over the rounds.
    fn ratios(&self, side: Side, base: Side) -> Ratios<'_> {
        let mut ratios = Ratios::new();
        for run in self.runs.iter().filter(|r| r.side == side) {
            let based = self.runs.iter().find(|n| n.side == base && n.scenario == run.scenario && n.round == run.round);
            let Some(based) = based else { continue };
            let row = ratios.entry(&run.scenario).or_default();
            for ((cell, mine), theirs) in row.iter_mut().zip(run.metrics()).zip(based.metrics()) {
                let ratio = mine / theirs;
                let (lo, hi) = cell.get_or_insert((ratio, ratio));
                (*lo, *hi) = (lo.min(ratio), hi.max(ratio));
            }
        }
        ratios
    }

    /// The report as markdown, titled with [`Report::title`] after `seconds`.
    pub fn markdown(&self, seconds: f64) -> String {
        let mut md = format!("# {}\n\n", self.title(seconds));
        if let Some(layout) = self.layout {
            let _ = writeln!(md, "Layout: {layout}.\n");
        }
        md.push_str("## End to end: every run\n\n");
        md.push_str(
            "| scenario | side | round | peak anon MiB | peak PSS MiB | peak RSS MiB | CPU s | changes | s | per s | p50 ms | p99 ms | max ms | write p99 ms | write max ms | API writes | cache LISTs / GETs |\n",
        );
        md.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        let mut runs: Vec<&Run> = self.runs.iter().collect();
        runs.sort_by(|a, b| (&a.scenario, a.round, a.side.label()).cmp(&(&b.scenario, b.round, b.side.label())));
        for r in runs {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.2} | {} | {:.1} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {} | {} |",
                r.scenario,
                r.side.label(),
                r.round,
                r.memory.anon_mib,
                r.memory.pss_mib,
                r.memory.rss_mib,
                r.cpu_seconds,
                r.changes,
                r.seconds,
                r.throughput(),
                r.percentile_ms(0.5),
                r.percentile_ms(0.99),
                r.percentile_ms(1.0),
                percentile_ms(&r.writes, 0.99),
                percentile_ms(&r.writes, 1.0),
                r.api_writes.map_or_else(|| "-".to_string(), |w| format!("{w:.0}")),
                r.cache_cell(),
            );
        }
        for (side, base) in COMPARED {
            let ratios = self.ratios(side, base);
            if ratios.is_empty() {
                continue;
            }
            let _ = writeln!(
                md,
                "\n## {} / {} (lowest-highest over the rounds; throughput: higher is better, the rest: lower)\n",
                side.label(),
                base.label()
            );
            let _ = writeln!(md, "| scenario | {} |", METRICS.join(" | "));
            let _ = writeln!(md, "|---|{}", "---|".repeat(METRICS.len()));
            for (scenario, row) in &ratios {
                let cells: Vec<String> = row
                    .iter()
                    .map(|cell| {
                        cell.map_or("-".to_string(), |(lo, hi)| {
                            if (hi - lo).abs() < 0.005 { format!("{lo:.2}x") } else { format!("{lo:.2}-{hi:.2}x") }
                        })
                    })
                    .collect();
                let _ = writeln!(md, "| {scenario} | {} |", cells.join(" | "));
            }
        }
        for section in &self.sections {
            md.push('\n');
            md.push_str(section);
        }
        md
    }

    /// The report as JSON (`seconds` the bench ran), in the order of the markdown: the header,
    /// every run, the ratios to the bases.
    pub fn json(&self, seconds: f64) -> impl Serialize + '_ {
        let ratios = |(side, base)| -> Vec<RatioJson<'_>> {
            self.ratios(side, base)
                .into_iter()
                .flat_map(|(scenario, row)| {
                    row.into_iter().zip(METRICS).filter_map(move |(cell, metric)| {
                        cell.map(|(lowest, highest)| RatioJson { scenario, metric, lowest, highest })
                    })
                })
                .collect()
        };
        ReportJson {
            seconds,
            cores: super::knobs::cores(),
            worker_threads: self.worker_threads,
            layout: self.layout,
            runs: self.runs.iter().map(Run::json).collect(),
            ratios: BTreeMap::from([
                ("wasmop", ratios(COMPARED[0])),
                ("wasmopBounded", ratios(COMPARED[1])),
                ("wasmopShadowedOverWasmop", ratios(COMPARED[2])),
            ]),
            parts: &self.parts,
        }
    }
}
