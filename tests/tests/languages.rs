//! Plugins written in Python (componentize-py) and TypeScript (componentize-js) in the host's
//! runtime: the same Greeting answers the same object with the same outcome in all three
//! languages, and a Python or JavaScript runtime, tens of MiB, stays within the memory limit
//! like any plugin.

use std::sync::Arc;

use serde_json::{Value, json};
use wasmop::runtime::Limits;
use wasmop_tests::{EmptyCache, LANGUAGES, first_request, plugin, runtime};

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
        for (language, suffix) in &LANGUAGES[1..] {
            let other = outcome(&format!("greeting{suffix}"), &object).await?;
            assert_eq!(other, rust, "{language} differs from Rust on {object}");
        }
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
