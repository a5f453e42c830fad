//! Per-plugin sandbox limits, set at deployment time, against the real kube-apiserver: the
//! deadline, the memory cap and the fuel budget each stop a misbehaving fixture, while another
//! plugin on the same host keeps reconciling; the time and fuel of calls are recorded per plugin.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use wasmop::runtime::Limits;
use wasmop_tests::{RunningHost, apply_file, client, event_note, namespace, within, workspace_root};

const WAIT: Duration = Duration::from_secs(60);

fn probes(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("test.wasmop.dev", "v1", "Probe");
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, "probes"))
}

/// Creates the ConfigMap a fixture reconciles (labelled `wasmop.dev/fixture=<fixture>`).
async fn trigger(client: &Client, ns: &str, fixture: &str) -> anyhow::Result<()> {
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": { "name": fixture, "labels": { "wasmop.dev/fixture": fixture } }
    }))?;
    Api::<ConfigMap>::namespaced(client.clone(), ns).create(&PostParams::default(), &cm).await?;
    Ok(())
}

/// Changes the probe's spec and waits until the probe plugin has reconciled that generation.
async fn probe_keeps_working(client: &Client, ns: &str, payload: &str) -> anyhow::Result<()> {
    let api = probes(client, ns);
    let patch = serde_json::json!({ "spec": { "payload": payload } });
    let changed = api.patch("probe", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let generation = changed.metadata.generation;
    within(WAIT, "the probe reconciled at its new generation", async {
        loop {
            let probe = api.get("probe").await?;
            if probe.data["status"]["observedGeneration"].as_i64() == generation {
                return anyhow::Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await?
}

async fn create_probe(client: &Client, ns: &str) -> anyhow::Result<()> {
    apply_file(client, &workspace_root().join("plugins/fixtures/probe/crd.yaml"), None).await?;
    let probe: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "test.wasmop.dev/v1", "kind": "Probe", "metadata": { "name": "probe" }, "spec": {}
    }))?;
    probes(client, ns).create(&PostParams::default(), &probe).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_plugin_deadline_and_memory_cap_stop_their_fixture_only() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "limits").await?;
    create_probe(&client, &ns).await?;
    // The host-wide defaults (5 s, 64 MiB) would let neither fixture get this far this fast;
    // the overrides are what stop them.
    let yaml =
        "plugins:\n  fixture-loop:\n    limits: { deadlineMs: 300 }\n  fixture-alloc:\n    limits: { memoryMib: 16 }\n";
    let host = RunningHost::start_with_yaml(&client, &ns, &["fixture-probe", "fixture-loop", "fixture-alloc"], yaml)?;
    let loaded = |name: &str| host.host().module(name).expect("running").limits();
    assert_eq!(loaded("fixture-loop").deadline, Duration::from_millis(300));
    assert_eq!(loaded("fixture-alloc").memory_bytes, 16 << 20);
    assert_eq!(loaded("fixture-probe"), Limits::default());

    trigger(&client, &ns, "loop").await?;
    trigger(&client, &ns, "alloc").await?;
    event_note(&client, &ns, WAIT, "loop", "deadline of 300ms exceeded").await?;
    event_note(&client, &ns, WAIT, "alloc", "memory limit of 16 MiB exceeded").await?;
    probe_keeps_working(&client, &ns, "after the traps").await?;

    // The kinds of failure stay apart, in the metrics as in the Events' reasons.
    let metrics = host.host().metrics();
    assert!(metrics.failures_of("fixture-loop", "DeadlineExceeded") >= 1);
    assert!(metrics.failures_of("fixture-alloc", "MemoryLimitExceeded") >= 1);
    assert_eq!(metrics.failures_of("fixture-loop", "MemoryLimitExceeded"), 0);
    assert_eq!(metrics.failures_of("fixture-probe", "DeadlineExceeded"), 0);
    let text = metrics.encode();
    assert!(
        text.contains("wasmop_reconcile_failures_total{plugin=\"fixture-loop\",reason=\"DeadlineExceeded\"}"),
        "{text}"
    );
    // controller-runtime's names count the same runs.
    let value = |prefix: &str| -> u64 {
        let line = text.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no {prefix} in:\n{text}"));
        line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).unwrap_or_default() as u64
    };
    assert!(value("controller_runtime_reconcile_errors_total{controller=\"fixture-loop\"}") >= 1);
    assert!(value("controller_runtime_reconcile_total{controller=\"fixture-probe\",result=\"success\"}") >= 1);
    assert_eq!(value("controller_runtime_max_concurrent_reconciles{controller=\"fixture-probe\"}"), 4);
    for export in ["fixture-loop\",export=\"reconcile", "fixture-probe\",export=\"reconcile"] {
        let count = format!("wasmop_plugin_call_duration_seconds_count{{plugin=\"{export}\"}}");
        assert!(text.contains(&count), "the time of calls is recorded per plugin ({count}):\n{text}");
    }
    host.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fuel_budget_stops_a_loop_long_before_its_deadline() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "fuel").await?;
    create_probe(&client, &ns).await?;
    let budget: u64 = 20_000_000;
    let yaml = format!("plugins:\n  fixture-loop:\n    limits: {{ fuel: {budget}, deadlineMs: 120000 }}\n");
    let host = RunningHost::start_with_yaml(&client, &ns, &["fixture-probe", "fixture-loop"], &yaml)?;
    assert_eq!(host.host().module("fixture-loop").expect("running").limits().fuel, Some(budget));

    trigger(&client, &ns, "loop").await?;
    // Well within the 2-minute deadline: only the fuel can have stopped it.
    let note = event_note(&client, &ns, WAIT, "loop", &format!("fuel budget of {budget} exhausted")).await?;
    assert!(note.starts_with("reconcile of "), "{note}");
    probe_keeps_working(&client, &ns, "after running out of fuel").await?;

    let metrics = host.host().metrics();
    assert!(
        metrics.fuel_of("fixture-loop") >= budget,
        "the fuel used is recorded: {}",
        metrics.fuel_of("fixture-loop")
    );
    assert_eq!(metrics.fuel_of("fixture-probe"), 0, "the probe runs unmetered");
    assert!(metrics.failures_of("fixture-loop", "FuelExhausted") >= 1);
    host.stop().await;
    Ok(())
}
