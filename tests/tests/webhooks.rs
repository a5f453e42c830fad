//! Admission webhooks served from plugins, against the real kube-apiserver: the host serves
//! HTTPS on a loopback port with certificates it makes and keeps in a Secret, and writes the
//! webhook configurations (URL client config at 127.0.0.1) that send the API server's
//! admissions to it. The webpage sample, in Rust, Python and TypeScript, refuses an empty `html`
//! with its message and field and defaults `exposed`; `fixture-admission` (failure policy Fail) refuses a Gate when its
//! `validate` traps, naming the plugin, and `fixture-admission-ignore` admits it; a standby
//! replica serves admissions; the requests are counted under controller-runtime's names.
//!
//! Its own test binary: webhook configurations are cluster-scoped. Each test's have names of
//! their own (the host's namespace in them) and match the objects of the test's namespace only.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use wasmop::host::{Host, HostSettings};
use wasmop::metrics::Metrics;
use wasmop::settings::HostConfig;
use wasmop::webhook::certificate::{Certificates, Source, files::Files, managed::Managed};
use wasmop::webhook::configurations::{Endpoint, Target};
use wasmop_tests::{
    apply_file, client, kubeconfig, namespace, observed_runtime, plugin, settings, until, wasmop_binary, workspace_root,
};

/// A host serving its plugins' webhooks on a loopback port and writing their configurations.
struct Hooks {
    host: Arc<Host>,
    /// Where the endpoint listens, `https://127.0.0.1:PORT`.
    url: String,
    stop: CancellationToken,
}

impl Hooks {
    /// Runs `plugins` (their files' names) on `ns` with the webhooks served, as one replica with
    /// `settings`, with certificates the host makes and keeps in a Secret of `ns`.
    async fn start(client: &Client, ns: &str, plugins: &[&str], settings: HostSettings) -> anyhow::Result<Self> {
        let managed =
            Managed { namespace: ns.into(), name: "wasmop-webhook-certs".into(), names: vec!["127.0.0.1".into()] };
        Self::start_with(client, ns, plugins, settings, Source::Managed(managed)).await
    }

    /// Like [`Hooks::start`], with the certificates of `source`.
    async fn start_with(
        client: &Client,
        ns: &str,
        plugins: &[&str],
        settings: HostSettings,
        source: Source,
    ) -> anyhow::Result<Self> {
        // The host's log goes to the test's captured output.
        wasmop_tests::overlaps::Overlaps::in_process();
        let metrics = Metrics::new();
        let runtime = Arc::new(observed_runtime(Default::default(), Some(metrics.clone()))?);
        let host = Arc::new(Host::new(wasmop::informer::Clusters::new(client.clone()), runtime, metrics, settings));
        for name in plugins {
            let file = plugin(name);
            host.install(&file.display().to_string(), &file, std::fs::read(&file)?, None).await?;
        }
        host.loaded();
        let stop = CancellationToken::new();
        let certificates = Certificates::start(source, client, stop.clone()).await?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let endpoint = wasmop::webhook::Endpoint::on(listener, certificates.serving.server_config()?)?;
        let url = format!("https://{}", endpoint.local_addr());
        tokio::spawn(endpoint.serve(host.clone(), stop.clone()));
        let target = Target { endpoint: Endpoint::Url(url.clone()), namespace: Some(ns.into()) };
        let registration =
            wasmop::webhook::registration::run(host.clone(), client.clone(), target, certificates.bundle, stop.clone());
        tokio::spawn(registration);
        Ok(Self { host, url, stop })
    }

    /// Requests of `webhook` (`/validate/<plugin>`) answered with a review so far.
    fn answered(&self, webhook: &str) -> u64 {
        self.host.metrics().webhooks().requests_of(webhook, 200)
    }

