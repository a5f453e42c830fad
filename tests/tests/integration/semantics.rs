//! Reconciliation semantics against the real kube-apiserver, with the `fixture-probe` plugin:
//! retries and their backoff, the error status, generation-aware filtering and the rate limit.
//! The probe records every successful run in its status (`runs[].atMs`, `attempt`,
//! `generation`) and fails on purpose as its spec says.

use std::time::Duration;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use wasmop_tests::{RunningHost, apply_file, client, namespace, until, wait_until, warnings_about, workspace_root};

const WAIT: Duration = Duration::from_secs(90);

async fn probes(client: &Client, ns: &str) -> anyhow::Result<Api<DynamicObject>> {
    apply_file(client, &workspace_root().join("plugins/fixtures/probe/crd.yaml"), None).await?;
    let gvk = GroupVersionKind::gvk("test.wasmop.dev", "v1", "Probe");
    Ok(Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, "probes")))
}

fn probe(name: &str, spec: serde_json::Value) -> DynamicObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "test.wasmop.dev/v1", "kind": "Probe", "metadata": { "name": name }, "spec": spec
    }))
    .expect("a valid Probe")
}

fn status(object: &DynamicObject) -> &serde_json::Value {
    &object.data["status"]
}

fn reconciles(object: &DynamicObject) -> i64 {
    status(object)["reconciles"].as_i64().unwrap_or(0)
}

/// A Warning event series on one object: repeats of the same reason are one Event whose
/// `series` counts them (kube's Recorder, like client-go's, aggregates them).
#[derive(Debug)]
struct Warning {
    /// When the first one happened, in ms since the epoch.
    first_ms: i64,
    /// When the last one happened.
    last_ms: i64,
    count: i32,
    note: String,
}

/// The Warning event series on `object`.
async fn warnings_on(client: &Client, ns: &str, object: &str) -> anyhow::Result<Vec<Warning>> {
    Ok(warnings_about(client, ns, object)
        .await?
        .into_iter()
        .filter_map(|e| {
            let first_ms = e.event_time?.0.as_millisecond();
            let (last_ms, count) = match &e.series {
                Some(series) => (series.last_observed_time.0.as_millisecond(), series.count),
                None => (first_ms, 1),
            };
            Some(Warning { first_ms, last_ms, count, note: e.note? })
        })
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_failing_twice_then_succeeding_shows_attempts_0_1_2_and_backoff_gaps() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "retry").await?;
    let api = probes(&client, &ns).await?;
    let host = RunningHost::start_with_yaml(&client, &ns, &["fixture-probe"], "{}")?;

    api.create(&PostParams::default(), &probe("flaky", serde_json::json!({ "failAttempts": 2 }))).await?;
    let done = wait_until(&api, "flaky", "the third attempt to succeed", move |o| {
        status(o)["succeededAttempt"].as_i64() == Some(2)
    })
    .await?;
    let failures = warnings_on(&client, &ns, "flaky").await?;
    assert_eq!(failures.len(), 1, "one series of failures: {failures:?}");
    let failed = &failures[0];
    assert_eq!(failed.count, 2, "attempts 0 and 1 failed: {failed:?}");
    assert!(failed.note.contains("failing on purpose at attempt 0"), "{failed:?}");
    assert_eq!(status(&done)["runs"][0]["attempt"], 2, "the success was attempt 2");
    let succeeded_at = status(&done)["runs"][0]["atMs"].as_i64().expect("the run time");
    let first_gap = failed.last_ms - failed.first_ms;
    let second_gap = succeeded_at - failed.last_ms;
    // GenericRetry defaults: 2000 ms, then 3000 ms. Event times are taken just after each failed
    // call, so the gaps may be a little shorter or longer than the delays, never far off.
    assert!((1850..3000).contains(&first_gap), "first backoff gap {first_gap} ms");
    assert!((2850..4000).contains(&second_gap), "second backoff gap {second_gap} ms");
    host.stop().await;
    Ok(())
}

