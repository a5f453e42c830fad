//! Part `call`: the webpage plugin's `reconcile` in a fresh sandbox (what the host does for
//! every reconcile) against the same work done natively (parse the object, build the status,
//! serialize it), `BENCH_CALLS` times each (default 2,000).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wasmop::runtime::{CacheReader, Limits};
use wasmop_tests::{EmptyCache, plugin, runtime};

/// The webpage the part reconciles: about 1.9 KB of JSON.
fn webpage_json(name: &str, generation: i64) -> serde_json::Value {
    json!({
        "apiVersion": "sample.wasmop.dev/v1", "kind": "WebPage",
        "metadata": { "name": name, "namespace": "bench", "generation": generation, "uid": "0b5e8c3c-2f1e-4bba-9a51-0c8f4f4f5f10",
                      "resourceVersion": "12345", "labels": { "app": "bench" } },
        "spec": { "html": "<html><body>".to_string() + &"<p>wasmop benchmark paragraph</p>".repeat(50) + "</body></html>" }
    })
}

/// The status the webpage plugin computes, computed natively.
fn native_status(object: &serde_json::Value) -> serde_json::Value {
    let generation = object["metadata"]["generation"].as_i64();
    json!({
        "observedGeneration": generation,
        "conditions": [{
            "type": "Ready", "status": "True", "reason": "Reconciled", "message": "the WebPage is reconciled",
            "observedGeneration": generation, "lastTransitionTime": "2026-01-01T00:00:00Z"
        }]
    })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Runs the part; returns its JSON and markdown.
pub async fn per_call(calls: usize) -> anyhow::Result<(Value, String)> {
    let module = runtime(Limits::default())?.load(&plugin("webpage"))?;
    let object = webpage_json("page", 3);
    let request = wasmop_tests::first_request(&object);
    let cache: Arc<dyn CacheReader> = Arc::new(EmptyCache);
    for _ in 0..50 {
        module.reconcile(cache.clone(), &request).await?.map_err(|e| anyhow::anyhow!("{e:?}"))?;
    }
    let mut wasm = Vec::with_capacity(calls);
    for _ in 0..calls {
        let start = Instant::now();
        let outcome = module.reconcile(cache.clone(), &request).await?.map_err(|e| anyhow::anyhow!("{e:?}"))?;
        wasm.push(start.elapsed());
        std::hint::black_box(outcome);
    }
    let mut native = Vec::with_capacity(calls);
    for _ in 0..calls {
        let start = Instant::now();
        let parsed: serde_json::Value = serde_json::from_str(&request.object)?;
        let status = serde_json::to_string(&native_status(&parsed))?;
        native.push(start.elapsed());
        std::hint::black_box(status);
    }
    wasm.sort();
    native.sort();
    let mean = |v: &[Duration]| v.iter().sum::<Duration>() / v.len() as u32;
    let ms = |d: Duration| d.as_secs_f64() * 1e6;
    let figures = |v: &[Duration]| json!({ "meanUs": ms(mean(v)), "p50Us": ms(percentile(v, 0.5)), "p99Us": ms(percentile(v, 0.99)) });
    let ratio = mean(&wasm).as_secs_f64() / mean(&native).as_secs_f64();
    let json = json!({ "calls": calls, "objectBytes": request.object.len(), "wasmop": figures(&wasm), "native": figures(&native), "ratio": ratio });
    let mut md = format!(
        "## Per call\n\n{calls} calls, {} B object (webpage `reconcile`, fresh store each call):\n\n",
        request.object.len()
    );
    md.push_str("| side | mean us | p50 us | p99 us |\n|---|---|---|---|\n");
    for (name, v) in [("wasmop sandbox", &wasm), ("native", &native)] {
        md.push_str(&format!(
            "| {name} | {:.1} | {:.1} | {:.1} |\n",
            ms(mean(v)),
            ms(percentile(v, 0.5)),
            ms(percentile(v, 0.99))
        ));
    }
    md.push_str(&format!("\nwasmop/native (mean): {ratio:.1}x\n"));
    Ok((json, md))
}