    /// Stops the plugins (their configurations, of the plugins named `plugins`, are removed) and
    /// the endpoint.
    async fn stop(self, client: &Client, ns: &str, plugins: &[&str]) -> anyhow::Result<()> {
        self.host.stop_all().await;
        for name in plugins {
            configurations_gone(client, &format!("wasmop-{name}-{ns}")).await?;
        }
        self.stop.cancel();
        Ok(())
    }
}

/// Waits until the webhook configurations named `name` are gone.
async fn configurations_gone(client: &Client, name: &str) -> anyhow::Result<()> {
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let what = format!("the configurations {name} removed");
    until(
        &what,
        async || Ok((validating.get_opt(name).await?, mutating.get_opt(name).await?)),
        |(v, m)| v.is_none() && m.is_none(),
    )
    .await?;
    Ok(())
}

fn web_pages(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("sample.wasmop.dev", "v1", "WebPage");
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, "webpages"))
}

fn gates(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("fixture.wasmop.dev", "v1", "Gate");
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, "gates"))
}

fn page(name: &str, spec: Value) -> anyhow::Result<DynamicObject> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "sample.wasmop.dev/v1", "kind": "WebPage", "metadata": { "name": name }, "spec": spec
    }))?)
}

fn gate(name: &str, labels: Value) -> anyhow::Result<DynamicObject> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "fixture.wasmop.dev/v1", "kind": "Gate", "metadata": { "name": name, "labels": labels }
    }))?)
}

fn dry_run() -> PostParams {
    PostParams { dry_run: true, ..PostParams::default() }
}

/// The API server's refusal of `created`, or `None` when it was admitted.
fn refusal(created: Result<DynamicObject, kube::Error>) -> anyhow::Result<Option<kube::core::Status>> {
    match created {
        Ok(_) => Ok(None),
        Err(kube::Error::Api(status)) => Ok(Some(*status)),
        Err(other) => Err(other.into()),
    }
}

/// A WebPage with an empty `html` is refused at `kubectl apply` with the plugin's message and
/// field; one without `exposed` is stored with the plugin's default; both webhooks count their
/// requests. In each language the sample is written in (`file` is its build).
async fn the_webpage_plugin_refuses_an_empty_html_and_defaults_exposed(file: &str) -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/webpage/crd.yaml"), None).await?;
    let ns = namespace(&client, "webhooks-webpage").await?;
    let hooks = Hooks::start(&client, &ns, &[file], settings(&ns, HostConfig::default())).await?;
    let pages = web_pages(&client, &ns);

    // Once the API server has the configuration, the empty page is refused.
    let empty = page("empty", json!({ "html": "" }))?;
    let refused =
        until("the empty page refused", async || refusal(pages.create(&dry_run(), &empty).await), Option::is_some)
            .await?
            .expect("refused");
    assert!(refused.message.ends_with("spec.html: html must not be empty"), "{refused:?}");
    assert!(refused.message.contains("validate-0.webpage.wasmop.dev"), "{refused:?}");
    assert_eq!((refused.code, refused.reason.as_str()), (422, "Invalid"), "{refused:?}");
    let created = pages.create(&PostParams::default(), &empty).await;
    assert!(refusal(created)?.is_some(), "a create, not only a dry run, is refused");
    assert!(pages.get_opt("empty").await?.is_none());

    // Once the API server has the mutating configuration too, `exposed` is defaulted.
    let plain = page("plain", json!({ "html": "<h1>hi</h1>" }))?;
    until(
        "exposed defaulted on a dry run",
        async || Ok(pages.create(&dry_run(), &plain).await?),
        |page| page.data["spec"]["exposed"] == json!(false),
    )
    .await?;
    let stored = pages.create(&PostParams::default(), &plain).await?;
    assert_eq!(stored.data["spec"], json!({ "html": "<h1>hi</h1>", "exposed": false }));
    let shown = page("shown", json!({ "html": "<h1>hi</h1>", "exposed": true }))?;
    let stored = pages.create(&PostParams::default(), &shown).await?;
    assert_eq!(stored.data["spec"]["exposed"], json!(true), "a page that says is stored as it says");

    assert!(hooks.answered("/validate/webpage") >= 4, "every admission counted");
    assert!(hooks.answered("/mutate/webpage") >= 2, "every defaulting counted");
    let text = hooks.host.metrics().encode();
    assert!(text.contains("controller_runtime_webhook_latency_seconds_count{webhook=\"/validate/webpage\"}"), "{text}");
    hooks.stop(&client, &ns, &["webpage"]).await
}

