//! controller-runtime's metric names after a known number of reconciles and errors, against the
//! real kube-apiserver: one Probe that fails its first two attempts (retried after 100 ms) and then
//! succeeds is exactly four runs: the host's finalizer (a requeue), two errors with their two
//! retries, and the success.

use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use wasmop_tests::{RunningHost, apply_file, client, namespace, within, workspace_root};

const WAIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_runtime_metrics_count_a_known_sequence_of_runs() -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/fixtures/probe/crd.yaml"), None).await?;
    let ns = namespace(&client, "metrics").await?;
    let yaml = "plugins:\n  fixture-probe:\n    maxConcurrentReconciles: 3\n    \
                retry: { initialIntervalMs: 100, multiplier: 1.0, maxAttempts: 5 }\n";
    let host = RunningHost::start_with_yaml(&client, &ns, &["fixture-probe"], yaml)?;
    let gvk = GroupVersionKind::gvk("test.wasmop.dev", "v1", "Probe");
    let probes: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &ApiResource::from_gvk_with_plural(&gvk, "probes"));
    let probe = serde_json::json!({
        "apiVersion": "test.wasmop.dev/v1", "kind": "Probe", "metadata": { "name": "flaky" },
        "spec": { "failAttempts": 2 }
    });
    probes.create(&PostParams::default(), &serde_json::from_value(probe)?).await?;
    let metrics = host.host().metrics();
    let value = |text: &str, line: &str| -> Option<u64> {
        let found = text.lines().find(|l| l.rsplit_once(' ').is_some_and(|(name, _)| name == line))?;
        found.rsplit(' ').next()?.parse::<f64>().ok().map(|v| v as u64)
    };
    // Four runs: the host adds its finalizer and queues the rest (`requeue`), the plugin fails
    // twice, then succeeds; the last run has ended (the counters move when it has).
    let text = within(WAIT, "the fourth run to succeed and end", async {
        loop {
            let text = metrics.encode();
            let succeeded = probes.get("flaky").await?.data["status"]["succeededAttempt"] == 2;
            let ended = value(&text, "workqueue_work_duration_seconds_count{name=\"fixture-probe\"}") == Some(4);
            if succeeded && ended {
                return anyhow::Ok(text);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await??;
    let expected = [
        ("controller_runtime_reconcile_total{controller=\"fixture-probe\",result=\"requeue\"}", 1),
        ("controller_runtime_reconcile_total{controller=\"fixture-probe\",result=\"success\"}", 1),
        ("controller_runtime_reconcile_total{controller=\"fixture-probe\",result=\"error\"}", 2),
        ("controller_runtime_reconcile_errors_total{controller=\"fixture-probe\"}", 2),
        ("controller_runtime_reconcile_time_seconds_count{controller=\"fixture-probe\"}", 4),
        ("controller_runtime_active_workers{controller=\"fixture-probe\"}", 0),
        ("controller_runtime_max_concurrent_reconciles{controller=\"fixture-probe\"}", 3),
        ("workqueue_depth{name=\"fixture-probe\"}", 0),
        ("workqueue_adds_total{name=\"fixture-probe\"}", 4),
        ("workqueue_retries_total{name=\"fixture-probe\"}", 2),
        ("workqueue_queue_duration_seconds_count{name=\"fixture-probe\"}", 4),
        ("workqueue_work_duration_seconds_count{name=\"fixture-probe\"}", 4),
    ];
    for (line, count) in expected {
        assert_eq!(value(&text, line), Some(count), "{line} in:\n{text}");
    }
    host.stop().await;
    Ok(())
}
