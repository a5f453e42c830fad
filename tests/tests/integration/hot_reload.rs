//! Hot reload under churn, against the real kube-apiserver: while 50 Swaps get 100 spec changes
//! a second for 10 s, `fixture-swap` v1 is replaced by v2 halfway. No change may be lost (every
//! Swap ends with the status v2 computes for its last spec) and no Swap may ever be reconciled by
//! two calls at once (checked on the plugin's own begin/end log lines, as the host logs them).

use std::path::Path;
use std::time::Duration;

use wasmop::host::Change;
use wasmop::settings::Overrides;
use wasmop_tests::swaps::{self, all_settled};
use wasmop_tests::{apply_file, bare_host as host, client, namespace, plugin, workspace_root};

const OBJECTS: usize = 50;
const CHANGES_PER_SECOND: u64 = 100;
const CHURN: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_versions_are_refused_and_a_new_configuration_takes_over_on_the_same_watch() -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/fixtures/swap/crd.yaml"), None).await?;
    let ns = namespace(&client, "takeover").await?;
    let host = host(&client, &ns)?;
    let (v1, v2) = (plugin("fixture-swap"), plugin("fixture-swap-v2"));
    let v1_bytes = std::fs::read(&v1)?;
    host.install("test", &v1, v1_bytes.clone(), None).await?;
    let api = swaps::api(&client, &ns);
    swaps::create(&api, 5).await?;
    all_settled(&api, 5, "v1", |v| v + 1).await?;
    let running = host.module("fixture-swap").expect("running").digest().to_string();

    // Refused, with the reason; v1 keeps running and reconciling.
    let corrupt = host.install("test", Path::new("corrupt.wasm"), b"not wasm at all".to_vec(), None).await;
    let err = corrupt.expect_err("garbage is refused").to_string();
    assert!(err.contains("corrupt.wasm is not a valid WebAssembly component"), "{err}");
    let future = wasmop_tests::with_contract_version(&v1_bytes, "9.9.9");
    let err = host.install("test", Path::new("future.wasm"), future, None).await.expect_err("refused").to_string();
    assert!(err.contains("built against contract wasmop:plugin@9.9.9"), "{err}");
    let err = host.install("someone-else", &v2, std::fs::read(&v2)?, None).await.expect_err("refused").to_string();
    assert!(err.contains("already loaded from test"), "{err}");
    assert_eq!(host.module("fixture-swap").expect("running").digest(), running);
    swaps::set_value(&api, "swap-0", 7).await?;
    all_settled(&api, 5, "v1", |v| v + 1).await?;

    // Other settings: a new controller, on the same watch, reconciling every Swap with v2.
    let watches = host.clusters().local().started();
    let overrides = Overrides { max_concurrent_reconciles: Some(2), ..Overrides::default() };
    let installed = host.install("test", &v2, std::fs::read(&v2)?, Some(overrides)).await?;
    assert_eq!(installed.change, Change::Restarted);
    all_settled(&api, 5, "v2", |v| v * 2).await?;
    assert_eq!(host.clusters().local().started(), watches, "the new controller shares the running watch");

    // Removed: its watch is released.
    assert!(host.stop("fixture-swap").await);
    assert_eq!(host.plugins(), Vec::<String>::new());
    assert_eq!(host.clusters().local().active(), 0, "no watch is left running");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swap_midway_through_churn_loses_no_change_and_never_overlaps_reconciles() -> anyhow::Result<()> {
    let overlaps = wasmop_tests::in_process::overlaps();
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/fixtures/swap/crd.yaml"), None).await?;
    let ns = namespace(&client, "hot-reload").await?;
    let host = host(&client, &ns)?;
    let (v1, v2) = (plugin("fixture-swap"), plugin("fixture-swap-v2"));
    let v2_bytes = std::fs::read(&v2)?;
    let installed = host.install("test", &v1, std::fs::read(&v1)?, None).await?;
    assert_eq!(installed.change, Change::Started);

    let api = swaps::api(&client, &ns);
    swaps::create(&api, OBJECTS).await?;
    all_settled(&api, OBJECTS, "v1", |v| v + 1).await?;

    // Churn: one spec change every 10 ms, round robin, each with a new value; v2 comes in
    // halfway, while changes keep arriving.
    let mut ticks = tokio::time::interval(Duration::from_secs(1) / CHANGES_PER_SECOND as u32);
    let mut changes = tokio::task::JoinSet::new();
    let total = CHANGES_PER_SECOND * CHURN.as_secs();
    let mut swapped = None;
    let started = std::time::Instant::now();
    for n in 0..total {
        ticks.tick().await;
        if n == total / 2 {
            let (host, v2, bytes) = (host.clone(), v2.clone(), v2_bytes.clone());
            swapped = Some(tokio::spawn(async move { host.install("test", &v2, bytes, None).await }));
        }
        let (api, name) = (api.clone(), format!("swap-{}", n as usize % OBJECTS));
        changes.spawn(async move { swaps::set_value(&api, &name, n + 1).await });
        while let Some(done) = changes.try_join_next() {
            done??;
        }
    }
    while let Some(done) = changes.join_next().await {
        done??;
    }
    let churned = started.elapsed();
    let installed = swapped.expect("the swap was started").await??;
    assert_eq!(installed.change, Change::Swapped, "same configuration: swapped in place");

    all_settled(&api, OBJECTS, "v2", |v| v * 2).await?;
    let (begun, overlapping) = (overlaps.begun(), overlaps.overlapping());
    assert!(begun > OBJECTS as u64 * 2, "the capture saw the reconciles ({begun})");
    assert_eq!(overlapping, 0, "no Swap was reconciled by two calls at once ({begun} reconciles)");
    eprintln!("{total} spec changes in {churned:?}; {begun} reconciles, none overlapping; all settled on v2");
    host.stop_all().await;
    Ok(())
}