wasmop_tests::in_every_language!(the_webpage_plugin_refuses_an_empty_html_and_defaults_exposed, "webpage");

/// A plugin whose `validate` traps, or runs past its deadline, refuses the request under the
/// failure policy Fail, in a message naming the plugin, and admits it under Ignore; a denial
/// names its field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trapping_plugin_refuses_under_fail_and_admits_under_ignore() -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/fixtures/admission/crd.yaml"), None).await?;
    let failing = namespace(&client, "webhooks-fail").await?;
    let ignoring = namespace(&client, "webhooks-ignore").await?;
    let fail =
        Hooks::start(&client, &failing, &["fixture-admission"], settings(&failing, HostConfig::default())).await?;
    let ignore =
        Hooks::start(&client, &ignoring, &["fixture-admission-ignore"], settings(&ignoring, HostConfig::default()))
            .await?;

    let trapping = gate("trap", json!({ "wasmop.dev/trap": "yes" }))?;
    let refused = until(
        "the trapping gate refused",
        async || refusal(gates(&client, &failing).create(&dry_run(), &trapping).await),
        Option::is_some,
    )
    .await?
    .expect("refused");
    assert!(refused.message.contains("webhook of plugin \"fixture-admission\" failed"), "{refused:?}");
    assert!(refused.message.contains("traps on purpose"), "the trap says why: {refused:?}");
    // A call that runs past its deadline fails as a trap does.
    let spinning = gate("spin", json!({ "wasmop.dev/spin": "yes" }))?;
    let refused = refusal(gates(&client, &failing).create(&dry_run(), &spinning).await)?.expect("refused");
    assert!(refused.message.contains("webhook of plugin \"fixture-admission\" failed"), "{refused:?}");
    assert!(refused.message.contains("deadline"), "the deadline says why: {refused:?}");
    let denied = gate("closed", json!({ "wasmop.dev/deny": "gates-are-closed" }))?;
    let refused = refusal(gates(&client, &failing).create(&PostParams::default(), &denied).await)?.expect("denied");
    assert!(refused.message.ends_with("metadata.labels: gates-are-closed"), "{refused:?}");
    gates(&client, &failing).create(&PostParams::default(), &gate("open", json!({}))?).await?;

    // Under Ignore the trap admits: once the webhook answers at all, the gate is stored.
    let answered = ignore.answered("/validate/fixture-admission-ignore");
    until(
        "the ignoring webhook called",
        async || {
            gates(&client, &ignoring).create(&dry_run(), &trapping).await?;
            Ok(ignore.answered("/validate/fixture-admission-ignore"))
        },
        |n| *n > answered,
    )
    .await?;
    let stored = gates(&client, &ignoring).create(&PostParams::default(), &trapping).await?;
    assert_eq!(stored.metadata.labels.unwrap_or_default()["wasmop.dev/trap"], "yes");

    fail.stop(&client, &failing, &["fixture-admission"]).await?;
    ignore.stop(&client, &ignoring, &["fixture-admission-ignore"]).await
}

