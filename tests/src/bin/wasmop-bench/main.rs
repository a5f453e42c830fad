//! `make bench`: wasmop against a native kube-rs controller, in the same run, on the same
//! control plane. Parts (`BENCH_PARTS`, comma-separated; default all):
//!
//! - `call`: per-call overhead of the sandbox ([`call`]);
//! - `predicate`: per-event cost of a guest predicate against built-in terms ([`predicate`]);
//! - `burst`: the greeting plugin and `wasmop-native` as processes, side by side: 1,000
//!   creates, 1,000 x 3 changes ([`e2e::burst`]), then 100 changes a second, one side after
//!   the other ([`e2e::paced`]);
//! - `shadow`: the cost of a shadowed candidate: `burst` and `paced` for the greeting plugin alone
//!   and with itself as its candidate ([`shadow`]);
//! - `finalizer`: the same creates and changes with a finalizer on both sides, side by side
//!   ([`e2e::finalizer`]);
//! - `burst-10k`: 10,000 creates, then a restart with 10,000 existing objects, also with bounded
//!   caches ([`e2e::many`]);
//! - `reload`: hot reload to the first new-version reconcile ([`reload`]);
//! - `secondaries`: secondary-triggered reconciles ([`secondaries`]);
//! - `cache`: heap per cached object ([`cache`]);
//! - `dev`: a saved edit of a Python or TypeScript plugin's source to its new status under
//!   `wasmop run --dev-source` ([`dev`]);
//! - `languages`: the Greeting in Rust, Python and TypeScript: size, first and cached start,
//!   per-call time, a host's memory and CPU ([`languages`]);
//! - `scale`: 100,000 small primaries (`BENCH_SCALE_OBJECTS`), one host against three sharded
//!   hosts: per-host peak memory and CPU, time to reconcile all ([`scale`]);
//! - `admission`: the webpage plugin's admission webhooks against the same webhooks written
//!   natively, through the API server: p50 and p99 latency, CPU per request ([`admission`]).
//!
//! `BENCH_SIDES=native,"native twin"` runs a second `wasmop-native` beside the first instead of
//! wasmop (its own group, [`process::TWIN_GROUP`]): the table `native twin / native` is then
//! the spread of two identical controllers, the floor under any ratio of the others.
//! `BENCH_ROUNDS` (default 2) sets how often each end-to-end part runs (its sides side by side,
//! or in turn for `paced`, starting in the order of [`in_round_order`](sides::in_round_order); in `burst-10k` the
//! bounded host after the other two); `BENCH_SIDES` (e.g. `wasmop`) runs only
//! some sides; `BENCH_THREADS` (default: the available parallelism, as `#[tokio::main]` takes
//! it) sets the runtime worker threads of every controller process, the same on both sides
//! ([`threads`](knobs::threads)), and `BENCH_CONCURRENCY` (default 16) the reconciles each runs at once
//! ([`concurrency`](knobs::concurrency)); for experiments, `BENCH_WASMOP_ARGS` gives the host more flags (not
//! `--worker-threads` or `--metrics-address`: the bench passes them) and `BENCH_WASMOP_LOG` its
//! log filter (default `warn`); `BENCH_STOP=term` shuts the hosts down with SIGTERM instead of
//! killing them (for `make layout`, whose instrumented hosts write their profiles as they exit).
//! The runs table counts the LIST pages and GETs the host's bounded caches made of the API
//! server in each run (from its metrics).
//!
//! The report goes to `target/bench/report.md` and `report.json` (and stdout); its header gives
//! the worker threads, and how many of its layout order's names the host defines ([`layout`]).
//! Memory leads every table: peak anonymous memory (what the kernel cannot
//! drop), then peak PSS and peak RSS ([`process`]). Uses `WASMOP_TEST_KUBECONFIG` when set, else
//! starts a local control plane.

use std::time::Instant;

use wasmop_tests::{client, kubeconfig, workspace_root};

mod admission;
mod apiserver;
mod cache;
mod call;
mod dev;
mod e2e;
mod knobs;
mod languages;
mod layout;
mod load;
mod polling;
mod predicate;
mod process;
mod reload;
mod report;
mod scale;
mod secondaries;
mod shadow;
mod sides;

use knobs::{concurrency, env_number, threads};
use process::Side;
use report::Report;
use sides::{chosen, in_round_order};

