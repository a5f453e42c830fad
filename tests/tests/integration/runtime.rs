//! The sandbox without a cluster: loading, describe(), reconcile() and every way a plugin can
//! misbehave, on the compiled plugins in `plugins/dist`.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use wasmop::runtime::bindings::CONTRACT_VERSION;
use wasmop::runtime::bindings::wasmop::plugin::types::{KindRef, ReconcileError, ReconcileRequest};
use wasmop::runtime::{CallError, GetResult, Limits, ListResult, LoadError};
use wasmop_tests::{EmptyCache, plugin, runtime};

fn limits() -> Limits {
    Limits { deadline: Duration::from_millis(300), memory_bytes: 64 << 20, fuel: None }
}

fn request(object: serde_json::Value) -> ReconcileRequest {
    wasmop_tests::first_request(&object)
}

fn webpage(generation: i64) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "sample.wasmop.dev/v1", "kind": "WebPage",
        "metadata": { "name": "hello", "namespace": "default", "generation": generation },
        "spec": { "html": "<h1>hi</h1>" }
    })
}

fn config_map() -> serde_json::Value {
    serde_json::json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "c", "namespace": "default" } })
}

#[test]
fn webpage_describes_its_primary_kind() {
    let module = runtime(limits()).unwrap().load(&plugin("webpage")).unwrap();
    let config = module.config();
    assert_eq!(config.name, "webpage");
    assert_eq!(
        (config.primary.group.as_str(), config.primary.version.as_str(), config.primary.kind.as_str()),
        ("sample.wasmop.dev", "v1", "WebPage")
    );
    assert!(config.primary.namespaced);
    assert!(config.generation_aware);
    assert_eq!(module.digest().len(), 64);
}

#[tokio::test]
async fn webpage_returns_its_status_and_readiness_for_the_host_to_write() {
    let module = runtime(limits()).unwrap().load(&plugin("webpage")).unwrap();
    let outcome = module.reconcile(Arc::new(EmptyCache), &request(webpage(7))).await.unwrap().unwrap();
    let status: serde_json::Value = serde_json::from_str(outcome.status.as_deref().unwrap()).unwrap();
    assert_eq!(status["htmlConfigMap"], "hello-html");
    // The host turns the readiness into the conditions, with observedGeneration.
    let readiness = outcome.readiness.expect("the webpage states its readiness");
    assert!(readiness.ready, "{}", readiness.message);
}

#[tokio::test]
async fn a_primary_that_does_not_match_the_plugin_type_is_an_invalid_error() {
    let module = runtime(limits()).unwrap().load(&plugin("webpage")).unwrap();
    let mut object = webpage(1);
    object["spec"] = serde_json::json!({ "html": 42 });
    match module.reconcile(Arc::new(EmptyCache), &request(object)).await.unwrap() {
        Err(ReconcileError::Invalid(message)) => {
            assert!(message.contains("html") || message.contains("string"), "{message}")
        }
        other => panic!("expected an invalid-resource error, got {other:?}"),
    }
}

#[tokio::test]
async fn an_endless_loop_is_stopped_by_the_deadline() {
    let module = runtime(limits()).unwrap().load(&plugin("fixture-loop")).unwrap();
    let err = module.reconcile(Arc::new(EmptyCache), &request(config_map())).await.unwrap_err();
    assert!(matches!(err, CallError::DeadlineExceeded(d) if d == Duration::from_millis(300)), "{err:?}");
    assert!(err.to_string().contains("deadline"), "{err}");
}

