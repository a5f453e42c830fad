//! Plugins written in Python (componentize-py), TypeScript (componentize-js) and Go (standard Go
//! and wasmop-componentize) in the host's runtime: the same Greeting answers the same object with
//! the same outcome in every language, and a Python or JavaScript runtime, tens of MiB, stays
//! within the memory limit like any plugin. A plugin of any language keeps two instances warm
//! between calls. The WebPage's CRD, generated from its types, is the same in Rust, Python and
//! TypeScript but for the descriptions.

use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt};
use serde_json::{Value, json};
use wasmop::runtime::bindings::wasmop::plugin::types::KindRef;
use wasmop::runtime::{CacheReader, GetResult, Limits, ListResult};
use wasmop_tests::{EmptyCache, GO, LANGUAGES, first_request, plugin, runtime, wasmop_binary, workspace_root};

fn greeting(name: Value) -> Value {
    json!({
        "apiVersion": "example.wasmop.dev/v1", "kind": "Greeting",
        "metadata": { "name": "hi", "namespace": "default", "generation": 2, "uid": "u-1", "resourceVersion": "7" },
        "spec": { "name": name },
    })
}

/// The Greeting's outcome in one language, as the host reads it.
async fn outcome(file: &str, object: &Value) -> anyhow::Result<Value> {
    let module = runtime(Limits::default())?.load(&plugin(file))?;
    let answer = module.reconcile(Arc::new(EmptyCache), &first_request(object)).await?;
    Ok(match answer {
        Ok(outcome) => json!({
            "status": outcome.status.as_deref().map(serde_json::from_str::<Value>).transpose()?,
            "ready": outcome.readiness.map(|r| (r.ready, r.message)),
            "labels": outcome.labels.len(),
            "events": outcome.events.len(),
            "requeue": outcome.reschedule_after_ms,
        }),
        Err(error) => json!({ "error": format!("{error:?}").split('(').next().unwrap_or_default() }),
    })
}

#[tokio::test]
async fn the_greeting_answers_alike_in_every_language() -> anyhow::Result<()> {
    for object in [greeting(json!("Ada")), greeting(Value::Null)] {
        let rust = outcome("greeting", &object).await?;
        for (language, suffix) in LANGUAGES[1..].iter().chain([&GO]) {
            let other = outcome(&format!("greeting{suffix}"), &object).await?;
            assert_eq!(other, rust, "{language} differs from Rust on {object}");
        }
    }
    Ok(())
}

/// `value` without its `description`s, at any depth.
fn without_descriptions(value: &mut Value) {
    match value {
        Value::Object(object) => {
            object.remove("description");
            object.values_mut().for_each(without_descriptions);
        }
        Value::Array(items) => items.iter_mut().for_each(without_descriptions),
        _ => {}
    }
}

