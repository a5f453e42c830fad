//! Granted outgoing HTTP, through the `fixture-http` plugin's exports and real TCP listeners on
//! loopback addresses: what the grant allows reaches the service with the secret header read
//! from a real Secret; any other origin, and any request from `reconcile`, fails inside the
//! plugin with the host's reason and never opens a connection; a slow, down or too generous
//! service fails the call at the grant's limits; and every request is counted.
//!
//! The plugin's grant is fixed when it is built, so its origins are fixed ports on a loopback
//! address of their own (`127.26.0.1:18026`, served here by one service for the whole test
//! binary, and `:18027`, where nothing listens); each test tags its paths. The URL to call is the
//! primary's `data.url`.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use wasmop::metrics::Metrics;
use wasmop::runtime::bindings::wasmop::plugin::types::{ExternalObject, ReconcileError, ReconcileRequest};
use wasmop::runtime::{Limits, LoadError, Module};
use wasmop::secrets::KubeSecrets;
use wasmop_tests::http_service::{BIG, HttpService};
use wasmop_tests::{EmptyCache, client, namespace, observed_runtime, plugin};

const PLUGIN: &str = "fixture-http";
/// Where the plugin's grant lets it go, with a secret header.
const GRANTED: &str = "127.26.0.1:18026";
const GRANTED_ORIGIN: &str = "http://127.26.0.1:18026";
/// A granted origin nothing listens on.
const DOWN_ORIGIN: &str = "http://127.26.0.1:18027";
/// The grant's total time per request.
const TIMEOUT: Duration = Duration::from_secs(1);
/// The grant's response-size cap.
const CAP: u64 = 64 * 1024;

/// The service at the granted origin, shared by the tests of this binary (each runs on a
/// runtime of its own, so the service runs on a thread of its own).
fn granted() -> &'static HttpService {
    static SERVICE: OnceLock<HttpService> = OnceLock::new();
    SERVICE.get_or_init(|| {
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
            runtime.block_on(async move {
                let bound = HttpService::bind(GRANTED).await;
                let serving = bound.is_ok();
                sender.send(bound).expect("the test waits for the service");
                if serving {
                    std::future::pending::<()>().await;
                }
            });
        });
        receiver.recv().expect("the service thread answers").unwrap_or_else(|e| {
            panic!("cannot serve {GRANTED}: {e}; the fixture-http plugin's grant names this fixed address, so it must be free")
        })
    })
}

fn limits() -> Limits {
    Limits { deadline: Duration::from_secs(1), memory_bytes: 64 << 20, fuel: None }
}

/// A primary whose `data.url` is `url`.
fn primary(url: &str) -> String {
    serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "caller", "namespace": "default", "labels": { "wasmop.dev/fixture": "http" } },
        "data": { "url": url },
    })
    .to_string()
}

/// The plugin loaded on a runtime that counts into fresh metrics and reads Secrets from
/// `namespace` on the real API server.
async fn load(namespace: &str) -> anyhow::Result<(Module, Arc<Metrics>)> {
    let metrics = Metrics::new();
    let runtime = observed_runtime(limits(), Some(metrics.clone()))?;
    runtime.read_secrets_for(PLUGIN, Arc::new(KubeSecrets::new(client().await?, Some(namespace.to_string()))));
    Ok((runtime.load(&plugin(PLUGIN))?, metrics))
}

/// A namespace of its own with the plugin's token Secret in it; returns it and the token.
async fn with_token(test: &str) -> anyhow::Result<(String, String)> {
    let client = client().await?;
    let ns = namespace(&client, test).await?;
    let token = format!("token-of-{ns}");
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "fixture-http-token" },
        "stringData": { "token": token },
    }))?;
    Api::<Secret>::namespaced(client, &ns).create(&PostParams::default(), &secret).await?;
    Ok((ns, token))
}

/// Runs `fetch` on the primary calling `url`: what it found, or the plugin's error.
async fn fetch(module: &Module, url: &str) -> anyhow::Result<Result<Vec<ExternalObject>, String>> {
    Ok(module.fetch(Arc::new(EmptyCache), &primary(url), &[]).await?)
}

/// The status and body the plugin saw in its one external object.
fn response(found: &[ExternalObject]) -> anyhow::Result<(u64, String)> {
    let [object] = found else { anyhow::bail!("expected one external object, got {found:?}") };
    let seen: serde_json::Value = serde_json::from_str(&object.object)?;
    Ok((seen["status"].as_u64().unwrap_or_default(), seen["body"].as_str().unwrap_or_default().to_string()))
}

