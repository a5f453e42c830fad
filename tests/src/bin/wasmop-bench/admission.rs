//! Part `admission`: the webpage plugin's admission webhooks (`validate` refusing an empty
//! `spec.html`, `default` setting `spec.exposed`) served by a wasmop host, against the same two
//! webhooks written natively (`wasmop-native webhook`: axum, kube's `AdmissionReview` types), in
//! the same run, through the API server:
//!
//! - both serve HTTPS with the same certificate (a CA and a serving certificate for 127.0.0.1
//!   the host's issuer makes, as PEM files) and the same rustls configuration, on
//!   [`super::knobs::threads`] runtime worker threads each;
//! - the native side's webhook configurations are copies of those the host writes for the
//!   plugin (the same rules, failure policy, timeout), pointing at it and at a namespace of its
//!   own;
//! - each side in turn (the order alternating by round, `BENCH_ROUNDS`), after 100 unmeasured
//!   requests, takes `BENCH_ADMISSIONS` (default 2,000) server-side dry-run creates of a WebPage
//!   without `exposed`, `BENCH_ADMISSION_CONCURRENCY` (default 4) at once: each goes through the
//!   mutating and the validating webhook and comes back defaulted, which is checked;
//! - the figures: the latency of each create as the client sees it (p50, p99), and the CPU time
//!   of the webhook's process per request (`/proc/<pid>/stat`, over the measured requests).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};
use wasmop::webhook::certificate::issue;

use super::process::{Controller, Side};
use super::sides::in_round_order;

/// Unmeasured requests before each side's measured ones.
const WARM_UP: usize = 100;

/// One side's measured requests, over every round.
#[derive(Default)]
struct Measured {
    latencies: Vec<Duration>,
    cpu_seconds: f64,
}

impl Measured {
    fn percentile(&self, p: f64) -> Duration {
        self.latencies[((self.latencies.len() - 1) as f64 * p).round() as usize]
    }

    fn cpu_us_per_request(&self) -> f64 {
        self.cpu_seconds * 1e6 / self.latencies.len().max(1) as f64
    }
}

/// A free loopback address.
fn free_address() -> anyhow::Result<SocketAddr> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

/// The certificate both sides serve, for 127.0.0.1: the CA's, the certificate's and the key's
/// files.
fn certificate(dir: &Path) -> anyhow::Result<(PathBuf, PathBuf, PathBuf)> {
    std::fs::create_dir_all(dir)?;
    let now = issue::now();
    let ca = issue::ca(now)?;
    let leaf = issue::leaf(&ca.key, &["127.0.0.1".to_string()], now)?;
    let files = (dir.join("ca.crt"), dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&files.0, &ca.cert)?;
    std::fs::write(&files.1, &leaf.cert)?;
    std::fs::write(&files.2, &leaf.key)?;
    Ok(files)
}

fn web_pages(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("sample.wasmop.dev", "v1", "WebPage");
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, "webpages"))
}

fn page(html: &str) -> anyhow::Result<DynamicObject> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "sample.wasmop.dev/v1", "kind": "WebPage", "metadata": { "name": "page" },
        "spec": { "html": html },
    }))?)
}

fn dry_run() -> PostParams {
    PostParams { dry_run: true, ..PostParams::default() }
}

/// Waits until the API server sends the WebPages of `pages`' namespace to a webhook: an empty
/// `html` is refused with the webpage plugin's message.
async fn until_refused(pages: &Api<DynamicObject>) -> anyhow::Result<()> {
    let empty = page("")?;
    wasmop_tests::until(
        "an empty WebPage refused by the webhook",
        async || match pages.create(&dry_run(), &empty).await {
            Ok(_) => Ok(false),
            Err(kube::Error::Api(status)) => Ok(status.message.contains("html must not be empty")),
            Err(other) => Err(other.into()),
        },
        |refused| *refused,
    )
    .await?;
    Ok(())
}

/// Copies the host's webhook configurations of the webpage plugin in `ns` for the native side:
/// named `name`, pointing at `url` (`/validate`, `/mutate`) and matching `native_ns` instead.
async fn copy_configurations(
    client: &Client,
    (ns, host_url): (&str, &str),
    (native_ns, url): (&str, &str),
    name: &str,
) -> anyhow::Result<()> {
    let host_name = format!("wasmop-webpage-{ns}");
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let written = wasmop_tests::until(
        "the host's webhook configurations written",
        async || Ok((validating.get_opt(&host_name).await?, mutating.get_opt(&host_name).await?)),
        |(v, m)| v.is_some() && m.is_some(),
    )
    .await?;
    let (Some(v), Some(m)) = written else { unreachable!("waited for both") };
    for (kind, webhooks) in
        [("ValidatingWebhookConfiguration", json!(v.webhooks)), ("MutatingWebhookConfiguration", json!(m.webhooks))]
    {
        let text = webhooks
            .to_string()
            .replace(&format!("{host_url}/validate/webpage"), &format!("{url}/validate"))
            .replace(&format!("{host_url}/mutate/webpage"), &format!("{url}/mutate"))
            .replace(&format!("\"{ns}\""), &format!("\"{native_ns}\""));
        let copy = json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": { "name": name },
            "webhooks": serde_json::from_str::<Value>(&text)?,
        });
        wasmop_tests::apply(client, copy, None).await?;
    }
    Ok(())
}

