//! The status-only example plugin (`plugins/greeting`) in the cluster: the same two scenarios
//! as its FakeHost test (`plugins/greeting/tests/greeting.rs`), with the same expectations, so
//! the fake host and the real one are held to one behaviour. The first runs the Python,
//! TypeScript and Go Greetings (`plugins/greeting-py`, `plugins/greeting-ts`, `plugins/greeting-go`)
//! too.

use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use serde_json::{Value, json};
use wasmop::runtime::Limits;
use wasmop_tests::{RunningHost, apply_file, client, namespace, within, workspace_root};

const WAIT: Duration = Duration::from_secs(60);
/// How long a thousand Greetings may take to settle on a loaded machine.
const SETUP: Duration = Duration::from_secs(300);

fn condition<'a>(object: &'a DynamicObject, type_: &str) -> Option<&'a Value> {
    object.data["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_)
}

/// The host has reconciled the current generation: `Ready` or `Degraded` says so.
fn settled(object: Option<&DynamicObject>) -> bool {
    object.is_some_and(|o| {
        let current = o.metadata.generation;
        ["Ready", "Degraded"]
            .iter()
            .filter_map(|t| condition(o, t))
            .any(|c| c["status"] == "True" && c["observedGeneration"].as_i64() == current)
    })
}

wasmop_tests::in_every_language!(a_greeting_gets_its_message_and_conditions_from_the_host, "greeting", and go);
async fn a_greeting_gets_its_message_and_conditions_from_the_host(plugin: &str) -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/greeting/crd.yaml"), None).await?;
    let ns = namespace(&client, plugin).await?;
    let host = RunningHost::start(&client, &ns, &[plugin], Limits::default())?;
    let gvk = GroupVersionKind::gvk("example.wasmop.dev", "v1", "Greeting");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ApiResource::from_gvk(&gvk));

    let greeting = json!({
        "apiVersion": "example.wasmop.dev/v1", "kind": "Greeting",
        "metadata": { "name": "hi" }, "spec": { "name": "Ada" },
    });
    api.create(&PostParams::default(), &serde_json::from_value(greeting)?).await?;
    let done = within(WAIT, "hi reconciled", await_condition(api.clone(), "hi", settled)).await??.expect("exists");
    assert_eq!(done.data["status"]["message"], "Hello, Ada!");
    assert_eq!(done.data["status"]["observedGeneration"], 1);
    let ready = condition(&done, "Ready").expect("the host keeps Ready");
    assert_eq!((&ready["status"], &ready["message"]), (&json!("True"), &json!("greeted")));
    assert_eq!(condition(&done, "Degraded").map(|c| &c["status"]), Some(&json!("False")));

    // A spec without a name does not parse as the plugin's type: Degraded, Ready False.
    let patch = json!({ "spec": { "name": null } });
    api.patch("hi", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let broken = within(WAIT, "hi degraded", await_condition(api.clone(), "hi", settled)).await??.expect("exists");
    let degraded = condition(&broken, "Degraded").expect("the host reports the failure");
    assert_eq!(degraded["status"], "True");
    assert!(degraded["message"].as_str().unwrap_or_default().contains("name"), "{degraded}");
    assert_eq!(condition(&broken, "Ready").map(|c| &c["reason"]), Some(&json!("InvalidResource")));
    assert_eq!(broken.data["status"]["message"], "Hello, Ada!", "the last good status stays");
    host.stop().await;
    Ok(())
}

/// Greetings that need nothing at a restart: many, so that a changed Greeting queued behind
/// them (listed after them, by name) would wait for hundreds of reconciles.
const SETTLED: usize = 1000;