#[tokio::test]
async fn fetch_reaches_the_granted_origin_with_the_secret_header_from_the_secret() -> anyhow::Result<()> {
    let service = granted();
    let (ns, token) = with_token("http-granted").await?;
    let (module, metrics) = load(&ns).await?;
    let path = format!("/echo/{ns}");

    let found = fetch(&module, &format!("{GRANTED_ORIGIN}{path}")).await?.map_err(anyhow::Error::msg)?;
    let (status, body) = response(&found)?;
    assert_eq!(status, 200, "{body}");
    let seen = service.seen(&path);
    assert_eq!(seen.len(), 1, "{seen:?}");
    // The host added the header from the Secret; the plugin never held the token.
    assert_eq!(seen[0].authorization.as_deref(), Some(format!("Bearer {token}").as_str()));
    let echoed: serde_json::Value = serde_json::from_str(&body)?;
    assert_eq!(echoed["authorization"], format!("Bearer {token}"));

    // apply-external may call out too: the desired object is POSTed.
    let desired = ExternalObject {
        dependent: "record".into(),
        key: "www".into(),
        id: None,
        object: r#"{"type":"A","value":"10.0.0.1"}"#.into(),
    };
    let url = format!("{GRANTED_ORIGIN}{path}/apply");
    let applied = module.apply_external(Arc::new(EmptyCache), &primary(&url), &desired, None).await?;
    let applied = applied.map_err(|e| anyhow::anyhow!("{e:?}"))?;
    assert_eq!(applied.id.as_deref(), Some("applied"));
    let posted = service.seen(&format!("{path}/apply"));
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert_eq!((posted[0].method.as_str(), posted[0].body.as_str()), ("POST", desired.object.as_str()));

    assert_eq!(metrics.http_requests_of(PLUGIN, GRANTED_ORIGIN, "200"), 2);
    let text = metrics.encode();
    let timed = format!(
        "wasmop_plugin_http_request_duration_seconds_count{{plugin=\"{PLUGIN}\",origin=\"{GRANTED_ORIGIN}\"}} 2"
    );
    assert!(text.contains(&timed), "{text}");
    Ok(())
}

#[tokio::test]
async fn a_missing_secret_fails_the_request_naming_it_and_nothing_is_sent() -> anyhow::Result<()> {
    let service = granted();
    let ns = namespace(&client().await?, "http-no-secret").await?;
    let (module, metrics) = load(&ns).await?;
    let path = format!("/echo/{ns}");
    let error = fetch(&module, &format!("{GRANTED_ORIGIN}{path}")).await?.unwrap_err();
    assert!(
        error.contains(&format!("secret header authorization: Secret {ns}/fixture-http-token does not exist")),
        "{error}"
    );
    assert_eq!(service.seen(&path), Vec::new());
    assert_eq!(metrics.http_requests_of(PLUGIN, GRANTED_ORIGIN, "error"), 1);
    Ok(())
}

#[tokio::test]
async fn a_request_to_an_undeclared_origin_fails_in_the_plugin_and_never_connects() -> anyhow::Result<()> {
    // Another host, and the granted host on another port.
    let elsewhere = HttpService::bind("127.0.0.1:0").await?;
    let next_door = HttpService::bind("127.26.0.1:0").await?;
    let (module, metrics) = load("default").await?;
    for service in [&elsewhere, &next_door] {
        let error = fetch(&module, &service.url("/echo/undeclared")).await?;
        assert_eq!(service.accepted(), 0, "a refused request reached {}", service.address());
        let error = error.unwrap_err();
        let expected = format!(
            "{} is not an origin the plugin's http grant names (granted: {GRANTED_ORIGIN}, {DOWN_ORIGIN})",
            service.url("")
        );
        assert!(error.contains(&expected), "{error}");
    }
    assert_eq!(metrics.http_requests_of(PLUGIN, "undeclared", "refused"), 2);
    Ok(())
}

#[tokio::test]
async fn reconcile_may_not_call_out_even_to_a_granted_origin() -> anyhow::Result<()> {
    let service = granted();
    let elsewhere = HttpService::bind("127.0.0.1:0").await?;
    let (module, metrics) = load("default").await?;
    let path = format!("/echo/from-reconcile-{}", std::process::id());
    for url in [format!("{GRANTED_ORIGIN}{path}"), elsewhere.url(&path)] {
        let request = ReconcileRequest {
            object: primary(&url),
            attempt: 0,
            last_attempt: false,
            dependents: Vec::new(),
            external: Vec::new(),
            inbound: None,
        };
        match module.reconcile(Arc::new(EmptyCache), &request).await? {
            Err(ReconcileError::Transient(message)) => assert!(
                message.contains(
                    "outgoing HTTP is allowed only in fetch, fetch-all, apply-external and delete-external, not in reconcile"
                ),
                "{message}"
            ),
            other => panic!("reconcile called out to {url}: {other:?}"),
        }
    }
    assert_eq!(service.seen(&path), Vec::new());
    assert_eq!(elsewhere.accepted(), 0);
    assert_eq!(metrics.http_requests_of(PLUGIN, GRANTED_ORIGIN, "refused"), 1);
    assert_eq!(metrics.http_requests_of(PLUGIN, "undeclared", "refused"), 1);
    Ok(())
}