/// A replica that does not lead (another holds the Lease) serves admissions all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_replica_serves_admissions() -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/webpage/crd.yaml"), None).await?;
    let ns = namespace(&client, "webhooks-standby").await?;
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(k8s_openapi::jiff::Timestamp::now());
    let held: Lease = serde_json::from_value(json!({
        "metadata": { "name": "webhooks-standby" },
        "spec": { "holderIdentity": "the-leader", "leaseDurationSeconds": 3600, "acquireTime": now, "renewTime": now }
    }))?;
    leases.create(&PostParams::default(), &held).await?;
    let lease = wasmop::leader::LeaseSettings {
        namespace: ns.clone(),
        name: "webhooks-standby".into(),
        identity: wasmop::leader::identity("standby"),
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(200),
        peers: None,
    };
    let release = CancellationToken::new();
    let (fence, election) = wasmop::leader::elect(client.clone(), lease, Metrics::new(), release.clone());
    let standby = HostSettings { fence, ..settings(&ns, HostConfig::default()) };
    let hooks = Hooks::start(&client, &ns, &["webpage"], standby).await?;
    let leading = || hooks.host.fence().gate().is_some_and(|gate| gate.is_open());
    assert!(!leading(), "this replica is a standby");

    let refused = until(
        "the empty page refused by the standby",
        async || refusal(web_pages(&client, &ns).create(&dry_run(), &page("empty", json!({ "html": "" }))?).await),
        Option::is_some,
    )
    .await?
    .expect("refused");
    assert!(refused.message.ends_with("spec.html: html must not be empty"), "{refused:?}");
    assert!(hooks.answered("/validate/webpage") >= 1);
    assert!(!leading(), "still a standby");

    hooks.stop(&client, &ns, &["webpage"]).await?;
    release.cancel();
    election.await?;
    Ok(())
}

/// A CA made in the test, and serving certificates for 127.0.0.1 it signs, written as files.
struct Issuer {
    dir: std::path::PathBuf,
    ca: rcgen::Issuer<'static, rcgen::KeyPair>,
    ca_pem: String,
}

impl Issuer {
    fn new(test: &str) -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join(format!("wasmop-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let key = rcgen::KeyPair::generate()?;
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_pem = params.self_signed(&key)?.pem();
        std::fs::write(dir.join("ca.pem"), &ca_pem)?;
        Ok(Self { dir, ca: rcgen::Issuer::new(params, key), ca_pem })
    }

    fn files(&self) -> Files {
        Files { cert: self.dir.join("tls.crt"), key: self.dir.join("tls.key"), ca: Some(self.dir.join("ca.pem")) }
    }

    /// Writes a new serving certificate and key, each by a rename, as a rewrite of a mounted
    /// Secret swaps them; its DER.
    fn rewrite(&self) -> anyhow::Result<Vec<u8>> {
        let key = rcgen::KeyPair::generate()?;
        let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])?.signed_by(&key, &self.ca)?;
        for (name, text) in [("tls.key", key.serialize_pem()), ("tls.crt", cert.pem())] {
            let written = self.dir.join(format!(".{name}.new"));
            std::fs::write(&written, text)?;
            std::fs::rename(&written, self.dir.join(name))?;
        }
        Ok(cert.der().to_vec())
    }
}

/// The certificate the endpoint at `url` serves now (DER), to a client trusting `ca`: a new one
/// each time, since a client resuming its TLS session is shown the certificate of the first.
async fn served(ca: &str, url: &str) -> anyhow::Result<Vec<u8>> {
    let root = reqwest::Certificate::from_pem(ca.as_bytes())?;
    let http = reqwest::Client::builder().add_root_certificate(root).tls_info(true).build()?;
    let response = http.post(format!("{url}/validate/webpage")).body("{}").send().await?;
    let info = response.extensions().get::<reqwest::tls::TlsInfo>().context("no TLS info")?;
    Ok(info.peer_certificate().context("no peer certificate")?.to_vec())
}