/// A restart reconciles every listed Greeting once, and the one changed while the host was down
/// first: it does not wait behind the settled ones (listed before it, by name). The order is the
/// one in which the restarted host finished its runs, read from its log events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_a_greeting_changed_meanwhile_goes_before_the_settled_ones() -> anyhow::Result<()> {
    use futures::TryStreamExt;
    use wasmop::metrics::Outcome;

    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/greeting/crd.yaml"), None).await?;
    let ns = namespace(&client, "greeting-restart").await?;
    let gvk = GroupVersionKind::gvk("example.wasmop.dev", "v1", "Greeting");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ApiResource::from_gvk(&gvk));
    let names: Vec<String> = (0..SETTLED).map(|i| format!("a-{i:04}")).chain(["z-changed".to_string()]).collect();
    futures::stream::iter(names.iter().map(Ok::<_, anyhow::Error>))
        .try_for_each_concurrent(16, |name| {
            let api = api.clone();
            async move {
                let greeting = json!({
                    "apiVersion": "example.wasmop.dev/v1", "kind": "Greeting",
                    "metadata": { "name": name }, "spec": { "name": "Ada" },
                });
                api.create(&PostParams::default(), &serde_json::from_value(greeting)?).await?;
                Ok(())
            }
        })
        .await?;
    // Settling a thousand Greetings is setup, not the subject: the host's default concurrency.
    let host = RunningHost::start(&client, &ns, &["greeting"], Limits::default())?;
    let all_settled = |list: &Vec<DynamicObject>| list.len() == names.len() && list.iter().all(|o| settled(Some(o)));
    let listed = async || Ok(api.list(&Default::default()).await?.items);
    wasmop_tests::until_within(SETUP, "every Greeting settled", listed, all_settled).await?;
    host.stop().await;
    let runs = wasmop_tests::in_process::runs();
    let settled_runs = runs.in_namespace(&ns).len();

    let patch = json!({ "spec": { "name": "Grace" } });
    api.patch("z-changed", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let one_at_a_time = "plugins:\n  greeting:\n    maxConcurrentReconciles: 1\n";
    let host = RunningHost::start_with_yaml(&client, &ns, &["greeting"], one_at_a_time)?;
    let greeted =
        |o: Option<&DynamicObject>| settled(o) && o.is_some_and(|o| o.data["status"]["message"] == "Hello, Grace!");
    within(WAIT, "z-changed greeted", await_condition(api.clone(), "z-changed", greeted)).await??;
    // The settled ones are still reconciled, each once, after it, and need no write.
    let metrics = host.host().metrics().clone();
    let total = async || Ok(metrics.reconciles_of("greeting", Outcome::Success));
    wasmop_tests::until_within(SETUP, "every listed Greeting reconciled", total, |n| *n >= names.len() as u64).await?;
    assert_eq!(metrics.writes_of("greeting"), 1, "the settled Greetings needed no write");
    let restarted: Vec<String> = runs.in_namespace(&ns).into_iter().skip(settled_runs).collect();
    assert_eq!(restarted.len(), names.len(), "each listed Greeting once: {restarted:?}");
    assert_eq!(restarted.first().map(String::as_str), Some("z-changed"), "the changed Greeting first");
    host.stop().await;
    Ok(())
}

/// JOSDK's rule: a plugin without cleanup (the Greeting) puts no finalizer on its primaries, so
/// deleting one (or its namespace) never waits for the host. Greetings finalized by an earlier
/// version of the host are released once: a live one in its next reconcile, one marked for
/// deletion at once, without a cleanup.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_greeting_gets_no_finalizer_and_one_left_from_before_is_released() -> anyhow::Result<()> {
    use kube::api::DeleteParams;

    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/greeting/crd.yaml"), None).await?;
    let ns = namespace(&client, "greeting-finalizer").await?;
    let gvk = GroupVersionKind::gvk("example.wasmop.dev", "v1", "Greeting");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ApiResource::from_gvk(&gvk));
    for (name, finalizers) in [("fresh", json!(null)), ("upgraded", json!(["wasmop.dev/greeting"]))] {
        let greeting = json!({
            "apiVersion": "example.wasmop.dev/v1", "kind": "Greeting",
            "metadata": { "name": name, "finalizers": finalizers }, "spec": { "name": "Ada" },
        });
        api.create(&PostParams::default(), &serde_json::from_value(greeting)?).await?;
    }
    let leaving = json!({
        "apiVersion": "example.wasmop.dev/v1", "kind": "Greeting",
        "metadata": { "name": "leaving", "finalizers": ["wasmop.dev/greeting", "example.com/other"] },
        "spec": { "name": "Ada" },
    });
    api.create(&PostParams::default(), &serde_json::from_value(leaving)?).await?;
    api.delete("leaving", &DeleteParams::default()).await?;

    let host = RunningHost::start(&client, &ns, &["greeting"], Limits::default())?;
    let unfinalized = |o: Option<&DynamicObject>| settled(o) && o.is_some_and(|o| o.metadata.finalizers.is_none());
    for name in ["fresh", "upgraded"] {
        within(WAIT, "settled without a finalizer", await_condition(api.clone(), name, unfinalized)).await??;
    }
    // Only the other controller's finalizer holds the deleted one now.
    let released = |o: Option<&DynamicObject>| {
        o.is_some_and(|o| o.metadata.finalizers.as_deref() == Some(&["example.com/other".to_string()][..]))
    };
    within(WAIT, "leaving released", await_condition(api.clone(), "leaving", released)).await??;
    api.patch("leaving", &PatchParams::default(), &Patch::Merge(&json!({ "metadata": { "finalizers": null } })))
        .await?;
    within(WAIT, "leaving gone", await_condition(api.clone(), "leaving", |o: Option<&DynamicObject>| o.is_none()))
        .await??;
    host.stop().await;
    Ok(())
}
