//! Part `predicate`: the per-event cost of a guest predicate. The host's own filter of a watch
//! (`wasmop::source::filter::EventFilter`, the core's change filter) decides `BENCH_EVENTS`
//! updates (default 2,000) that change a label, twice: with the built-in terms alone
//! (`generation-changed or labels-changed`, decided in the host), and with the
//! `fixture-predicate` plugin's own predicate (`generation-changed or (labels-changed and
//! plugin("not-only-tier"))`), whose plugin term each of these updates reaches: the object and
//! its previous version serialized and the plugin's `filter` called in a fresh sandbox. The
//! difference is what a guest predicate costs per event that asks it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use wasmop::controller::ChangeFilter;
use wasmop::runtime::bindings::wasmop::plugin::types::PredicateTerm;
use wasmop::runtime::{Current, Limits};
use wasmop::source::filter::EventFilter;
use wasmop::wire::{Object, PrimaryReads};
use wasmop_tests::{plugin, runtime};

/// A Tiered of about 1 KB at resourceVersion `version`, labelled `team`.
fn tiered(version: &str, team: &str) -> anyhow::Result<Arc<Object>> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("test.wasmop.dev", "v1", "Tiered"));
    let mut object = Object::new("bench", &resource).within("bench");
    object.metadata.uid = Some("0b5e8c3c-2f1e-4bba-9a51-0c8f4f4f5f10".into());
    object.metadata.generation = Some(3);
    object.metadata.resource_version = Some(version.into());
    object.metadata.labels =
        Some([("tier", "a"), ("team", team), ("app", "bench")].map(|(k, v)| (k.into(), v.into())).into());
    object.data = json!({ "spec": { "payload": "wasmop benchmark payload ".repeat(30) },
                          "status": { "reconciles": 7, "tier": "a", "team": team, "data": [] } })
    .into();
    Ok(Arc::new(object))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Decides `events` updates with `filter`, alternating two versions; the time of each.
async fn decide(filter: &mut EventFilter, versions: &[Arc<Object>; 2], events: usize) -> anyhow::Result<Vec<Duration>> {
    let key = wasmop::object::key_of(&versions[0]).expect("named");
    filter.admit(&key, &versions[1]).await;
    let mut times = Vec::with_capacity(events);
    for i in 0..events {
        let object = &versions[i % 2];
        let start = Instant::now();
        let admitted = filter.admit(&key, object).await;
        times.push(start.elapsed());
        anyhow::ensure!(admitted, "a label change passes both predicates");
    }
    times.sort();
    Ok(times)
}

/// Runs the part; returns its JSON and markdown.
pub async fn per_event(events: usize) -> anyhow::Result<(Value, String)> {
    let module = Arc::new(runtime(Limits::default())?.load(&plugin("fixture-predicate"))?);
    let name = module.name().to_owned();
    let declared = wasmop::runtime::bindings::predicate(module.config().predicate.as_deref())
        .map_err(anyhow::Error::msg)?
        .ok_or_else(|| anyhow::anyhow!("fixture-predicate declares a predicate"))?;
    anyhow::ensure!(declared.asks_plugin(), "the fixture's predicate asks the plugin");
    let built_in = [PredicateTerm::GenerationChanged, PredicateTerm::LabelsChanged, PredicateTerm::Or];
    let built_in = wasmop::runtime::bindings::predicate(Some(&built_in)).map_err(anyhow::Error::msg)?.expect("given");
    let current = Current::new(module.clone());
    let filters = wasmop::controller::Filters::default();
    let mut guest = EventFilter::new(
        &name,
        "primary",
        ChangeFilter::with_predicate(filters.clone(), Some(declared)),
        current.clone(),
        PrimaryReads::default(),
    );
    let built_in = ChangeFilter::with_predicate(filters, Some(built_in));
    let mut host = EventFilter::new(&name, "primary", built_in, current, PrimaryReads::default());
    let versions = [tiered("100", "x")?, tiered("101", "y")?];
    let object_bytes = serde_json::to_string(&*versions[0])?.len();
    // Warm up: the compiled module, the allocator.
    decide(&mut guest, &versions, 50).await?;
    let guest_times = decide(&mut guest, &versions, events).await?;
    let host_times = decide(&mut host, &versions, events).await?;
    let mean = |v: &[Duration]| v.iter().sum::<Duration>() / v.len() as u32;
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let figures = |v: &[Duration]| json!({ "meanUs": us(mean(v)), "p50Us": us(percentile(v, 0.5)), "p99Us": us(percentile(v, 0.99)) });
    let extra = us(mean(&guest_times)) - us(mean(&host_times));
    let json = json!({
        "events": events, "objectBytes": object_bytes,
        "builtIn": figures(&host_times), "guest": figures(&guest_times), "guestExtraMeanUs": extra,
    });
    let mut md = format!(
        "## Predicate per event\n\n{events} label updates of a {object_bytes} B object through the host's watch filter; \
         the guest predicate's plugin term is asked on each (fixture-predicate `filter`, fresh sandbox per call):\n\n"
    );
    md.push_str("| predicate | mean us | p50 us | p99 us |\n|---|---|---|---|\n");
    for (label, v) in [("built-in terms (host)", &host_times), ("guest term (plugin filter)", &guest_times)] {
        md.push_str(&format!(
            "| {label} | {:.1} | {:.1} | {:.1} |\n",
            us(mean(v)),
            us(percentile(v, 0.5)),
            us(percentile(v, 0.99))
        ));
    }
    md.push_str(&format!("\nA guest predicate costs {extra:.1} us more per event that asks it (mean).\n"));
    Ok((json, md))
}