/// Serving certificates rewritten as files while admissions flow: the endpoint serves each new
/// one without a restart, and every admission in the meantime gets the plugin's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_rewritten_while_requests_flow_fails_none() -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/webpage/crd.yaml"), None).await?;
    let ns = namespace(&client, "webhooks-rotation").await?;
    let issuer = Issuer::new(&ns)?;
    let mut der = issuer.rewrite()?;
    let source = Source::Files(issuer.files());
    let hooks = Hooks::start_with(&client, &ns, &["webpage"], settings(&ns, HostConfig::default()), source).await?;
    let pages = web_pages(&client, &ns);
    let empty = page("empty", json!({ "html": "" }))?;
    until("the empty page refused", async || refusal(pages.create(&dry_run(), &empty).await), Option::is_some).await?;

    // Admissions flow, each expecting the plugin's refusal, until the rewrites are done.
    let flowing = CancellationToken::new();
    let flow = tokio::spawn({
        let (pages, empty, flowing) = (pages.clone(), empty.clone(), flowing.clone());
        async move {
            let (mut answered, mut wrong) = (0_u32, Vec::new());
            while !flowing.is_cancelled() {
                match refusal(pages.create(&dry_run(), &empty).await) {
                    Ok(Some(status)) if status.message.ends_with("spec.html: html must not be empty") => answered += 1,
                    other => wrong.push(format!("{other:?}")),
                }
            }
            (answered, wrong)
        }
    });
    assert_eq!(served(&issuer.ca_pem, &hooks.url).await?, der);
    for _ in 0..2 {
        der = issuer.rewrite()?;
        until("the rewritten certificate served", async || served(&issuer.ca_pem, &hooks.url).await, |now| *now == der)
            .await?;
    }
    flowing.cancel();
    let (answered, wrong) = flow.await?;
    assert!(wrong.is_empty(), "admissions that failed during the rewrites: {wrong:?}");
    assert!(answered > 0, "no admission flowed");
    hooks.stop(&client, &ns, &["webpage"]).await?;
    std::fs::remove_dir_all(&issuer.dir)?;
    Ok(())
}

/// Replicas share the certificates the host makes: of two that start at once, one creates the
/// Secret and the other reads it; one started with other names adds them, under the same CA.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_the_certificates_the_host_makes() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "webhooks-certificates").await?;
    let managed = Managed { namespace: ns.clone(), name: "hooks".into(), names: vec!["127.0.0.1".into()] };
    let stop = CancellationToken::new();
    let (a, b) = tokio::join!(
        Certificates::start(Source::Managed(managed.clone()), &client, stop.clone()),
        Certificates::start(Source::Managed(managed.clone()), &client, stop.clone()),
    );
    let (a, b) = (a?, b?);
    let bundle = a.bundle.borrow().clone();
    assert_eq!(bundle, *b.bundle.borrow(), "both replicas trust the same CA");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let secret = secrets.get("hooks").await?;
    assert_eq!(secret.data.clone().unwrap_or_default()["ca.crt"].0, bundle);

    let other = Managed { names: vec!["hooks.wasmop.svc".into()], ..managed };
    let c = Certificates::start(Source::Managed(other), &client, stop.clone()).await?;
    assert_eq!(*c.bundle.borrow(), bundle, "the same CA");
    let renewed = secrets.get("hooks").await?;
    let names = renewed.metadata.annotations.unwrap_or_default()["wasmop.dev/cert-names"].clone();
    assert_eq!(names, "127.0.0.1,hooks.wasmop.svc");
    assert_ne!(renewed.data.unwrap_or_default()["tls.crt"], secret.data.unwrap_or_default()["tls.crt"]);
    stop.cancel();
    Ok(())
}