#[test]
fn the_webpage_crd_from_the_types_is_alike_in_every_language() -> anyhow::Result<()> {
    // The Rust webpage's crd.yaml, which its test checks against its types, serves v1 and v2;
    // the Python and TypeScript webpages serve v1, the same v1.
    let text = std::fs::read_to_string(workspace_root().join("plugins/webpage/crd.yaml"))?;
    let mut rust: Value = serde_saphyr::from_str(&text)?;
    rust["spec"]["versions"].as_array_mut().expect("versions").retain(|v| v["name"] == "v1");
    without_descriptions(&mut rust);
    assert_eq!(rust["spec"]["versions"][0]["storage"], true, "v1 is the Rust webpage's hub");
    for (language, suffix) in &LANGUAGES[1..] {
        let printed = std::process::Command::new(wasmop_binary()?)
            .arg("crd")
            .arg("--plugin")
            .arg(plugin(&format!("webpage{suffix}")))
            .output()?;
        assert!(printed.status.success(), "{language}: {}", String::from_utf8_lossy(&printed.stderr));
        let mut generated: Value = serde_saphyr::from_str(&String::from_utf8(printed.stdout)?)?;
        let spec = &generated["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(spec["description"], "A web page served by nginx (`v1`).", "{language} keeps the descriptions");
        without_descriptions(&mut generated);
        assert_eq!(generated, rust, "{language}'s WebPage CRD differs from Rust's");
    }
    Ok(())
}

#[tokio::test]
async fn a_python_or_javascript_runtime_stays_within_the_memory_limit() -> anyhow::Result<()> {
    let small = Limits { memory_bytes: 4 << 20, ..Limits::default() };
    for (language, suffix) in &LANGUAGES[1..] {
        let refused = runtime(small)?.load(&plugin(&format!("greeting{suffix}"))).err();
        let refused = refused.map(|e| format!("{e:#}")).unwrap_or_default();
        assert!(refused.contains("memory limit of 4 MiB exceeded"), "{language}: {refused:?}");
        // The default limit holds the same plugin.
        runtime(Limits::default())?.load(&plugin(&format!("greeting{suffix}")))?;
    }
    Ok(())
}

/// A cache whose every `get` waits until `n` calls are in one at once.
struct Together(tokio::sync::Barrier);

impl CacheReader for Together {
    fn get<'a>(&'a self, _: &'a KindRef, _: Option<&'a str>, _: &'a str) -> BoxFuture<'a, GetResult> {
        async move {
            self.0.wait().await;
            Ok(None)
        }
        .boxed()
    }
    fn list<'a>(&'a self, _: &'a KindRef, _: Option<&'a str>, _: Option<&'a str>) -> BoxFuture<'a, ListResult> {
        futures::future::ready(Ok(Vec::new())).boxed()
    }
    fn secondaries<'a>(&'a self, _: &'a KindRef) -> BoxFuture<'a, ListResult> {
        futures::future::ready(Ok(Vec::new())).boxed()
    }
}

#[tokio::test]
async fn a_plugin_keeps_two_instances_warm_whatever_its_language() -> anyhow::Result<()> {
    // The conformance plugin reads the object `probe` of the kind `spec.read` names.
    let scenario = json!({
        "apiVersion": "example.wasmop.dev/v1", "kind": "Scenario",
        "metadata": { "name": "s", "namespace": "default", "generation": 1, "uid": "u-2", "resourceVersion": "1" },
        "spec": { "read": { "version": "v1", "kind": "ConfigMap" } },
    });
    let request = first_request(&scenario);
    for (language, suffix) in LANGUAGES {
        let module = runtime(Limits::default())?.load(&plugin(&format!("fixture-conform{suffix}")))?;
        assert_eq!(module.kept_instances(), 0, "{language}: not even the instance describe() ran in");
        module.reconcile(Arc::new(Together(tokio::sync::Barrier::new(1))), &request).await??;
        assert_eq!(module.kept_instances(), 1, "{language}: after one call");
        // Four calls in at once (each waits in its read for the others): one runs on the kept
        // instance, three on fresh ones; two are kept after.
        let together: Arc<dyn CacheReader> = Arc::new(Together(tokio::sync::Barrier::new(4)));
        let calls = (0..4).map(|_| module.reconcile(together.clone(), &request));
        for answer in futures::future::join_all(calls).await {
            answer??;
        }
        assert_eq!(module.kept_instances(), 2, "{language}: after calls at once");
    }
    Ok(())
}

/// A Go plugin's instance answers call after call: the arguments the host writes into it never
/// make the Go runtime grow its heap (which reads the clock, an import no component may call
/// while the host writes arguments), however many calls and however large the object.
#[tokio::test]
async fn a_go_plugin_answers_call_after_call_on_one_instance() -> anyhow::Result<()> {
    let module = runtime(Limits::default())?.load(&plugin("greeting-go"))?;
    let call = async |i: usize, name: &str| {
        let answer = module.reconcile(Arc::new(EmptyCache), &first_request(&greeting(json!(name)))).await?;
        let status = answer.map_err(|e| anyhow::anyhow!("call {i}: {e:?}"))?.status.unwrap_or_default();
        assert_eq!(serde_json::from_str::<Value>(&status)?["message"], format!("Hello, {name}!"), "call {i}");
        anyhow::Ok(())
    };
    for i in 0..300 {
        call(i, &format!("Ada {i}")).await?;
    }
    assert_eq!(module.kept_instances(), 1, "every call ran on the kept instance");
    let large = "x".repeat(1 << 20);
    for i in 0..3 {
        call(i, &large).await?;
    }
    Ok(())
}