#[tokio::test]
async fn a_service_answering_after_the_timeout_fails_the_call_at_the_timeout() -> anyhow::Result<()> {
    granted();
    let (ns, _) = with_token("http-slow").await?;
    let (module, metrics) = load(&ns).await?;
    // No answer at all, then an answer whose body stops coming.
    for (path, expected) in
        [("slow-head", "timed out waiting for the response"), ("slow-body", "HTTP response timeout")]
    {
        let started = Instant::now();
        let error = fetch(&module, &format!("{GRANTED_ORIGIN}/{path}/{ns}")).await?.unwrap_err();
        let took = started.elapsed();
        assert!(error.contains(expected), "{path}: {error}");
        // About the timeout: far from the call's wall-clock backstop (10 s) and the service's 20 s.
        assert!(took >= TIMEOUT && took < TIMEOUT * 3, "{path}: took {took:?}");
    }
    assert_eq!(metrics.http_requests_of(PLUGIN, GRANTED_ORIGIN, "timeout"), 2);
    Ok(())
}

#[tokio::test]
async fn a_service_that_is_down_fails_the_call() -> anyhow::Result<()> {
    let (module, metrics) = load("default").await?;
    let started = Instant::now();
    let error = fetch(&module, &format!("{DOWN_ORIGIN}/anything")).await?.unwrap_err();
    assert!(error.contains("connection refused"), "{error}");
    assert!(started.elapsed() < TIMEOUT, "took {:?}", started.elapsed());
    assert_eq!(metrics.http_requests_of(PLUGIN, DOWN_ORIGIN, "error"), 1);
    Ok(())
}

#[tokio::test]
async fn a_body_over_the_cap_fails_the_call() -> anyhow::Result<()> {
    granted();
    assert!(BIG as u64 > CAP);
    let (ns, _) = with_token("http-big").await?;
    let (module, metrics) = load(&ns).await?;
    // Streamed without a length: it fails once the cap is passed.
    let error = fetch(&module, &format!("{GRANTED_ORIGIN}/big/{ns}")).await?.unwrap_err();
    assert!(error.contains(&format!("HTTP response body size exceeds limit: {CAP} bytes")), "{error}");
    // With its length: it fails before its body is read.
    let error = fetch(&module, &format!("{GRANTED_ORIGIN}/big-declared/{ns}")).await?.unwrap_err();
    assert!(error.contains(&format!("the response body is larger than the granted {CAP} bytes")), "{error}");
    assert_eq!(metrics.http_requests_of(PLUGIN, GRANTED_ORIGIN, "too_large"), 2);
    Ok(())
}

#[tokio::test]
async fn requests_beyond_the_plugins_concurrency_wait_for_a_permit() -> anyhow::Result<()> {
    let service = granted();
    let (ns, _) = with_token("http-concurrency").await?;
    let (module, metrics) = load(&ns).await?;
    let path = format!("/hold/{ns}");
    let url = format!("{GRANTED_ORIGIN}{path}");
    let calls = (0..4).map(|_| fetch(&module, &url));
    for found in futures::future::join_all(calls).await {
        let (status, _) = response(&found?.map_err(anyhow::Error::msg)?)?;
        assert_eq!(status, 200);
    }
    // The grant allows 2 at once: the service never held more.
    assert_eq!(service.seen(&path).len(), 4);
    assert_eq!(service.most_held(&path), 2);
    assert_eq!(metrics.http_requests_of(PLUGIN, GRANTED_ORIGIN, "200"), 4);
    Ok(())
}

#[test]
fn a_plugin_that_imports_wasi_http_without_a_grant_is_not_loaded() {
    let runtime = observed_runtime(limits(), None).unwrap();
    let error = runtime.load(&plugin("fixture-http-ungranted")).unwrap_err();
    assert!(matches!(error, LoadError::HttpNotGranted { .. }), "{error:?}");
    assert!(error.to_string().contains("imports wasi:http but declares no http grant"), "{error}");
}