/// A `wasmop run` process killed when dropped.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `wasmop run --webhook-addr --webhook-url`: the host makes its certificates in a Secret of
/// its namespace, writes the configurations and serves the admissions; without a URL or Service
/// nor certificate files it refuses to start, saying what it needs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wasmop_run_serves_webhooks_with_certificates_of_its_own() -> anyhow::Result<()> {
    use std::process::{Command, Stdio};
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/webpage/crd.yaml"), None).await?;
    let ns = namespace(&client, "webhooks-run").await?;
    let nameless = Command::new(wasmop_binary()?)
        .args(["run", "--plugin"])
        .arg(plugin("webpage"))
        .args(["--webhook-addr", "127.0.0.1:0"])
        .env("KUBECONFIG", kubeconfig())
        .output()?;
    let stderr = String::from_utf8_lossy(&nameless.stderr);
    assert!(!nameless.status.success(), "managed certificates without names are refused");
    assert!(stderr.contains("need --webhook-url or --webhook-service"), "{stderr}");

    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let _host = Running(
        Command::new(wasmop_binary()?)
            .args(["run", "--plugin"])
            .arg(plugin("webpage"))
            .args(["--namespace", &ns, "--webhook-addr", &format!("127.0.0.1:{port}")])
            .args(["--webhook-url", &format!("https://127.0.0.1:{port}")])
            .env("KUBECONFIG", kubeconfig())
            .env("POD_NAMESPACE", &ns)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?,
    );
    let pages = web_pages(&client, &ns);
    let empty = page("empty", json!({ "html": "" }))?;
    let refused = until(
        "the empty page refused through wasmop run",
        async || refusal(pages.create(&dry_run(), &empty).await),
        Option::is_some,
    )
    .await?
    .expect("refused");
    assert!(refused.message.ends_with("spec.html: html must not be empty"), "{refused:?}");
    let secret = Api::<Secret>::namespaced(client.clone(), &ns).get("wasmop-webhook-certs").await?;
    assert!(secret.data.unwrap_or_default().contains_key("ca.crt"));
    // Killed, the host removes nothing (other replicas would still serve): the test does.
    let name = format!("wasmop-webpage-{ns}");
    Api::<ValidatingWebhookConfiguration>::all(client.clone()).delete(&name, &Default::default()).await?;
    Api::<MutatingWebhookConfiguration>::all(client.clone()).delete(&name, &Default::default()).await?;
    Ok(())
}

/// Hot swaps while admissions flow at about 50 a second: each request runs on the version
/// current when it arrives, and none fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_swap_while_admissions_flow_fails_none() -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/webpage/crd.yaml"), None).await?;
    let ns = namespace(&client, "webhooks-swap").await?;
    let hooks = Hooks::start(&client, &ns, &["webpage"], settings(&ns, HostConfig::default())).await?;
    let pages = web_pages(&client, &ns);
    let empty = page("empty", json!({ "html": "" }))?;
    until("the empty page refused", async || refusal(pages.create(&dry_run(), &empty).await), Option::is_some).await?;

    let flowing = CancellationToken::new();
    let flow = tokio::spawn({
        let (pages, empty, flowing) = (pages.clone(), empty.clone(), flowing.clone());
        async move {
            let (mut answered, mut wrong) = (0_u32, Vec::new());
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            while !flowing.is_cancelled() {
                tick.tick().await;
                match refusal(pages.create(&dry_run(), &empty).await) {
                    Ok(Some(status)) if status.message.ends_with("spec.html: html must not be empty") => answered += 1,
                    other => wrong.push(format!("{other:?}")),
                }
            }
            (answered, wrong)
        }
    });
    // The same plugin owned by its file, swapped to another build of it and back.
    let owner = plugin("webpage").display().to_string();
    let first = hooks.host.module("webpage").expect("runs").digest().to_string();
    for (build, swaps) in [("fixture-webpage-odd", 1), ("webpage", 2), ("fixture-webpage-odd", 3)] {
        let file = plugin(build);
        hooks.host.install(&owner, &file, std::fs::read(&file)?, None).await?;
        let answered = hooks.answered("/validate/webpage");
        until(
            "admissions answered by the new version",
            async || Ok(hooks.answered("/validate/webpage")),
            |n| *n >= answered + 5,
        )
        .await?;
        let running = hooks.host.module("webpage").expect("runs").digest().to_string();
        assert_eq!(running != first, swaps % 2 == 1, "swap {swaps} runs {build}");
    }
    flowing.cancel();
    let (answered, wrong) = flow.await?;
    assert!(wrong.is_empty(), "admissions that failed during the swaps: {wrong:?}");
    assert!(answered >= 15, "only {answered} admissions flowed");
    hooks.stop(&client, &ns, &["webpage"]).await
}