/// The call runs as a fiber that yields at every epoch tick: a plugin that spins until its
/// deadline leaves the thread it runs on free for other tasks, even on a one-thread runtime.
#[tokio::test(flavor = "current_thread")]
async fn a_spinning_plugin_does_not_hold_the_runtime_thread() {
    let module = runtime(limits()).unwrap().load(&plugin("fixture-loop")).unwrap();
    let ticks = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let ticker = tokio::spawn({
        let ticks = ticks.clone();
        async move {
            loop {
                tokio::time::sleep(Duration::from_millis(5)).await;
                ticks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
    });
    let err = module.reconcile(Arc::new(EmptyCache), &request(config_map())).await.unwrap_err();
    ticker.abort();
    assert!(matches!(err, CallError::DeadlineExceeded(_)), "{err:?}");
    let ticks = ticks.load(std::sync::atomic::Ordering::SeqCst);
    assert!(ticks > 0, "the other task never ran while the plugin spun");
}

#[tokio::test]
async fn a_1_gib_allocation_is_stopped_by_the_memory_cap() {
    let module = runtime(limits()).unwrap().load(&plugin("fixture-alloc")).unwrap();
    let err = module.reconcile(Arc::new(EmptyCache), &request(config_map())).await.unwrap_err();
    match &err {
        CallError::MemoryLimitExceeded(e) => assert_eq!(e.limit, 64 << 20),
        other => panic!("expected the memory cap, got {other:?}"),
    }
    assert!(err.to_string().contains("memory limit of 64 MiB exceeded"), "{err}");
}

#[tokio::test]
async fn an_instance_is_kept_for_the_next_call_unless_its_memory_grew_much() {
    let module = runtime(limits()).unwrap().load(&plugin("fixture-alloc")).unwrap();
    let allocating = |mib: u32| {
        let mut object = config_map();
        object["data"] = serde_json::json!({ "mib": mib.to_string() });
        request(object)
    };
    assert_eq!(module.kept_instances(), 0, "not even the instance describe() ran in");
    module.reconcile(Arc::new(EmptyCache), &allocating(1)).await.unwrap().unwrap();
    assert_eq!(module.kept_instances(), 1, "a call that grew its memory by 1 MiB");
    // The kept instance runs the next call, which grows its memory past the bound.
    module.reconcile(Arc::new(EmptyCache), &allocating(16)).await.unwrap().unwrap();
    assert_eq!(module.kept_instances(), 0, "a call that grew its memory by 16 MiB");
    module.reconcile(Arc::new(EmptyCache), &allocating(1)).await.unwrap().unwrap();
    assert_eq!(module.kept_instances(), 1, "a fresh instance again");
}

#[tokio::test]
async fn a_panic_is_reported_with_its_message() {
    let module = runtime(limits()).unwrap().load(&plugin("fixture-panic")).unwrap();
    let err = module.reconcile(Arc::new(EmptyCache), &request(config_map())).await.unwrap_err();
    assert!(matches!(err, CallError::Panicked(_)), "{err:?}");
    assert!(err.to_string().contains("fixture-panic: panicking on purpose"), "{err}");
}

#[tokio::test]
async fn a_module_is_usable_again_after_a_trap() {
    let module = runtime(limits()).unwrap().load(&plugin("fixture-panic")).unwrap();
    for _ in 0..3 {
        assert!(matches!(
            module.reconcile(Arc::new(EmptyCache), &request(config_map())).await,
            Err(CallError::Panicked(_))
        ));
    }
}

#[test]
fn a_file_that_is_not_wasm_is_refused_naming_the_file() {
    let dir = std::env::temp_dir().join(format!("wasmop-runtime-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("broken.wasm");
    std::fs::write(&path, b"this is not wasm").unwrap();
    let err = runtime(limits()).unwrap().load(&path).unwrap_err();
    assert!(matches!(err, LoadError::CompileFailed { .. }), "{err:?}");
    assert!(err.to_string().contains("broken.wasm"), "{err}");
}

#[test]
fn a_plugin_built_against_another_contract_version_is_refused() {
    let patched = wasmop_tests::with_contract_version(&std::fs::read(plugin("webpage")).unwrap(), "9.9.9");
    let err = runtime(limits()).unwrap().load_bytes(std::path::Path::new("future.wasm"), &patched).unwrap_err();
    match &err {
        LoadError::ContractMismatch { found, .. } => assert_eq!(found, "9.9.9"),
        other => panic!("expected a contract mismatch, got {other:?}"),
    }
    assert!(err.to_string().contains("wasmop:plugin@9.9.9"), "{err}");
}

/// Two functions of the reconciler interface with each other's names: the export `check` has
/// the type of `fetch`. The host checks every function's type at load.
#[test]
fn a_plugin_whose_function_has_another_type_is_refused_at_load_naming_it() {
    let swapped = wasmop_tests::with_names_swapped(&std::fs::read(plugin("webpage")).unwrap(), "check", "fetch");
    let err = runtime(limits()).unwrap().load_bytes(std::path::Path::new("swapped.wasm"), &swapped).unwrap_err();
    assert!(matches!(err, LoadError::ExportMismatch { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.starts_with("swapped.wasm does not implement wasmop:plugin/reconciler@"), "{message}");
    assert!(message.contains("function `check` has another type than the contract's"), "{message}");
}

#[test]
fn a_plugin_without_a_function_of_the_contract_is_refused_at_load_naming_it() {
    let renamed =
        wasmop_tests::with_names_swapped(&std::fs::read(plugin("webpage")).unwrap(), "fetch-all", "fetch-any");
    let err = runtime(limits()).unwrap().load_bytes(std::path::Path::new("renamed.wasm"), &renamed).unwrap_err();
    assert!(matches!(err, LoadError::ExportMismatch { .. }), "{err:?}");
    assert!(err.to_string().ends_with("it has no function `fetch-all`"), "{err}");
}

/// Every function of the contract is called on a fresh instance of its own and answers: the
/// host looks each up by the index it found at load.
#[tokio::test]
async fn every_function_of_the_contract_can_be_called() {
    use wasmop::runtime::bindings::wasmop::plugin::types::{EventKind, ExternalObject};
    let module = runtime(limits()).unwrap().load(&plugin("webpage")).unwrap();
    assert_eq!(module.config().primary.kind, "WebPage");
    let cache = || -> Arc<dyn wasmop::runtime::CacheReader> { Arc::new(EmptyCache) };
    let page = request(webpage(1));
    let json = page.object.as_str();
    let external = ExternalObject { dependent: "d".into(), key: "k".into(), id: None, object: "{}".into() };
    let error = ReconcileError::Transient("t".into());
    // What each answers is the plugin's business (the SDK's defaults); that it answers is the
    // host's: `unwrap` fails on a `CallError`.
    assert!(module.reconcile(cache(), &page).await.unwrap().is_ok());
    module.desired(cache(), &page).await.unwrap().unwrap();
    module.cleanup(cache(), &page).await.unwrap().unwrap();
    module.check(cache(), "c", json, None).await.unwrap();
    module.update_error_status(cache(), &page, &error).await.unwrap();
    let _ = module.map_secondary(cache(), json, None).await.unwrap();
    let _ = module.secondaries_of(cache(), json).await.unwrap();
    module.crd().await.unwrap();
    let _ = module.fetch(cache(), json, &[]).await.unwrap();
    let _ = module.fetch_all(cache()).await.unwrap();
    let _ = module.apply_external(cache(), json, &external, None).await.unwrap();
    let _ = module.delete_external(cache(), json, &external).await.unwrap();
    let _ = module.map_inbound(cache(), "{}").await.unwrap();
    module.filter("f", EventKind::Create, json, None).await.unwrap();
}

/// A cache holding one Secret, `creds` in `ns`, with `keys` data keys.
struct OneSecret {
    keys: usize,
}

impl wasmop::runtime::CacheReader for OneSecret {
    fn get<'a>(&'a self, _: &'a KindRef, _: Option<&'a str>, name: &'a str) -> BoxFuture<'a, GetResult> {
        let data: serde_json::Map<String, serde_json::Value> =
            (0..self.keys).map(|i| (format!("k{i}"), serde_json::Value::from("dmFsdWU="))).collect();
        let secret = serde_json::json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": { "name": name, "namespace": "ns" }, "data": data
        });
        Box::pin(std::future::ready(Ok((name == "creds").then(|| secret.to_string()))))
    }
    fn list<'a>(
        &'a self,
        kind: &'a KindRef,
        ns: Option<&'a str>,
        selector: Option<&'a str>,
    ) -> BoxFuture<'a, ListResult> {
        EmptyCache.list(kind, ns, selector)
    }
    fn secondaries<'a>(&'a self, kind: &'a KindRef) -> BoxFuture<'a, ListResult> {
        EmptyCache.secondaries(kind)
    }
}

/// A shadow candidate reads what the live version read at the same moment: with the live
/// call's reads followed it sees the Secret as the live version saw it (2 keys), not as the
/// cache holds it by the time the candidate runs (3 keys); a read the live version did not
/// make still reaches the cache.
#[tokio::test]
async fn a_candidate_following_the_live_call_reads_what_it_read_not_what_the_cache_holds_later() {
    use wasmop::runtime::CacheReader;
    let module = runtime(limits()).unwrap().load(&plugin("fixture-record")).unwrap();
    let swap = |secret: &str| {
        serde_json::json!({
            "apiVersion": "test.wasmop.dev/v1", "kind": "Swap",
            "metadata": { "name": "s", "namespace": "ns", "annotations": { "test.wasmop.dev/secret": secret } },
            "spec": { "value": 5 }
        })
    };
    let status = |result: Result<wasmop::runtime::GuestResult, CallError>| -> serde_json::Value {
        serde_json::from_str(&result.unwrap().unwrap().status.unwrap()).unwrap()
    };
    let live_view = Arc::new(wasmop::record::Recorded::new(Arc::new(OneSecret { keys: 2 })));
    let live = module.reconcile(live_view.clone(), &request(swap("creds"))).await;
    assert_eq!(status(live)["secretKeys"], 2);
    let calls = live_view.recorder().expect("a recording view").last_calls();
    assert!(!calls.is_empty(), "the live call's reads were kept");

    let later = Arc::new(OneSecret { keys: 3 });
    let followed = module.reconcile_following(later.clone(), &request(swap("creds")), calls.clone()).await;
    assert_eq!(status(followed)["secretKeys"], 2, "the candidate read the Secret as the live version did");
    let unfollowed = module.reconcile(later.clone(), &request(swap("creds"))).await;
    assert_eq!(status(unfollowed)["secretKeys"], 3, "without following, the later cache answers");
    // Another Secret, which the live version never read: the cache answers (none there).
    let other = module.reconcile_following(later, &request(swap("other")), calls).await;
    assert_eq!(status(other)["secretKeys"], 0);
}

/// An admission request for `object` (JSON) doing `operation`, by user `test`.
fn admission(
    operation: wasmop::runtime::bindings::wasmop::plugin::types::Operation,
    object: &serde_json::Value,
) -> wasmop::runtime::bindings::wasmop::plugin::types::AdmissionRequest {
    use wasmop::runtime::bindings::wasmop::plugin::types::AdmissionRequest;
    let (group, version) = object["apiVersion"].as_str().unwrap().rsplit_once('/').unwrap();
    AdmissionRequest {
        uid: "u".into(),
        kind: KindRef {
            group: group.into(),
            version: version.into(),
            kind: object["kind"].as_str().unwrap().into(),
            plural: None,
            namespaced: true,
        },
        operation,
        namespace: Some("default".into()),
        name: object["metadata"]["name"].as_str().unwrap().into(),
        object: Some(object.to_string()),
        old_object: None,
        username: "test".into(),
        groups: Vec::new(),
        dry_run: false,
    }
}

/// A plugin built against contract 0.8.0 (its exports and imports renamed back to that
/// version: 0.8.1 only added an import) loads and reconciles on this host.
#[tokio::test]
async fn a_plugin_built_against_the_previous_patch_contract_still_loads_and_runs() {
    assert_eq!(wasmop::runtime::bindings::COMPATIBLE_VERSIONS, ["0.8.0"]);
    let mut bytes = std::fs::read(plugin("webpage")).unwrap();
    for interface in ["reconciler", "host", "types"] {
        let (new, old) =
            (format!("wasmop:plugin/{interface}@{CONTRACT_VERSION}"), format!("wasmop:plugin/{interface}@0.8.0"));
        bytes = wasmop_tests::with_names_swapped(&bytes, &new, &old);
    }
    let module = runtime(limits()).unwrap().load_bytes(std::path::Path::new("old.wasm"), &bytes).unwrap();
    assert_eq!(module.name(), "webpage");
}

fn gate(labels: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "fixture.wasmop.dev/v1", "kind": "Gate",
        "metadata": { "name": "g", "namespace": "default", "labels": labels }
    })
}