/// A transient error that asks for its retry after a delay is not retried by the backoff: with
/// a backoff of 200 ms, a probe whose first failure asks for 10 minutes is still not retried
/// when a probe that failed after it, without asking, has been retried by the backoff and
/// succeeded. One that asks for 1.5 s is retried, no earlier than it asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transient_error_with_a_delay_is_retried_after_it_not_by_the_backoff() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "retry-after").await?;
    let api = probes(&client, &ns).await?;
    let overrides =
        "plugins:\n  fixture-probe:\n    retry: { maxAttempts: 5, initialIntervalMs: 200, multiplier: 1.0 }\n";
    let host = RunningHost::start_with_yaml(&client, &ns, &["fixture-probe"], overrides)?;

    let long = serde_json::json!({ "failAttempts": 1, "retryAfterMs": 600_000 });
    api.create(&PostParams::default(), &probe("later", long)).await?;
    until(
        &format!("the first failure of {ns}/later"),
        async || warnings_on(&client, &ns, "later").await,
        |w| !w.is_empty(),
    )
    .await?;
    api.create(&PostParams::default(), &probe("control", serde_json::json!({ "failAttempts": 1 }))).await?;
    let control = wait_until(&api, "control", "the backoff's retry to succeed", |o| {
        status(o)["succeededAttempt"].as_i64() == Some(1)
    })
    .await?;
    assert_eq!(reconciles(&control), 1, "the control failed once, then its retry succeeded");
    let later = api.get("later").await?;
    assert_eq!(reconciles(&later), 0, "the 10-minute retry has not run: {:?}", status(&later));
    let failures = warnings_on(&client, &ns, "later").await?;
    assert_eq!(failures.iter().map(|w| w.count).sum::<i32>(), 1, "attempt 0 failed, once: {failures:?}");

    let short = serde_json::json!({ "failAttempts": 1, "retryAfterMs": 1_500 });
    api.create(&PostParams::default(), &probe("soon", short)).await?;
    let done =
        wait_until(&api, "soon", "the asked retry to succeed", |o| status(o)["succeededAttempt"].as_i64() == Some(1))
            .await?;
    let failed_at = warnings_on(&client, &ns, "soon").await?[0].last_ms;
    let succeeded_at = status(&done)["runs"][0]["atMs"].as_i64().expect("the run time");
    // The Event is recorded just after the failed call: the retry cannot start before the delay
    // has passed since, less the time between the call's end and the Event's stamp.
    assert!(succeeded_at - failed_at >= 1_400, "retried {} ms after the failure", succeeded_at - failed_at);
    host.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_always_fails_gets_its_error_status_after_the_last_attempt() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "error-status").await?;
    let api = probes(&client, &ns).await?;
    let overrides =
        "plugins:\n  fixture-probe:\n    retry: { maxAttempts: 2, initialIntervalMs: 200, multiplier: 1.0 }\n";
    let host = RunningHost::start_with_yaml(&client, &ns, &["fixture-probe"], overrides)?;

    api.create(&PostParams::default(), &probe("broken", serde_json::json!({ "alwaysFail": true }))).await?;
    let failed = wait_until(&api, "broken", "the error status", move |o| status(o)["lastError"].is_string()).await?;
    let status = status(&failed);
    assert_eq!(status["errorAttempt"], 2, "only the last attempt writes the error status: {status}");
    assert_eq!(status["lastAttempt"], true);
    assert!(status["lastError"].as_str().unwrap().contains("always failing on purpose (attempt 2)"), "{status}");
    let failures = warnings_on(&client, &ns, "broken").await?;
    assert_eq!(failures.iter().map(|w| w.count).sum::<i32>(), 3, "attempts 0, 1 and 2 failed: {failures:?}");
    host.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_only_change_does_not_reconcile_while_a_spec_change_does() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "generation").await?;
    let api = probes(&client, &ns).await?;
    let host = RunningHost::start_with_yaml(&client, &ns, &["fixture-probe"], "{}")?;

    api.create(&PostParams::default(), &probe("watched", serde_json::json!({ "payload": "one" }))).await?;
    wait_until(&api, "watched", "the first reconcile", |o| reconciles(o) == 1).await?;

    let status_only = serde_json::json!({ "status": { "note": "written by someone else" } });
    api.patch_status("watched", &PatchParams::default(), &Patch::Merge(&status_only)).await?;
    // A barrier: events reach the host in order, so once a later object is reconciled the
    // status change has been seen (and, if it were admitted, already triggered a reconcile).
    api.create(&PostParams::default(), &probe("barrier", serde_json::json!({}))).await?;
    wait_until(&api, "barrier", "the barrier", |o| reconciles(o) == 1).await?;

    let spec = serde_json::json!({ "spec": { "payload": "two" } });
    api.patch("watched", &PatchParams::default(), &Patch::Merge(&spec)).await?;
    let after = wait_until(&api, "watched", "generation 2 observed", move |o| {
        status(o)["observedGeneration"].as_i64() == Some(2)
    })
    .await?;
    assert_eq!(reconciles(&after), 2, "the create and the spec change, not the status change");
    assert_eq!(status(&after)["note"], "written by someone else");
    host.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_of_2_per_3s_holds_over_10_rapid_spec_changes_and_the_last_is_reconciled() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "rate-limit").await?;
    let api = probes(&client, &ns).await?;
    let overrides = "plugins:\n  fixture-probe:\n    rateLimit: { maxReconciles: 2, periodMs: 3000 }\n";
    let host = RunningHost::start_with_yaml(&client, &ns, &["fixture-probe"], overrides)?;

    api.create(&PostParams::default(), &probe("busy", serde_json::json!({ "payload": "0" }))).await?;
    wait_until(&api, "busy", "the first reconcile", |o| reconciles(o) >= 1).await?;
    let mut generation = 0;
    for i in 1..=10 {
        let spec = serde_json::json!({ "spec": { "payload": i.to_string() } });
        generation =
            api.patch("busy", &PatchParams::default(), &Patch::Merge(&spec)).await?.metadata.generation.unwrap();
    }
    let last = wait_until(&api, "busy", "the last spec reconciled", move |o| {
        status(o)["observedGeneration"].as_i64() == Some(generation)
    })
    .await?;
    let times: Vec<i64> =
        status(&last)["runs"].as_array().unwrap().iter().map(|r| r["atMs"].as_i64().unwrap()).collect();
    assert!(times.len() >= 2 && times.len() < 11, "changes were folded, not each reconciled: {times:?}");
    for window in times.windows(3) {
        // Runs are timed inside the plugin, after the scheduler starts them and the sandbox is
        // instantiated; allow for that delay varying on a loaded machine.
        assert!(window[2] - window[0] >= 2750, "three runs within 3 s: {times:?}");
    }
    host.stop().await;
    Ok(())
}

