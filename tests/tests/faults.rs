//! The fault suite, on a control plane of its own whose processes the tests kill and restart
//! (`tests/testbed/cluster.sh kill|start`), so the tests run one at a time.
//!
//! Each scenario makes a burst of spec changes over 50 Swaps while a fault happens, then asserts
//! that every Swap converges (`fixture-swap`'s status reflects its last spec and generation),
//! that no Swap was ever reconciled by two runs at once (the plugin's begin/end log lines), and
//! that the host stayed up. It prints the changes made and the time to converge after the fault
//! ended; those times are reported, never asserted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DynamicObject};
use tokio::sync::{Mutex, MutexGuard};
use wasmop::host::Host;
use wasmop_tests::overlaps::Overlaps;
use wasmop_tests::swaps::{self, all_settled};
use wasmop_tests::{apply_file, bare_host, faults_client, faults_cluster, namespace, plugin, within, workspace_root};

const OBJECTS: usize = 50;
const CHANGES: u64 = 200;
/// One change every 10 ms: the burst lasts 2 s unless a fault holds changes back.
const PACE: Duration = Duration::from_millis(10);

/// One fault test at a time: they restart the processes the others use.
static SERIAL: Mutex<()> = Mutex::const_new(());

/// A namespace with 50 settled Swaps on the fault suite's control plane.
struct Bed {
    _serial: MutexGuard<'static, ()>,
    client: Client,
    ns: String,
    api: Api<DynamicObject>,
}

impl Bed {
    async fn new(test: &str) -> anyhow::Result<Self> {
        let serial = SERIAL.lock().await;
        let client = faults_client().await?;
        apply_file(&client, &workspace_root().join("plugins/fixtures/swap/crd.yaml"), None).await?;
        let ns = namespace(&client, test).await?;
        let api = swaps::api(&client, &ns);
        swaps::create(&api, OBJECTS).await?;
        Ok(Self { _serial: serial, client, ns, api })
    }

    /// An in-process host running `fixture-swap` v1 on this namespace, once every Swap settled.
    async fn host(&self) -> anyhow::Result<Arc<Host>> {
        let host = bare_host(&self.client, &self.ns)?;
        let v1 = plugin("fixture-swap");
        host.install("test", &v1, std::fs::read(&v1)?, None).await?;
        all_settled(&self.api, OBJECTS, "v1", v1_result).await?;
        Ok(host)
    }

    /// [`CHANGES`] spec changes round robin over the Swaps, one every [`PACE`]; a change the API
    /// server refuses or cannot take (it is down) is tried again until it is made. Returns once
    /// every change is made.
    async fn burst(&self) -> anyhow::Result<()> {
        let mut ticks = tokio::time::interval(PACE);
        let mut changes = tokio::task::JoinSet::new();
        for n in 0..CHANGES {
            ticks.tick().await;
            let (api, name) = (self.api.clone(), format!("swap-{}", n as usize % OBJECTS));
            changes.spawn(async move {
                while swaps::set_value(&api, &name, n + 1).await.is_err() {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            });
        }
        within(Duration::from_secs(120), "every change made", async {
            while let Some(done) = changes.join_next().await {
                done?;
            }
            anyhow::Ok(())
        })
        .await?
    }

    /// Waits until every Swap settled on v1 and prints the figures of the scenario.
    async fn converged(&self, scenario: &str, fault_ended: Instant) -> anyhow::Result<Duration> {
        all_settled(&self.api, OBJECTS, "v1", v1_result).await?;
        let took = fault_ended.elapsed();
        eprintln!(
            "faults: {scenario}: {CHANGES} changes over {OBJECTS} Swaps converged {took:?} after the fault ended"
        );
        Ok(took)
    }
}

fn v1_result(value: i64) -> i64 {
    value + 1
}

/// Asserts that no Swap was reconciled by two runs at once since `before` (begun, overlapping)
/// and that reconciles happened.
fn assert_no_overlap(overlaps: &Overlaps, before: (u64, u64)) {
    let begun = overlaps.begun() - before.0;
    let overlapping = overlaps.overlapping() - before.1;
    assert!(begun >= OBJECTS as u64, "the capture saw the reconciles ({begun})");
    assert_eq!(overlapping, 0, "no Swap was reconciled by two runs at once ({begun} reconciles)");
}

/// The host's plugin still runs and still reconciles a new change.
async fn assert_host_serves(bed: &Bed, host: &Host) -> anyhow::Result<()> {
    assert_eq!(host.plugins(), vec!["fixture-swap".to_string()], "the plugin still runs");
    swaps::set_value(&bed.api, "swap-0", CHANGES + 1).await?;
    all_settled(&bed.api, OBJECTS, "v1", v1_result).await
}

/// Kills `component` 1 s into the burst and starts it again `down` later; returns when it is
/// healthy again.
async fn outage(component: &str, down: Duration) -> anyhow::Result<Instant> {
    tokio::time::sleep(Duration::from_secs(1)).await;
    faults_cluster("kill", component).await?;
    tokio::time::sleep(down).await;
    faults_cluster("start", component).await?;
    Ok(Instant::now())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_apiserver_killed_during_a_burst() -> anyhow::Result<()> {
    let overlaps = Overlaps::in_process();
    let bed = Bed::new("apiserver-kill").await?;
    let host = bed.host().await?;
    let before = (overlaps.begun(), overlaps.overlapping());
    let (burst, ready) = tokio::join!(bed.burst(), outage("apiserver", Duration::from_secs(8)));
    burst?;
    let took = bed.converged("kube-apiserver killed for 8 s", ready?).await?;
    eprintln!(
        "faults: recovery goal (within 5 s of the API server's return): {}",
        if took <= Duration::from_secs(5) { "met" } else { "missed" }
    );
    assert_no_overlap(&overlaps, before);
    assert_host_serves(&bed, &host).await?;
    host.stop_all().await;
    Ok(())
}