/// The bytes of `name`'s plugin with its admission interface renamed: a component that exports
/// no `wasmop:plugin/admission`, as one of the `plugin` world.
fn without_admission(name: &str) -> Vec<u8> {
    let interface = format!("{}@{}", wasmop::runtime::bindings::ADMISSION_INTERFACE, CONTRACT_VERSION);
    let renamed = interface.replace("admission@", "admissiox@");
    wasmop_tests::with_names_swapped(&std::fs::read(plugin(name)).unwrap(), &interface, &renamed)
}

/// The webhooks come back with the host's defaults filled in: a timeout of 10 s, creates and
/// updates.
#[test]
fn a_plugins_webhooks_are_checked_and_completed_at_load() {
    use wasmop::runtime::bindings::wasmop::plugin::types::{FailurePolicy, Operation, WebhookType};
    let module = runtime(limits()).unwrap().load(&plugin("fixture-admission")).unwrap();
    let [webhook, conversion] = module.webhooks() else { panic!("two webhooks: {:?}", module.webhooks()) };
    assert_eq!(webhook.webhook_type, WebhookType::Validating);
    assert_eq!(webhook.failure_policy, FailurePolicy::Fail);
    assert_eq!(webhook.timeout_ms, Some(10_000));
    assert_eq!(webhook.operations, [Operation::Create, Operation::Update]);
    assert_eq!((conversion.webhook_type, conversion.timeout_ms), (WebhookType::Conversion, Some(10_000)));
    let ignoring = runtime(limits()).unwrap().load(&plugin("fixture-admission-ignore")).unwrap();
    let [ignored] = ignoring.webhooks() else { panic!("one webhook: {:?}", ignoring.webhooks()) };
    assert_eq!(ignored.failure_policy, FailurePolicy::Ignore);
}