/// `secondaries-of` answers serve primary-references watches only: a plugin without one is never
/// asked (each call would cost a fresh sandbox per admitted event).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_without_a_primary_references_watch_is_never_asked_for_secondaries_of() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "no-references").await?;
    let api = probes(&client, &ns).await?;
    let host = RunningHost::start_with_yaml(&client, &ns, &["fixture-probe"], "{}")?;
    api.create(&PostParams::default(), &probe("plain", serde_json::json!({ "payload": "one" }))).await?;
    wait_until(&api, "plain", "the first reconcile", |o| reconciles(o) == 1).await?;
    let spec = serde_json::json!({ "spec": { "payload": "two" } });
    api.patch("plain", &PatchParams::default(), &Patch::Merge(&spec)).await?;
    wait_until(&api, "plain", "the second reconcile", |o| reconciles(o) == 2).await?;
    let metrics = host.host().metrics().encode();
    assert!(metrics.contains(r#"plugin="fixture-probe",export="reconcile""#), "calls are counted:\n{metrics}");
    assert!(
        !metrics.contains(r#"plugin="fixture-probe",export="secondaries-of""#),
        "no secondaries-of call:\n{metrics}"
    );
    host.stop().await;
    Ok(())
}

/// Another controller's condition without `lastTransitionTime` (the Probe CRD allows it) does
/// not stop the plugin: it parses, reconciles and is written back as it was. A status the plugin
/// cannot parse fails the reconcile with an Event naming the field, and a later change reconciles
/// again once it is fixed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_condition_is_kept_and_an_unparseable_primary_is_reported_then_reconciled_again() -> anyhow::Result<()>
{
    let client = client().await?;
    let ns = namespace(&client, "foreign-condition").await?;
    let api = probes(&client, &ns).await?;
    let host = RunningHost::start_with_yaml(&client, &ns, &["fixture-probe"], "{}")?;
    api.create(&PostParams::default(), &probe("shared", serde_json::json!({ "payload": "one" }))).await?;
    let first = wait_until(&api, "shared", "the first reconcile", |o| reconciles(o) == 1).await?;

    let foreign = serde_json::json!({ "type": "Synced", "status": "True", "reason": "ByOthers", "message": "" });
    let mut conditions = status(&first)["conditions"].as_array().cloned().unwrap_or_default();
    conditions.push(foreign.clone());
    let patch = serde_json::json!({ "status": { "conditions": conditions } });
    api.patch_status("shared", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let spec = |payload: &str| serde_json::json!({ "spec": { "payload": payload } });
    api.patch("shared", &PatchParams::default(), &Patch::Merge(&spec("two"))).await?;
    let second =
        wait_until(&api, "shared", "a reconcile despite the foreign condition", |o| reconciles(o) == 2).await?;
    let kept = status(&second)["conditions"].as_array().cloned().unwrap_or_default();
    assert!(kept.contains(&foreign), "the foreign condition is written back as it was: {kept:?}");
    assert!(kept.iter().any(|c| c["type"] == "Ready" && c["observedGeneration"] == 2), "{kept:?}");

    let broken = serde_json::json!({ "status": { "conditions": "not a list" } });
    api.patch_status("shared", &PatchParams::default(), &Patch::Merge(&broken)).await?;
    api.patch("shared", &PatchParams::default(), &Patch::Merge(&spec("three"))).await?;
    let note = wasmop_tests::event_note(&client, &ns, WAIT, "shared", "status.conditions: expected").await?;
    assert!(
        note.contains(r#"status.conditions: expected a list, got "not a list""#),
        "the Event names the field: {note}"
    );

    let fixed = serde_json::json!({ "status": { "conditions": [] } });
    api.patch_status("shared", &PatchParams::default(), &Patch::Merge(&fixed)).await?;
    api.patch("shared", &PatchParams::default(), &Patch::Merge(&spec("four"))).await?;
    wait_until(&api, "shared", "a reconcile of the next change", |o| {
        reconciles(o) == 3 && status(o)["observedGeneration"] == 4
    })
    .await?;
    host.stop().await;
    Ok(())
}