/// `count` dry-run creates of a WebPage without `exposed`, `concurrency` at once: each one's
/// latency, failing unless each comes back with `exposed` defaulted.
async fn creates(pages: &Api<DynamicObject>, count: usize, concurrency: usize) -> anyhow::Result<Vec<Duration>> {
    let plain = page("<h1>hi</h1>")?;
    let timed = futures::stream::iter(0..count)
        .map(|_| async {
            let started = Instant::now();
            let created = pages.create(&dry_run(), &plain).await?;
            let elapsed = started.elapsed();
            anyhow::ensure!(created.data["spec"]["exposed"] == json!(false), "not defaulted: {:?}", created.data);
            Ok(elapsed)
        })
        .buffer_unordered(concurrency)
        .collect::<Vec<anyhow::Result<Duration>>>()
        .await;
    timed.into_iter().collect()
}

/// Runs the part; returns its JSON and markdown.
pub async fn admission(
    client: &Client,
    kubeconfig: &Path,
    requests: usize,
    concurrency: usize,
    rounds: usize,
) -> anyhow::Result<(Value, String)> {
    let root = wasmop_tests::workspace_root();
    wasmop_tests::apply_file(client, &root.join("plugins/webpage/crd.yaml"), None).await?;
    let (ca, cert, key) = certificate(&root.join("target/bench/admission"))?;
    let (host_address, native_address) = (free_address()?, free_address()?);
    let (host_url, native_url) = (format!("https://{host_address}"), format!("https://{native_address}"));
    let host_ns = wasmop_tests::namespace(client, "bench-admission-wasmop").await?;
    let native_ns = wasmop_tests::namespace(client, "bench-admission-native").await?;
    let path = |p: &Path| p.display().to_string();
    let args = [
        "--plugin".to_string(),
        wasmop_tests::plugin("webpage").display().to_string(),
        "--webhook-addr".into(),
        host_address.to_string(),
        "--webhook-url".into(),
        host_url.clone(),
        "--webhook-cert".into(),
        path(&cert),
        "--webhook-key".into(),
        path(&key),
        "--webhook-ca".into(),
        path(&ca),
    ];
    let host = Controller::start(Side::Wasmop, &host_ns, kubeconfig, &args)?;
    let native = Controller::native_webhook(native_address, &cert, &key)?;
    let native_name = format!("bench-native-webpage-{native_ns}");
    copy_configurations(client, (&host_ns, &host_url), (&native_ns, &native_url), &native_name).await?;
    let (host_pages, native_pages) = (web_pages(client, &host_ns), web_pages(client, &native_ns));
    until_refused(&host_pages).await?;
    until_refused(&native_pages).await?;

    let (mut wasmop, mut native_side) = (Measured::default(), Measured::default());
    for round in 1..=rounds {
        for side in in_round_order(vec![Side::Wasmop, Side::Native], round) {
            let (pages, controller, measured) = match side {
                Side::Native => (&native_pages, &native, &mut native_side),
                _ => (&host_pages, &host, &mut wasmop),
            };
            creates(pages, WARM_UP, concurrency).await?;
            let cpu = controller.cpu_seconds()?;
            measured.latencies.extend(creates(pages, requests, concurrency).await?);
            measured.cpu_seconds += controller.cpu_seconds()? - cpu;
        }
    }
    // Each create is one defaulting and one validation.
    let answered = host.metric("controller_runtime_webhook_requests_total{")?;
    let expected = 2 * rounds * (requests + WARM_UP);
    anyhow::ensure!(answered >= expected as f64, "the host answered {answered} webhook requests, not {expected}");
    host.stop().await?;
    native.stop().await?;
    let name = format!("wasmop-webpage-{host_ns}");
    for name in [name.as_str(), native_name.as_str()] {
        Api::<ValidatingWebhookConfiguration>::all(client.clone()).delete(name, &DeleteParams::default()).await?;
        Api::<MutatingWebhookConfiguration>::all(client.clone()).delete(name, &DeleteParams::default()).await?;
    }

    wasmop.latencies.sort();
    native_side.latencies.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    let (p50, p99) = (
        ratio(ms(wasmop.percentile(0.5)), ms(native_side.percentile(0.5))),
        ratio(ms(wasmop.percentile(0.99)), ms(native_side.percentile(0.99))),
    );
    let cpu = ratio(wasmop.cpu_us_per_request(), native_side.cpu_us_per_request());
    let mut md = format!(
        "## Admission\n\nThe webpage plugin's webhooks (mutating `default`, then validating `validate`) in a wasmop \
         host against the same two written natively (axum, kube's `AdmissionReview` types), the same certificate \
         and TLS, {threads} worker threads each: {requests} server-side dry-run creates of a WebPage per side and \
         round, {concurrency} at once, {rounds} round(s), as the client sees them through the API server; CPU of \
         the webhook's process per request.\n\n| side | requests | p50 ms | p99 ms | CPU us/request |\n|---|---|---|---|---|\n",
        threads = super::knobs::threads(),
    );
    let mut json = serde_json::Map::new();
    for (label, m) in [("wasmop", &wasmop), ("native", &native_side)] {
        md.push_str(&format!(
            "| {label} | {} | {:.2} | {:.2} | {:.0} |\n",
            m.latencies.len(),
            ms(m.percentile(0.5)),
            ms(m.percentile(0.99)),
            m.cpu_us_per_request()
        ));
        json.insert(
            label.into(),
            json!({ "requests": m.latencies.len(), "p50Ms": ms(m.percentile(0.5)), "p99Ms": ms(m.percentile(0.99)),
                    "cpuUsPerRequest": m.cpu_us_per_request() }),
        );
    }
    md.push_str(&format!(
        "\nwasmop / native: p50 {p50:.2}x, p99 {p99:.2}x (goal 1.2x), CPU per request {cpu:.2}x (goal 1.5x).\n"
    ));
    json.insert("ratios".into(), json!({ "p50": p50, "p99": p99, "cpuPerRequest": cpu }));
    Ok((Value::Object(json), md))
}