/// A component of the `plugin` world (no admission export) declaring no webhooks loads, and has
/// none; calling an admission function on it is an error, not a trap.
#[tokio::test]
async fn a_plugin_without_the_admission_interface_loads_without_webhooks() {
    use wasmop::runtime::bindings::wasmop::plugin::types::Operation;
    let bytes = without_admission("greeting");
    let module = runtime(limits()).unwrap().load_bytes(std::path::Path::new("plain.wasm"), &bytes).unwrap();
    assert!(module.webhooks().is_empty());
    let err = module
        .validate(Arc::new(EmptyCache), &admission(Operation::Create, &gate(serde_json::json!({}))), limits().deadline)
        .await
        .unwrap_err();
    assert!(matches!(err, CallError::NotExported(_)), "{err:?}");
}

#[test]
fn a_plugin_declaring_webhooks_without_the_admission_interface_is_refused_naming_both() {
    let bytes = without_admission("fixture-admission");
    let err = runtime(limits()).unwrap().load_bytes(std::path::Path::new("hookless.wasm"), &bytes).unwrap_err();
    match &err {
        LoadError::AdmissionNotExported { plugin, .. } => assert_eq!(plugin, "fixture-admission"),
        other => panic!("expected a refusal for the missing admission interface, got {other:?}"),
    }
    let message = err.to_string();
    assert!(message.contains("\"fixture-admission\"") && message.contains("wasmop:plugin/admission@"), "{message}");
}

