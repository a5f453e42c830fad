//! The conformance suite against the real host and API server: every scenario of
//! `tests/conformance/scenarios`, each in namespaces of its own with a host of its own, for the
//! Rust, Python and TypeScript builds of the conformance plugin (`fixture-conform`, `-py`, `-ts`;
//! the `external-*` scenarios through each SDK's HTTP client, against the records service). The
//! `fixture-conform` plugin's tests run the same files under the SDK's FakeHost; both must meet
//! the same expectations.
//!
//! A scenario's changes are made one at a time: after each, the host's count of the watch's
//! events shows it decided (`wasmop_watch_events_total`, passed or filtered), and a change that
//! passed is awaited until its reconcile has run.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use wasmop::metrics::Outcome;
use wasmop::settings::HostConfig;
use wasmop_conformance::{KindSpec, Scenario};
use wasmop_tests::records::{self, Record, Records};
use wasmop_tests::{RunningHost, allowing, apply_file, client, namespace, until, within, workspace_root};

const WAIT: Duration = Duration::from_secs(60);
/// The records service's token, in each scenario's Secret `dns-api-token`.
const RECORDS_TOKEN: &str = "conform-records-token";

fn api(client: &Client, kind: &KindSpec, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind);
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk_with_plural(&gvk, &kind.plural))
}

/// The `Scenario` kind of the `fixture-conform` plugin.
fn scenario_kind() -> KindSpec {
    KindSpec {
        group: "example.wasmop.dev".into(),
        version: "v1".into(),
        kind: "Scenario".into(),
        plural: "scenarios".into(),
    }
}

/// The host has reconciled the primary's current generation: `Ready` or `Degraded` says so.
fn settled(primary: &DynamicObject) -> bool {
    let conditions = primary.data["status"]["conditions"].as_array().cloned().unwrap_or_default();
    conditions.iter().any(|c| {
        (c["type"] == "Ready" || c["type"] == "Degraded")
            && c["status"] == "True"
            && c["observedGeneration"].as_i64() == primary.metadata.generation
    })
}