/// Whether `BENCH_PARTS` selects `part`.
fn selected(part: &str) -> bool {
    std::env::var("BENCH_PARTS").map_or(true, |parts| parts.split(',').any(|p| p.trim() == part))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let began = Instant::now();
    anyhow::ensure!(threads() > 0, "BENCH_THREADS must be at least 1");
    anyhow::ensure!(concurrency() > 0, "BENCH_CONCURRENCY must be at least 1");
    println!(
        "controllers: {} worker threads and {} concurrent reconciles each (wasmop and native; BENCH_THREADS, BENCH_CONCURRENCY)",
        threads(),
        concurrency()
    );
    let mut report = Report::new(threads());
    report.layout = process::sibling("wasmop").and_then(|host| layout::Layout::of(&host)).unwrap_or_else(|err| {
        println!("warning: cannot tell whether the host is laid out: {err:#}");
        None
    });
    match report.layout {
        Some(layout) if !layout.current() => println!(
            "warning: {layout}: the rest lie scattered and keep more of the host's code resident; an edit renamed them (run tests/testbed/layout.sh --rename), or the host was linked before the order changed (build it: make bench)"
        ),
        Some(layout) => println!("layout: {layout}"),
        None => {}
    }
    if selected("call") {
        let (json, md) = call::per_call(env_number("BENCH_CALLS", 2000)).await?;
        println!("{md}");
        report.parts.insert("call", json);
        report.sections.push(md);
    }
    if selected("predicate") {
        let (json, md) = predicate::per_event(env_number("BENCH_EVENTS", 2000)).await?;
        println!("{md}");
        report.parts.insert("predicate", json);
        report.sections.push(md);
    }
    let cluster_parts = [
        "burst",
        "shadow",
        "finalizer",
        "burst-10k",
        "reload",
        "secondaries",
        "cache",
        "polling",
        "languages",
        "dev",
        "scale",
        "admission",
    ];
    if cluster_parts.into_iter().any(selected) {
        let client = client().await?;
        let kubeconfig = kubeconfig();
        let rounds = env_number("BENCH_ROUNDS", 2);
        // Part `shadow`'s comparisons, a line per round.
        let mut shadowed = Vec::new();
        if selected("burst") || selected("shadow") || selected("finalizer") || selected("burst-10k") {
            e2e::install(&client).await?;
        }
        for round in 1..=rounds {
            if selected("burst") {
                let sides = in_round_order(chosen(&[Side::Native, Side::Wasmop, Side::NativeTwin]), round);
                let (runs, warm) = e2e::burst(&client, kubeconfig, &sides, round, "").await?;
                println!("burst, round {round}: done after {:.0?}", began.elapsed());
                report.runs.extend(runs);
                report.runs.extend(e2e::paced(warm).await?);
                println!("paced, round {round}: done after {:.0?}", began.elapsed());
            }
            if selected("shadow") {
                let (runs, compared) = shadow::shadow(&client, kubeconfig, round).await?;
                report.runs.extend(runs);
                println!("shadow, round {round}: done after {:.0?}; {compared}", began.elapsed());
                shadowed.push(compared);
            }
            if selected("finalizer") {
                let sides = in_round_order(chosen(&[Side::Native, Side::Wasmop, Side::NativeTwin]), round);
                report.runs.extend(e2e::finalizer(&client, kubeconfig, &sides, round).await?);
                println!("finalizer, round {round}: done after {:.0?}", began.elapsed());
            }
            if selected("burst-10k") {
                // The bounded host alone after the pair: side by side with the whole one, the API
                // server's count could not tell their writes apart (the same group).
                for sides in [
                    in_round_order(chosen(&[Side::Native, Side::Wasmop, Side::NativeTwin]), round),
                    chosen(&[Side::WasmopBounded]),
                ] {
                    if !sides.is_empty() {
                        report.runs.extend(e2e::many(&client, kubeconfig, &sides, round).await?);
                    }
                }
                println!("10,000, round {round}: done after {:.0?}", began.elapsed());
            }
        }
        if !shadowed.is_empty() {
            let md = format!(
                "## Shadow rollouts\n\nThe greeting plugin with itself as its candidate (`wasmop shadowed`) beside it alone (`wasmop`): every run above named `shadow part`, their ratios in `wasmop shadowed / wasmop`.\n\n{}\n",
                shadowed.iter().map(|l| format!("- {l}")).collect::<Vec<_>>().join("\n")
            );
            report.parts.insert("shadow", serde_json::json!(shadowed));
            report.sections.push(md);
        }
        if selected("reload") {
            let (json, md) = reload::reload(&client, kubeconfig).await?;
            println!("{md}");
            report.parts.insert("reload", json);
            report.sections.push(md);
        }
        if selected("secondaries") {
            let (json, md) = secondaries::secondaries(&client, env_number("BENCH_SECONDARIES", 100)).await?;
            println!("{md}");
            report.parts.insert("secondaries", json);
            report.sections.push(md);
        }
        if selected("polling") {
            let (json, md) = polling::polling(&client, env_number("BENCH_POLLED", 1000)).await?;
            println!("{md}");
            report.parts.insert("polling", json);
            report.sections.push(md);
        }
        if selected("languages") {
            let calls = env_number("BENCH_LANGUAGE_CALLS", 500);
            let objects = env_number("BENCH_LANGUAGE_OBJECTS", 100);
            let (json, md) = languages::languages(&client, kubeconfig, calls, objects).await?;
            println!("{md}");
            report.parts.insert("languages", json);
            report.sections.push(md);
        }
        if selected("dev") {
            let (json, md) = dev::dev(&client, kubeconfig, env_number("BENCH_DEV_EDITS", 7)).await?;
            println!("{md}");
            report.parts.insert("dev", json);
            report.sections.push(md);
        }
        if selected("scale") {
            let (json, md) = scale::scale(&client, kubeconfig, rounds).await?;
            println!("{md}");
            report.parts.insert("scale", json);
            report.sections.push(md);
        }
        if selected("admission") {
            let requests = env_number("BENCH_ADMISSIONS", 2000);
            let at_once = env_number("BENCH_ADMISSION_CONCURRENCY", 4);
            let (json, md) = admission::admission(&client, kubeconfig, requests, at_once, rounds).await?;
            println!("{md}");
            report.parts.insert("admission", json);
            report.sections.push(md);
        }
        if selected("cache") {
            let (json, md) = cache::cache_memory(&client, env_number("BENCH_CACHED", 10_000)).await?;
            report.parts.insert("cache", json);
            report.sections.push(md);
        }
    }
    let seconds = began.elapsed().as_secs_f64();
    let markdown = report.markdown(seconds);
    println!("{markdown}");
    let dir = workspace_root().join("target/bench");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("report.md"), &markdown)?;
    std::fs::write(dir.join("report.json"), serde_json::to_vec_pretty(&report.json(seconds))?)?;
    println!("written: target/bench/report.md, target/bench/report.json");
    Ok(())
}