/// `validate` admits, denies with the plugin's message and field, and a panic in it is a call
/// error naming the panic, as a trap in a reconcile is; every call is counted as the plugin's
/// other calls are.
#[tokio::test]
async fn validate_admits_denies_and_traps_as_the_plugin_says() {
    use wasmop::runtime::bindings::wasmop::plugin::types::Operation;
    let metrics = wasmop::metrics::Metrics::new();
    let module = wasmop_tests::observed_runtime(limits(), Some(metrics.clone()))
        .unwrap()
        .load(&plugin("fixture-admission"))
        .unwrap();
    let deadline = Duration::from_secs(2);
    let validate = |labels| {
        let request = admission(Operation::Create, &gate(labels));
        let module = &module;
        async move { module.validate(Arc::new(EmptyCache), &request, deadline).await }
    };
    let admitted = validate(serde_json::json!({})).await.unwrap();
    assert!(admitted.allowed && admitted.message.is_none(), "{admitted:?}");
    let denied = validate(serde_json::json!({ "wasmop.dev/deny": "closed today" })).await.unwrap();
    assert!(!denied.allowed);
    assert_eq!((denied.message.as_deref(), denied.field.as_deref()), (Some("closed today"), Some("metadata.labels")));
    let err = validate(serde_json::json!({ "wasmop.dev/trap": "yes" })).await.unwrap_err();
    assert!(matches!(&err, CallError::Panicked(m) if m.contains("traps on purpose for gate g")), "{err:?}");
    // The instance that trapped is not reused: the next call answers.
    assert!(validate(serde_json::json!({})).await.unwrap().allowed);
    assert_eq!(metrics.calls_of("fixture-admission", "validate"), 4);
}

