//! Part `polling`: N DnsRecords (the `dnsrecord` sample: an external dependent polled per
//! resource every 2 s) kept in the records service (`wasmop_tests::records`, in-process) by the
//! wasmop host (in-process). Measured once every record is served:
//! - while idle, the fetches a polling window makes and the reconciles it starts (none while
//!   nothing changed: polling holds no reconcile slot);
//! - the change-to-status latency of live edits (paced, `LIVE` of them) while N primaries are
//!   polled, and again once all but `FEW` are deleted, so the difference is what polling costs
//!   live events.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use wasmop::settings::HostConfig;
use wasmop_tests::records::{self, Records};
use wasmop_tests::{RunningHost, allowing, apply_file, namespace, workspace_root};

use super::load::WRITES_IN_FLIGHT;

const TOKEN: &str = "bench-records-token";
/// Live edits per measurement, one every `PACE`.
const LIVE: usize = 100;
const PACE: Duration = Duration::from_millis(50);
/// Primaries left for the measurement without polling load.
const FEW: usize = 10;
/// The sample's polling period.
const PERIOD: Duration = Duration::from_secs(2);

fn spec(i: usize, value: &str) -> Value {
    json!({ "zone": "bench.example", "name": format!("r{i}"), "type": "A", "value": value })
}

