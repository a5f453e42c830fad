//! Part `scale`: many small primaries (`BENCH_SCALE_OBJECTS`, default 100,000 labelled
//! ConfigMaps, which the API server shards by itself) reconciled by `fixture-shard` (it reads
//! each object and writes nothing), by one wasmop host and by three sharded ones
//! (`--shards`) at once. Each side starts with every object already created; it is done when
//! its hosts' reconcile counts add up to the objects. Reported per host: peak anonymous
//! memory, PSS and RSS, CPU seconds, and when its first reconcile ran (a host reconciles once
//! its caches have synced, so that is its start-up and list); per side the time to reconcile
//! all, with the sharded hosts' ratios to the single one, and the API server's CPU seconds and
//! LIST requests on ConfigMaps meanwhile (its own `/metrics`), with the garbage collections Go
//! started in it: one costs the API server seconds of CPU on its heap of gigabytes, whichever
//! window it falls into. Each side starts once the API server has settled, its garbage just
//! collected ([`super::apiserver::settle`]). The sides' order alternates by round.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use super::process::{Controller, PeakMemory, Side};

/// How many objects, by default.
const OBJECTS: usize = 100_000;
/// Creates in flight while the objects are made.
const CREATES_IN_FLIGHT: usize = 32;
/// The longest a side may take to reconcile all.
const LIMIT: Duration = Duration::from_secs(1800);
/// The sharded side's replicas.
const REPLICAS: usize = 3;

/// One host's figures.
struct Host {
    memory: PeakMemory,
    cpu_seconds: f64,
    /// Seconds from the start to its first reconcile: started and listed.
    listed_seconds: f64,
}

/// One side: its hosts, the time until all objects were reconciled, and what the API server did
/// meanwhile (its CPU seconds, its own garbage collections, the LIST requests on ConfigMaps).
struct Measured {
    hosts: Vec<Host>,
    seconds: f64,
    server: super::apiserver::ServerCounts,
}

/// Starts `replicas` hosts on `ns` (sharded when more than one) and waits until their
/// reconciles add up to `objects`.
async fn run(
    client: &Client,
    ns: &str,
    kubeconfig: &std::path::Path,
    replicas: usize,
    objects: usize,
) -> anyhow::Result<Measured> {
    let fixture = wasmop_tests::plugin("fixture-shard").display().to_string();
    let mut extra: Vec<String> = vec!["--plugin".into(), fixture];
    if replicas > 1 {
        extra.extend(["--shards", "--shard-group", ns, "--leader-election-namespace", ns].map(String::from));
    }
    // From a settled server, its garbage just collected: no earlier side's left to this one.
    super::apiserver::settle(client).await?;
    let before = super::apiserver::server_counts(client, "configmaps").await?;
    let started = Instant::now();
    let hosts: Vec<Controller> =
        (0..replicas).map(|_| Controller::start(Side::Wasmop, ns, kubeconfig, &extra)).collect::<Result<_, _>>()?;
    let mut listed = vec![None; hosts.len()];
    loop {
        let mut reconciled = 0.0;
        for (host, listed) in hosts.iter().zip(&mut listed) {
            let runs = host.metric("controller_runtime_reconcile_total{controller=\"fixture-shard\"")?;
            if runs > 0.0 && listed.is_none() {
                *listed = Some(started.elapsed().as_secs_f64());
            }
            reconciled += runs;
        }
        if reconciled >= objects as f64 {
            break;
        }
        anyhow::ensure!(started.elapsed() < LIMIT, "{reconciled} of {objects} reconciled after {LIMIT:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    let server = super::apiserver::server_counts(client, "configmaps").await? - before;
    let mut figures = Vec::with_capacity(hosts.len());
    for (host, listed) in hosts.iter().zip(listed) {
        let listed_seconds = listed.unwrap_or(seconds);
        figures.push(Host { memory: host.peak_memory()?, cpu_seconds: host.cpu_seconds()?, listed_seconds });
    }
    // All at once, once all are measured, and shut down rather than killed: the next round's
    // hosts join the same shard group, and must not wait for these hosts' Leases to expire.
    futures::future::try_join_all(hosts.into_iter().map(Controller::terminate)).await?;
    Ok(Measured { hosts: figures, seconds, server })
}

/// Creates `objects` labelled ConfigMaps in `ns`.
async fn create(client: &Client, ns: &str, objects: usize) -> anyhow::Result<f64> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let started = Instant::now();
    let creates = futures::stream::iter(0..objects).map(|i| {
        let api = api.clone();
        async move {
            let map = json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": { "name": format!("s{i:06}"), "labels": { "wasmop.dev/shard-test": "yes" } },
                "data": { "payload": "x" },
            });
            api.create(&PostParams::default(), &serde_json::from_value(map)?).await?;
            anyhow::Ok(())
        }
    });
    let results: Vec<anyhow::Result<()>> = creates.buffer_unordered(CREATES_IN_FLIGHT).collect().await;
    results.into_iter().collect::<anyhow::Result<()>>()?;
    Ok(started.elapsed().as_secs_f64())
}

