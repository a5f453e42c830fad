//! The bench's report: every end-to-end run, the wasmop/native ratios per scenario and metric
//! (lowest to highest over the rounds), and the other parts' figures; written as markdown and
//! JSON under `target/bench/` and printed.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde_json::{Value, json};

use super::load::Latencies;
use super::process::Side;

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
    peak_rss_mib: f64,
    peak_anon_mib: f64,
}

impl Run {
    /// A run of `changes` that took `elapsed` with these latencies, CPU seconds, peak RSS and
    /// peak anonymous RSS.
    #[allow(clippy::too_many_arguments, reason = "one record, its fields named at the call site")]
    pub fn new(
        side: Side,
        scenario: &str,
        round: usize,
        changes: usize,
        elapsed: Duration,
        latencies: Latencies,
        cpu_seconds: f64,
        peak_rss_mib: f64,
        peak_anon_mib: f64,
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
            peak_rss_mib,
            peak_anon_mib,
        }
    }

    fn percentile_ms(&self, p: f64) -> f64 {
        percentile_ms(&self.latencies, p)
    }

    fn throughput(&self) -> f64 {
        self.changes as f64 / self.seconds
    }

    /// The metrics compared, by name, with whether lower is better.
    fn metrics(&self) -> [(&'static str, f64, bool); 6] {
        [
            ("throughput /s", self.throughput(), false),
            ("p50 ms", self.percentile_ms(0.5), true),
            ("p99 ms", self.percentile_ms(0.99), true),
            ("CPU s", self.cpu_seconds, true),
            ("peak RSS MiB", self.peak_rss_mib, true),
            ("peak anon MiB", self.peak_anon_mib, true),
        ]
    }

    fn json(&self) -> Value {
        json!({
            "side": self.side.label(), "scenario": self.scenario, "round": self.round,
            "changes": self.changes, "seconds": self.seconds, "throughputPerSecond": self.throughput(),
            "p50Ms": self.percentile_ms(0.5), "p99Ms": self.percentile_ms(0.99), "maxMs": self.percentile_ms(1.0),
            "writeP99Ms": percentile_ms(&self.writes, 0.99), "writeMaxMs": percentile_ms(&self.writes, 1.0),
            "cpuSeconds": self.cpu_seconds, "peakRssMib": self.peak_rss_mib, "peakAnonMib": self.peak_anon_mib,
        })
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
#[derive(Default)]
pub struct Report {
    /// The end-to-end runs.
    pub runs: Vec<Run>,
    /// Other parts' figures as JSON, by part.
    pub parts: BTreeMap<&'static str, Value>,
    /// Other parts' figures as markdown, in order.
    pub sections: Vec<String>,
}

impl Report {
    /// `side`'s ratio to native per scenario and metric: (lowest, highest) over the rounds.
    fn ratios(&self, side: Side) -> BTreeMap<(String, &'static str), (f64, f64)> {
        let mut ratios: BTreeMap<(String, &'static str), (f64, f64)> = BTreeMap::new();
        for run in self.runs.iter().filter(|r| r.side == side) {
            let native =
                self.runs.iter().find(|n| n.side == Side::Native && n.scenario == run.scenario && n.round == run.round);
            let Some(native) = native else { continue };
            for ((name, mine, _), (_, theirs, _)) in run.metrics().into_iter().zip(native.metrics()) {
                let ratio = mine / theirs;
                let entry = ratios.entry((run.scenario.clone(), name)).or_insert((ratio, ratio));
                *entry = (entry.0.min(ratio), entry.1.max(ratio));
            }
        }
        ratios
    }

    /// The report as markdown.
    pub fn markdown(&self, title: &str) -> String {
        let mut md = format!("# {title}\n\n## End to end: every run\n\n");
        md.push_str(
            "| scenario | side | round | changes | s | per s | p50 ms | p99 ms | max ms | write p99 ms | write max ms | CPU s | peak RSS MiB | peak anon MiB |\n",
        );
        md.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        let mut runs: Vec<&Run> = self.runs.iter().collect();
        runs.sort_by(|a, b| (&a.scenario, a.round, a.side.label()).cmp(&(&b.scenario, b.round, b.side.label())));
        for r in runs {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {:.1} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} | {:.1} | {:.1} |",
                r.scenario,
                r.side.label(),
                r.round,
                r.changes,
                r.seconds,
                r.throughput(),
                r.percentile_ms(0.5),
                r.percentile_ms(0.99),
                r.percentile_ms(1.0),
                percentile_ms(&r.writes, 0.99),
                percentile_ms(&r.writes, 1.0),
                r.cpu_seconds,
                r.peak_rss_mib,
                r.peak_anon_mib
            );
        }
        for side in [Side::Wasmop, Side::WasmopBounded] {
            let ratios = self.ratios(side);
            if ratios.is_empty() {
                continue;
            }
            let _ = writeln!(
                md,
                "\n## {} / native (lowest-highest over the rounds; throughput: higher is better, the rest: lower)\n",
                side.label()
            );
            md.push_str(
                "| scenario | throughput /s | p50 ms | p99 ms | CPU s | peak RSS MiB | peak anon MiB |\n|---|---|---|---|---|---|---|\n",
            );
            let scenarios: Vec<&String> =
                ratios.keys().map(|(s, _)| s).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
            for scenario in scenarios {
                let cell = |metric: &'static str| {
                    ratios.get(&(scenario.clone(), metric)).map_or("-".to_string(), |(lo, hi)| {
                        if (hi - lo).abs() < 0.005 { format!("{lo:.2}x") } else { format!("{lo:.2}-{hi:.2}x") }
                    })
                };
                let _ = writeln!(
                    md,
                    "| {scenario} | {} | {} | {} | {} | {} | {} |",
                    cell("throughput /s"),
                    cell("p50 ms"),
                    cell("p99 ms"),
                    cell("CPU s"),
                    cell("peak RSS MiB"),
                    cell("peak anon MiB")
                );
            }
        }
        for section in &self.sections {
            md.push('\n');
            md.push_str(section);
        }
        md
    }

    /// The report as JSON.
    pub fn json(&self) -> Value {
        let ratios = |side| -> Value {
            let ratios: Vec<Value> = Report::ratios(self, side)
                .into_iter()
                .map(|((scenario, metric), (lo, hi))| json!({ "scenario": scenario, "metric": metric, "lowest": lo, "highest": hi }))
                .collect();
            Value::Array(ratios)
        };
        json!({
            "runs": self.runs.iter().map(Run::json).collect::<Vec<_>>(),
            "ratios": { "wasmop": ratios(Side::Wasmop), "wasmopBounded": ratios(Side::WasmopBounded) },
            "parts": self.parts,
        })
    }
}