fn served(object: &DynamicObject) -> bool {
    let conditions = object.data["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let ready = conditions.iter().any(|c| c["type"] == "Ready" && c["status"] == "True");
    ready && object.data["status"]["observedGeneration"].as_i64() == object.metadata.generation
}

/// Waits until every DnsRecord is served at its current generation.
async fn all_served(api: &Api<DynamicObject>, n: usize) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        let list = api.list(&Default::default()).await?;
        if list.items.len() >= n && list.items.iter().all(served) {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "DnsRecords not served after 900 s");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `LIVE` paced edits of the first DnsRecords; each one's time from the patch to the status
/// showing its generation, sorted.
async fn live_edits(api: &Api<DynamicObject>, round: &str) -> anyhow::Result<Vec<Duration>> {
    let edits = futures::stream::iter(0..LIVE).map(|k| {
        let api = api.clone();
        async move {
            tokio::time::sleep(PACE * k as u32).await;
            let name = format!("r{}", k % FEW);
            let patch = json!({ "spec": { "value": format!("10.1.{k}.{round}") } });
            let started = Instant::now();
            let patched = api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
            let generation = patched.metadata.generation;
            loop {
                let object = api.get(&name).await?;
                if object.data["status"]["observedGeneration"].as_i64() >= generation {
                    return anyhow::Ok(started.elapsed());
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    });
    let mut times: Vec<Duration> =
        edits.buffer_unordered(LIVE).collect::<Vec<_>>().await.into_iter().collect::<Result<_, _>>()?;
    times.sort();
    Ok(times)
}

/// CPU seconds this process used so far, user and system (from `/proc/self/stat`).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn ms(times: &[Duration], p: f64) -> f64 {
    let i = ((times.len() as f64 * p).ceil() as usize).clamp(1, times.len()) - 1;
    times[i].as_secs_f64() * 1e3
}

/// Runs the part with `n` polled primaries.
pub async fn polling(client: &Client, n: usize) -> anyhow::Result<(Value, String)> {
    apply_file(client, &workspace_root().join("plugins/dnsrecord/crd.yaml"), None).await?;
    let records = Records::shared(TOKEN)?;
    let ns = namespace(client, "bench-polling").await?;
    let token: Secret =
        serde_json::from_value(json!({ "metadata": { "name": "dns-api-token" }, "stringData": { "token": TOKEN } }))?;
    Api::<Secret>::namespaced(client.clone(), &ns).create(&PostParams::default(), &token).await?;
    let gvk = GroupVersionKind::gvk("sample.wasmop.dev", "v1", "DnsRecord");
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &ApiResource::from_gvk_with_plural(&gvk, "dnsrecords"));
    let secrets = ["dns-api-token", "dns-webhook-token"];
    let allowed = allowing(HostConfig::default(), "dnsrecord", &secrets, &[records::ORIGIN]);
    let host = RunningHost::start_with_config(client, &ns, &["dnsrecord"], allowed)?;
    let created = futures::stream::iter(0..n).map(|i| {
        let api = api.clone();
        async move {
            let object: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "sample.wasmop.dev/v1", "kind": "DnsRecord",
                "metadata": { "name": format!("r{i}") }, "spec": spec(i, "10.0.0.1") }))?;
            api.create(&PostParams::default(), &object).await?;
            anyhow::Ok(())
        }
    });
    created.buffer_unordered(WRITES_IN_FLIGHT).collect::<Vec<_>>().await.into_iter().collect::<Result<(), _>>()?;
    all_served(&api, n).await?;
    let metrics = host.host().metrics().clone();
    let reconciles = || {
        metrics.reconciles_of("dnsrecord", wasmop::metrics::Outcome::Success)
            + metrics.reconciles_of("dnsrecord", wasmop::metrics::Outcome::Failure)
    };
    // Idle: polling only.
    let (requests, reconciled, began, cpu) = (records.requests(), reconciles(), Instant::now(), cpu_seconds());
    tokio::time::sleep(PERIOD * 5).await;
    let window = began.elapsed();
    let idle_cpu = cpu_seconds() - cpu;
    let fetches = records.requests() - requests;
    let idle_reconciles = reconciles() - reconciled;
    let busy = live_edits(&api, "1").await?;
    // All but a few deleted (through the finalizer: their records go too).
    let deleted = futures::stream::iter(FEW..n).map(|i| {
        let api = api.clone();
        async move { api.delete(&format!("r{i}"), &DeleteParams::default()).await.map(|_| ()) }
    });
    deleted.buffer_unordered(WRITES_IN_FLIGHT).collect::<Vec<_>>().await.into_iter().collect::<Result<(), _>>()?;
    let deadline = Instant::now() + Duration::from_secs(600);
    while api.list(&Default::default()).await?.items.len() > FEW {
        anyhow::ensure!(Instant::now() < deadline, "DnsRecords not deleted after 600 s");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let quiet = live_edits(&api, "2").await?;
    let left = records.zone("bench.example").len();
    host.stop().await;
    let rate = fetches as f64 / window.as_secs_f64();
    let cpu_share = idle_cpu / window.as_secs_f64();
    let per_fetch_us = idle_cpu / fetches.max(1) as f64 * 1e6;
    let json = json!({
        "polled": n, "periodSeconds": PERIOD.as_secs_f64(), "fetchesPerSecond": rate, "idleReconciles": idle_reconciles,
        "idleCpuShare": cpu_share, "cpuPerFetchUs": per_fetch_us,
        "livePolledP50Ms": ms(&busy, 0.5), "livePolledP99Ms": ms(&busy, 0.99),
        "liveFewP50Ms": ms(&quiet, 0.5), "liveFewP99Ms": ms(&quiet, 0.99), "recordsLeft": left,
    });
    let md = format!(
        "## Polling\n\n{n} DnsRecords polled every {:.0} s (the `dnsrecord` sample, wasmop in-process, the records service in-process): {rate:.0} fetches/s while idle, {idle_reconciles} reconciles meanwhile (a fetch holds no reconcile slot and an unchanged state reconciles nothing), {:.0}% of a core for the process (host and records service together), {per_fetch_us:.0} us of CPU per fetch (the plugin's call, its HTTP request, the service's answer). Live edits ({LIVE}, one every {} ms), change to status: p50 {:.0} ms, p99 {:.0} ms while the {n} are polled; p50 {:.0} ms, p99 {:.0} ms with {FEW} left. Records left in the service after the deletes: {left} (of {FEW}).\n",
        PERIOD.as_secs_f64(),
        cpu_share * 100.0,
        PACE.as_millis(),
        ms(&busy, 0.5),
        ms(&busy, 0.99),
        ms(&quiet, 0.5),
        ms(&quiet, 0.99),
    );
    Ok((json, md))
}