/// The Markdown rows and JSON of one round.
fn round_report(round: usize, single: &Measured, sharded: &Measured) -> (String, Value) {
    let one = &single.hosts[0];
    let mut md = format!(
        "| {round} | single | {:.1} | {:.1} | {:.1} | 1.00 | {:.1} | {:.1} | {:.1} |\n",
        one.memory.anon_mib,
        one.memory.pss_mib,
        one.memory.rss_mib,
        one.cpu_seconds,
        one.listed_seconds,
        single.seconds
    );
    for (i, host) in sharded.hosts.iter().enumerate() {
        md.push_str(&format!(
            "| {round} | sharded {} | {:.1} | {:.1} | {:.1} | {:.3} | {:.1} | {:.1} | {:.1} |\n",
            i + 1,
            host.memory.anon_mib,
            host.memory.pss_mib,
            host.memory.rss_mib,
            host.memory.rss_mib / one.memory.rss_mib,
            host.cpu_seconds,
            host.listed_seconds,
            sharded.seconds
        ));
    }
    let host_json = |h: &Host| {
        json!({
            "anon_mib": h.memory.anon_mib, "pss_mib": h.memory.pss_mib, "rss_mib": h.memory.rss_mib,
            "cpu_seconds": h.cpu_seconds, "listed_seconds": h.listed_seconds,
        })
    };
    let json = json!({
        "round": round,
        "single": {
            "seconds": single.seconds, "server_cpu_seconds": single.server.cpu_seconds,
            "server_collections": single.server.collections, "lists": single.server.lists,
            "host": host_json(one),
        },
        "sharded": {
            "seconds": sharded.seconds, "server_cpu_seconds": sharded.server.cpu_seconds,
            "server_collections": sharded.server.collections, "lists": sharded.server.lists,
            "hosts": sharded.hosts.iter().map(host_json).collect::<Vec<_>>(),
        },
    });
    (md, json)
}

/// Runs the part, `rounds` times each side (each round starting with the other side): its
/// JSON and its Markdown section.
pub async fn scale(client: &Client, kubeconfig: &std::path::Path, rounds: usize) -> anyhow::Result<(Value, String)> {
    let objects = super::knobs::env_number("BENCH_SCALE_OBJECTS", OBJECTS);
    let ns = format!("bench-scale-{}", std::process::id());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces.create(&PostParams::default(), &serde_json::from_value(json!({ "metadata": { "name": ns } }))?).await?;
    let created = create(client, &ns, objects).await?;
    println!("scale: {objects} ConfigMaps created in {created:.0} s");
    let mut md = format!(
        "## Scale: {objects} primaries, one host against {REPLICAS} sharded hosts\n\n\
         `fixture-shard` on labelled ConfigMaps (the API server filters each sharded host's lists and \
         watches); every object existed before the hosts started. Ratios are to the single host of the \
         same round. Creating the objects took {created:.0} s.\n\n\
         `first run s` is when a host's first reconcile ran: its start-up and list (a host reconciles once \
         its caches have synced).\n\n\
         | round | host | peak anon MiB | peak PSS MiB | peak RSS MiB | x RSS | CPU s | first run s | time to all s |\n\
         |---|---|---|---|---|---|---|---|---|\n"
    );
    let mut json_rounds = Vec::new();
    let mut summary = Vec::new();
    for round in 1..=rounds {
        let (single, sharded) = if round % 2 == 1 {
            let single = run(client, &ns, kubeconfig, 1, objects).await?;
            (single, run(client, &ns, kubeconfig, REPLICAS, objects).await?)
        } else {
            let sharded = run(client, &ns, kubeconfig, REPLICAS, objects).await?;
            (run(client, &ns, kubeconfig, 1, objects).await?, sharded)
        };
        println!("scale, round {round}: one host {:.1} s, {REPLICAS} sharded {:.1} s", single.seconds, sharded.seconds);
        let worst = sharded.hosts.iter().map(|h| h.memory.rss_mib / single.hosts[0].memory.rss_mib).fold(0.0, f64::max);
        summary.push(format!(
            "round {round}: worst sharded host {worst:.3}x the single host's RSS; all done in {:.2}x its time; \
             the API server used {:.1} CPU s ({:.0} garbage collections of its own) and served {:.0} LIST \
             pages for the three, {:.1} ({:.0}) and {:.0} for the one",
            sharded.seconds / single.seconds,
            sharded.server.cpu_seconds,
            sharded.server.collections,
            sharded.server.lists,
            single.server.cpu_seconds,
            single.server.collections,
            single.server.lists
        ));
        let (rows, json) = round_report(round, &single, &sharded);
        md.push_str(&rows);
        json_rounds.push(json);
    }
    namespaces.delete(&ns, &DeleteParams::default()).await?;
    md.push_str(&format!(
        "\nGoal: each sharded host below 0.4x the single host's RSS, and all done faster. {}.\n",
        summary.join("; ")
    ));
    Ok((json!({ "objects": objects, "rounds": json_rounds }), md))
}