/// The webpage sample refuses an empty `html` at its field, defaults `exposed` and converts a
/// page to v2 and back, through the host's calls.
#[tokio::test]
async fn the_webpage_refuses_an_empty_html_defaults_exposed_and_converts() {
    use wasmop::runtime::bindings::wasmop::plugin::types::{Operation, WebhookType};
    let module = runtime(limits()).unwrap().load(&plugin("webpage")).unwrap();
    let types: Vec<_> = module.webhooks().iter().map(|w| w.webhook_type).collect();
    assert_eq!(types, [WebhookType::Validating, WebhookType::Mutating, WebhookType::Conversion]);
    let v1 = webpage(1).to_string();
    let v2 = module
        .convert(Arc::new(EmptyCache), std::slice::from_ref(&v1), "sample.wasmop.dev/v2", limits().deadline)
        .await
        .unwrap()
        .unwrap();
    let page: serde_json::Value = serde_json::from_str(&v2[0]).unwrap();
    assert_eq!(page["apiVersion"], "sample.wasmop.dev/v2");
    assert_eq!(page["spec"], serde_json::json!({ "content": { "html": "<h1>hi</h1>" } }));
    let back =
        module.convert(Arc::new(EmptyCache), &v2, "sample.wasmop.dev/v1", limits().deadline).await.unwrap().unwrap();
    assert_eq!(serde_json::from_str::<serde_json::Value>(&back[0]).unwrap(), webpage(1));
    let mut page = webpage(1);
    page["spec"]["html"] = serde_json::json!("");
    let verdict =
        module.validate(Arc::new(EmptyCache), &admission(Operation::Create, &page), limits().deadline).await.unwrap();
    assert!(!verdict.allowed);
    assert_eq!(
        (verdict.message.as_deref(), verdict.field.as_deref()),
        (Some("html must not be empty"), Some("spec.html"))
    );
    let stored = module
        .default_object(Arc::new(EmptyCache), &admission(Operation::Create, &webpage(1)), limits().deadline)
        .await
        .unwrap()
        .unwrap();
    let stored: serde_json::Value = serde_json::from_str(&stored).unwrap();
    assert_eq!(stored["spec"], serde_json::json!({ "html": "<h1>hi</h1>", "exposed": false }));
}

/// An admission call ends at the deadline it is given when that is shorter than the plugin's
/// own, whether its running time or the wall clock reaches it first.
#[tokio::test]
async fn an_admission_call_stops_at_the_shorter_deadline() {
    use wasmop::runtime::bindings::wasmop::plugin::types::Operation;
    let module = runtime(Limits { deadline: Duration::from_secs(30), ..limits() })
        .unwrap()
        .load(&plugin("fixture-admission"))
        .unwrap();
    let request = admission(Operation::Create, &gate(serde_json::json!({ "wasmop.dev/spin": "yes" })));
    let deadline = Duration::from_millis(300);
    let started = std::time::Instant::now();
    let err = module.validate(Arc::new(EmptyCache), &request, deadline).await.unwrap_err();
    let ended = matches!(err, CallError::DeadlineExceeded(d) | CallError::WallClockExceeded(d) if d == deadline);
    assert!(ended, "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
}

/// The webpage's validating webhook refuses an empty `html` at its field in every language,
/// through the host's call of the built component.
async fn refuses_an_empty_html(plugin_name: &str) -> anyhow::Result<()> {
    use wasmop::runtime::bindings::wasmop::plugin::types::{Operation, WebhookType};
    let module = runtime(Limits { deadline: Duration::from_secs(5), ..limits() })?.load(&plugin(plugin_name))?;
    assert_eq!(module.webhooks()[0].webhook_type, WebhookType::Validating, "{plugin_name}");
    let mut page = webpage(1);
    page["spec"]["html"] = serde_json::json!("");
    let verdict =
        module.validate(Arc::new(EmptyCache), &admission(Operation::Create, &page), Duration::from_secs(5)).await?;
    assert!(!verdict.allowed, "{plugin_name}: {verdict:?}");
    assert_eq!(verdict.message.as_deref(), Some("html must not be empty"), "{plugin_name}");
    assert_eq!(verdict.field.as_deref(), Some("spec.html"), "{plugin_name}");
    let verdict = module
        .validate(Arc::new(EmptyCache), &admission(Operation::Create, &webpage(1)), Duration::from_secs(5))
        .await?;
    assert!(verdict.allowed, "{plugin_name}: {verdict:?}");
    Ok(())
}

wasmop_tests::in_every_language!(refuses_an_empty_html, "webpage", and go);