/// Runs one scenario in namespaces of its own; the failed expectations once they stop changing
/// (or after the wait).
async fn run(client: &Client, plugin: &str, file: &str) -> anyhow::Result<Vec<String>> {
    let ns = namespace(client, &format!("{plugin}-{file}")).await?;
    let other = namespace(client, &format!("{plugin}-{file}-other")).await?;
    let path = wasmop_conformance::dir().join(format!("{file}.yaml"));
    let scenario: Scenario = wasmop_conformance::load_one(&path, &ns, &other);
    // The plugin's external system: the records service, one zone per scenario.
    let records = Records::shared(RECORDS_TOKEN)?;
    let token: Secret = serde_json::from_value(json!({
        "metadata": { "name": "dns-api-token" }, "stringData": { "token": RECORDS_TOKEN } }))?;
    Api::<Secret>::namespaced(client.clone(), &ns).create(&PostParams::default(), &token).await?;
    for (name, record) in &scenario.external {
        let value = record["value"].as_str().unwrap_or_default().to_owned();
        records.insert(&ns, Record { id: String::new(), name: name.clone(), type_: "TXT".into(), value, ttl: 0 });
    }
    for object in &scenario.objects {
        let target = object.object["metadata"]["namespace"].as_str().unwrap_or(&ns).to_owned();
        let created: DynamicObject = serde_json::from_value(object.object.clone())?;
        api(client, &object.kind, &target).create(&PostParams::default(), &created).await?;
    }
    let name = scenario.primary["metadata"]["name"].as_str().expect("the primary has a name").to_owned();
    let mut primary = scenario.primary.clone();
    primary["apiVersion"] = json!("example.wasmop.dev/v1");
    primary["kind"] = json!("Scenario");
    primary["metadata"]["namespace"] = json!(ns);
    let in_ns = api(client, &scenario_kind(), &ns);
    in_ns.create(&PostParams::default(), &serde_json::from_value(primary)?).await?;
    if let Some(status) = &scenario.status {
        in_ns.patch_status(&name, &PatchParams::default(), &Patch::Merge(&json!({ "status": status }))).await?;
    }
    // The operator lets it send the records service's token there over plain HTTP.
    let allowed = allowing(HostConfig::default(), "conform", &["dns-api-token"], &[records::ORIGIN]);
    let host = RunningHost::start_with_config(client, &ns, &[plugin], allowed)?;
    let failures = within(WAIT, &format!("scenario {file} to settle"), async {
        let mut last = Vec::new();
        for _ in 0..600 {
            let primary = in_ns.get(&name).await?;
            if settled(&primary) {
                last = observe(client, &scenario, &primary, &ns).await?;
                let external =
                    records.zone(&ns).into_iter().map(|r| (r.name.clone(), serde_json::to_value(r).unwrap()));
                last.extend(wasmop_conformance::check_external(&scenario, &external.collect()));
                if last.is_empty() {
                    return anyhow::Ok(last);
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(last)
    })
    .await;
    let failures = match failures {
        Ok(Ok(failures)) if failures.is_empty() => changes(client, &scenario, &host, &ns).await,
        Ok(result) => result,
        Err(timeout) => Ok(vec![timeout.to_string()]),
    };
    host.stop().await;
    failures
}

/// Makes the scenario's changes one after the other; the failed expectations.
async fn changes(client: &Client, scenario: &Scenario, host: &RunningHost, ns: &str) -> anyhow::Result<Vec<String>> {
    const PLUGIN: &str = "conform";
    let metrics = host.host().metrics().clone();
    let reconciles =
        || metrics.reconciles_of(PLUGIN, Outcome::Success) + metrics.reconciles_of(PLUGIN, Outcome::Failure);
    let mut failures = Vec::new();
    for (i, step) in scenario.changes.iter().enumerate() {
        let (watch, api, patch) = match (&step.primary, &step.object) {
            (Some(patch), _) => ("primary", api(client, &scenario_kind(), ns), patch.clone()),
            (None, Some(object)) => (object.kind.kind.as_str(), api(client, &object.kind, ns), object.object.clone()),
            (None, None) => anyhow::bail!("change {i} changes nothing"),
        };
        let name = match &step.primary {
            Some(_) => scenario.primary["metadata"]["name"].as_str(),
            None => patch["metadata"]["name"].as_str(),
        }
        .expect("the changed object has a name")
        .to_owned();
        let events = metrics.watch_events(PLUGIN, watch);
        let (passed, filtered) = (events.passed(), events.filtered());
        let reconciled = reconciles();
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        let what = format!("the host to decide change {i}");
        until(&what, async || Ok(events.passed() + events.filtered()), |n| *n > passed + filtered).await?;
        let reconciles_now = events.passed() > passed;
        if reconciles_now != step.reconciles {
            failures.push(format!("change {i} ({}): reconciles {reconciles_now}", step.description));
        } else if reconciles_now {
            until(&format!("the reconcile of change {i}"), async || Ok(reconciles()), |n| *n > reconciled).await?;
        }
    }
    Ok(failures)
}

/// The scenario's expectations on the cluster as it is now.
async fn observe(
    client: &Client,
    scenario: &Scenario,
    primary: &DynamicObject,
    ns: &str,
) -> anyhow::Result<Vec<String>> {
    let mut found: HashMap<(String, String, String), Value> = HashMap::new();
    for object in scenario.expect.iter().flat_map(|e| e.objects.iter().chain(&e.absent)) {
        let target = object.object["metadata"]["namespace"].as_str().unwrap_or(ns).to_owned();
        let name = object.object["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        if let Some(actual) = api(client, &object.kind, &target).get_opt(&name).await? {
            found.insert((object.kind.plural.clone(), target, name), serde_json::to_value(actual)?);
        }
    }
    let find = |kind: &KindSpec, namespace: Option<&str>, name: &str| {
        found.get(&(kind.plural.clone(), namespace.unwrap_or(ns).to_owned(), name.to_owned())).cloned()
    };
    let primary = serde_json::to_value(primary)?;
    // The host's reschedule is its scheduler's timer, unit-tested there; not seen from outside.
    Ok(wasmop_conformance::check(scenario, &primary, find, ns, None))
}

wasmop_tests::in_every_language!(every_scenario_holds_against_the_host, "fixture-conform");

async fn every_scenario_holds_against_the_host(plugin: &str) -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/fixtures/conform/crd.yaml"), None).await?;
    let mut failures = Vec::new();
    let files = wasmop_conformance::load("ns", "other");
    assert!(files.len() >= 8, "the suite has its scenarios");
    for scenario in &files {
        for failure in run(&client, plugin, &scenario.name).await? {
            failures.push(format!("{} ({}): {failure}", scenario.name, scenario.description));
        }
    }
    assert!(failures.is_empty(), "{plugin}: {} failed expectations:\n{}", failures.len(), failures.join("\n"));
    Ok(())
}
