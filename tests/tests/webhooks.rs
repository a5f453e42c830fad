//! Admission webhooks served from plugins, against the real kube-apiserver: the host serves
//! HTTPS on a loopback port with certificates it makes and keeps in a Secret, and writes the
//! webhook configurations (URL client config at 127.0.0.1) that send the API server's
//! admissions to it. The webpage sample, in Rust, Python and TypeScript, refuses an empty `html`
//! with its message and field and defaults `exposed`; `fixture-admission` (failure policy Fail)
//! refuses a Gate when its `validate` traps, naming the plugin, and `fixture-admission-ignore` admits it; a standby
//! replica serves admissions; the requests are counted under controller-runtime's names. A
//! shadow candidate's answers are compared and counted, never returned; a recording plugin's
//! refusals become webhook fixtures that `wasmop test` and `wasmop replay` answer again.
//!
//! Conversions: a WebPage stored as v1 reads as v2 and back through the webpage plugin, the
//! CRD's conversion section pointing at the host by URL; a trapping conversion fails naming the
//! plugin; a rule of the CRD (CEL) refuses a page with no call to the validating webhook.
//!
//! Its own test binary: webhook configurations are cluster-scoped. Each test's have names of
//! their own (the host's namespace in them) and match the objects of the test's namespace only.
//! A CRD has one conversion section for the whole cluster: the tests whose host converts a CRD
//! take turns ([`turn`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::sync::OwnedMutexGuard;
use tokio_util::sync::CancellationToken;
use wasmop::host::{Host, HostSettings};
use wasmop::metrics::Metrics;
use wasmop::settings::HostConfig;
use wasmop::webhook::certificate::{Certificates, Source, files::Files, managed::Managed};
use wasmop::webhook::configurations::{self, Endpoint, Target};
use wasmop_tests::{
    apply_file, client, kubeconfig, namespace, observed_runtime, plugin, settings, until, wasmop_binary, workspace_root,
};

/// A host serving its plugins' webhooks on a loopback port and writing their configurations.
struct Hooks {
    host: Arc<Host>,
    /// Where the endpoint listens, `https://127.0.0.1:PORT`.
    url: String,
    stop: CancellationToken,
    /// The CRDs its plugins convert, each with this test's turn at its conversion section.
    converting: Vec<(String, OwnedMutexGuard<()>)>,
}

/// Waits for the turn of this test at the conversion section of the CRD `crd`: one for the
/// cluster, which a host that converts the CRD writes when it starts and takes back when it
/// stops. The turn lasts until the guard is dropped.
async fn turn(crd: &str) -> OwnedMutexGuard<()> {
    static TURNS: Mutex<BTreeMap<String, Arc<tokio::sync::Mutex<()>>>> = Mutex::new(BTreeMap::new());
    let turn = TURNS.lock().expect("not poisoned").entry(crd.to_string()).or_default().clone();
    turn.lock_owned().await
}

/// The conversion section of the CRD `crd`, as the API server has it.
async fn conversion_of(client: &Client, crd: &str) -> anyhow::Result<Value> {
    let crd = Api::<CustomResourceDefinition>::all(client.clone()).get(crd).await?;
    Ok(serde_json::to_value(crd.spec.conversion)?)
}

/// Waits until the CRD `crd` converts by the API version only (strategy `None`) again.
async fn conversion_taken_back(client: &Client, crd: &str) -> anyhow::Result<()> {
    until(
        &format!("the conversion of {crd} taken back"),
        async || conversion_of(client, crd).await,
        |c| c["strategy"] == "None",
    )
    .await?;
    Ok(())
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
        wasmop_tests::in_process::overlaps();
        let metrics = Metrics::new();
        let runtime = Arc::new(observed_runtime(Default::default(), Some(metrics.clone()))?);
        let host = Arc::new(Host::new(wasmop::informer::Clusters::new(client.clone()), runtime, metrics, settings));
        let mut names = Vec::new();
        for file in plugins.iter().map(|name| plugin(name)) {
            names.push(host.install(&file.display().to_string(), &file, std::fs::read(&file)?, None).await?.name);
        }
        host.loaded();
        let mut converting = Vec::new();
        for name in &names {
            let config = host.module(name).context("the plugin runs")?.config().clone();
            if wasmop::inspect::converts(&config) {
                let crd = configurations::crd_name(&config.primary);
                let turn = turn(&crd).await;
                converting.push((crd, turn));
            }
        }
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
        Ok(Self { host, url, stop, converting })
    }

    /// Requests of `webhook` (`/validate/<plugin>`) answered with a review so far.
    fn answered(&self, webhook: &str) -> u64 {
        self.host.metrics().webhooks().requests_of(webhook, 200)
    }

    /// Stops the plugins (their configurations are removed, their conversions taken back) and
    /// the endpoint.
    async fn stop(self, client: &Client, ns: &str, plugins: &[&str]) -> anyhow::Result<()> {
        self.host.stop_all().await;
        for name in plugins {
            configurations_gone(client, &format!("wasmop-{name}-{ns}")).await?;
        }
        for (crd, _turn) in &self.converting {
            conversion_taken_back(client, crd).await?;
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

fn web_pages_v2(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("sample.wasmop.dev", "v2", "WebPage");
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, "webpages"))
}

fn gates(client: &Client, ns: &str) -> Api<DynamicObject> {
    gates_of(client, ns, "v1")
}

fn gates_of(client: &Client, ns: &str, version: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("fixture.wasmop.dev", version, "Gate");
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

wasmop_tests::in_every_language!(the_webpage_plugin_refuses_an_empty_html_and_defaults_exposed, "webpage", and go);

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
    let crd = "webpages.sample.wasmop.dev";
    let _turn = turn(crd).await;
    let host = Running(
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
    let url = format!("https://127.0.0.1:{port}/convert/webpage");
    until(
        "the conversion written",
        async || conversion_of(&client, crd).await,
        |c| c["webhook"]["clientConfig"]["url"] == url.as_str(),
    )
    .await?;
    // Killed, the host removes nothing (other replicas would still serve): the test does, the
    // conversion too (the API server's garbage collector reads WebPages through it).
    drop(host);
    let name = format!("wasmop-webpage-{ns}");
    Api::<ValidatingWebhookConfiguration>::all(client.clone()).delete(&name, &Default::default()).await?;
    Api::<MutatingWebhookConfiguration>::all(client.clone()).delete(&name, &Default::default()).await?;
    let none = json!({ "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                       "metadata": { "name": crd }, "spec": { "conversion": { "strategy": "None" } } });
    let params = PatchParams::apply(wasmop::webhook::registration::MANAGER).force();
    Api::<CustomResourceDefinition>::all(client.clone()).patch(crd, &params, &Patch::Apply(&none)).await?;
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

/// A plugin's shadow candidate is asked the admissions its live version answers: each answer is
/// compared with the live one and counted, and only the live answer reaches the API server. The
/// candidate (`fixture-admission-strict`) denies the strict Gate the live version admits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidates_verdicts_are_compared_and_counted_never_returned() -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/fixtures/admission/crd.yaml"), None).await?;
    let ns = namespace(&client, "webhooks-shadow").await?;
    let hooks = Hooks::start(&client, &ns, &["fixture-admission"], settings(&ns, HostConfig::default())).await?;
    let live = plugin("fixture-admission");
    let candidate = plugin("fixture-admission-strict");
    hooks.host.propose(&live.display().to_string(), &candidate, std::fs::read(&candidate)?, None).await?;
    let webhook = "/validate/fixture-admission";
    let answers = |same| hooks.host.metrics().shadow().answers_of("fixture-admission", webhook, same);
    let plain = gate("plain", json!({}))?;
    until(
        "the webhook called",
        async || {
            gates(&client, &ns).create(&dry_run(), &plain).await?;
            Ok(hooks.answered(webhook))
        },
        |n| *n > 0,
    )
    .await?;
    until("the candidate's same answer counted", async || Ok(answers(true)), |n| *n > 0).await?;
    assert_eq!(answers(false), 0, "the two versions admit a plain gate alike");

    // The live version admits the strict gate: it is stored, whatever the candidate says.
    let strict = gate("strict", json!({ "wasmop.dev/strict": "yes" }))?;
    let stored = gates(&client, &ns).create(&PostParams::default(), &strict).await?;
    assert_eq!(stored.metadata.labels.unwrap_or_default()["wasmop.dev/strict"], "yes");
    until("the candidate's other answer counted", async || Ok(answers(false)), |n| *n == 1).await?;
    let same = answers(true);
    let denied = gate("closed", json!({ "wasmop.dev/deny": "gates-are-closed" }))?;
    let refused = refusal(gates(&client, &ns).create(&PostParams::default(), &denied).await)?.expect("denied");
    assert!(refused.message.ends_with("metadata.labels: gates-are-closed"), "{refused:?}");
    until("the candidate's same denial counted", async || Ok(answers(true)), |n| *n > same).await?;
    assert_eq!(answers(false), 1, "only the strict gate differed");
    hooks.stop(&client, &ns, &["fixture-admission"]).await
}

/// A recording plugin's refused admission is written as a webhook fixture beside its records
/// (`--record DIR`; by default the refusals, as failed reconciles are), redacted, and `wasmop
/// test` answers it again alike with the plugin's Rust and Python builds, `wasmop replay` with
/// its TypeScript build.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_admission_is_recorded_as_a_fixture_that_wasmop_test_answers_again() -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/webpage/crd.yaml"), None).await?;
    let ns = namespace(&client, "webhooks-record").await?;
    let dir = std::env::temp_dir().join(format!("wasmop-webhook-records-{ns}"));
    let mut recording = settings(&ns, HostConfig::default());
    recording.defaults.record_dir = Some(dir.clone());
    let hooks = Hooks::start(&client, &ns, &["webpage"], recording).await?;
    let pages = web_pages(&client, &ns);
    let empty = page("empty", json!({ "html": "" }))?;
    until("the empty page refused", async || refusal(pages.create(&dry_run(), &empty).await), Option::is_some).await?;
    pages.create(&PostParams::default(), &page("fine", json!({ "html": "<p>fine</p>" }))?).await?;
    refusal(pages.create(&PostParams::default(), &empty).await)?.expect("refused");
    let fixtures = || -> Vec<std::path::PathBuf> {
        let entries = std::fs::read_dir(dir.join("webpage")).into_iter().flatten().flatten();
        entries.map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "yaml")).collect()
    };
    let recorded = until("the refusal recorded", async || Ok(fixtures()), |files| !files.is_empty()).await?;
    let text = std::fs::read_to_string(&recorded[0])?;
    assert!(text.contains("webhook: validating") && text.contains("operation: CREATE"), "{text}");
    assert!(text.contains("field: spec.html"), "the answer is expected: {text}");
    assert!(recorded[0].display().to_string().contains(&format!("{ns}-empty-validate-failed")), "{recorded:?}");
    hooks.stop(&client, &ns, &["webpage"]).await?;
    assert!(fixtures().iter().all(|f| !f.display().to_string().contains("-fine-")), "an admitted page is not recorded");

    for build in ["webpage", "webpage-py"] {
        let output = std::process::Command::new(wasmop_binary()?)
            .arg("test")
            .arg(plugin(build))
            .arg(&recorded[0])
            .env("RUST_LOG", "off")
            .output()?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{build}: {stdout}{}", String::from_utf8_lossy(&output.stderr));
        assert!(stdout.ends_with("# 1 fixtures, all held\n"), "{build}: {stdout}");
    }
    // `wasmop replay` answers a recorded webhook call again too.
    let replayed = std::process::Command::new(wasmop_binary()?)
        .arg("replay")
        .arg(&recorded[0])
        .arg("--plugin")
        .arg(plugin("webpage-ts"))
        .env("RUST_LOG", "off")
        .output()?;
    let stdout = String::from_utf8_lossy(&replayed.stdout);
    assert!(replayed.status.success(), "{stdout}{}", String::from_utf8_lossy(&replayed.stderr));
    assert!(stdout.contains("result: ok"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// A WebPage stored as v1 reads as v2 and back, converted by the webpage plugin through the
/// host: the CRD's conversion section points at the host's `/convert/webpage` by URL with the
/// host's CA, and v1 stays the version stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_page_stored_as_v1_reads_as_v2_and_back() -> anyhow::Result<()> {
    let client = client().await?;
    let crd = "webpages.sample.wasmop.dev";
    apply_file(&client, &workspace_root().join("plugins/webpage/crd.yaml"), None).await?;
    let ns = namespace(&client, "webhooks-conversion").await?;
    let hooks = Hooks::start(&client, &ns, &["webpage"], settings(&ns, HostConfig::default())).await?;
    let url = format!("{}/convert/webpage", hooks.url);
    let conversion = until(
        "the conversion written",
        async || conversion_of(&client, crd).await,
        |c| c["webhook"]["clientConfig"]["url"] == url.as_str(),
    )
    .await?;
    assert_eq!(conversion["strategy"], "Webhook");
    assert_eq!(conversion["webhook"]["conversionReviewVersions"], json!(["v1"]));
    assert!(conversion["webhook"]["clientConfig"]["caBundle"].is_string(), "{conversion}");

    // Created as v1, read as v2 once the API server converts through the host.
    let (v1, v2) = (web_pages(&client, &ns), web_pages_v2(&client, &ns));
    v1.create(&PostParams::default(), &page("one", json!({ "html": "<h1>one</h1>", "exposed": true }))?).await?;
    let read = until(
        "page one read as v2",
        async || Ok(v2.get("one").await.ok()),
        |read| read.as_ref().is_some_and(|page| page.data["spec"].get("content").is_some()),
    )
    .await?
    .expect("read");
    assert_eq!(read.types.as_ref().map(|t| t.api_version.as_str()), Some("sample.wasmop.dev/v2"));
    assert_eq!(read.data["spec"], json!({ "content": { "html": "<h1>one</h1>" }, "exposure": "Public" }));

    // Created as v2 (stored as v1, defaulted and validated as v1), read as v1, and back.
    let two: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "sample.wasmop.dev/v2", "kind": "WebPage", "metadata": { "name": "two" },
        "spec": { "content": { "html": "<p>two</p>" } }
    }))?;
    let created = v2.create(&PostParams::default(), &two).await?;
    assert_eq!(created.data["spec"], json!({ "content": { "html": "<p>two</p>" }, "exposure": "Private" }));
    assert_eq!(v1.get("two").await?.data["spec"], json!({ "html": "<p>two</p>", "exposed": false }));
    // A change through v2 (a merge patch: the host reconciles the page meanwhile) reads in v1.
    let exposed = json!({ "spec": { "exposure": "Public" } });
    v2.patch("two", &PatchParams::default(), &Patch::Merge(&exposed)).await?;
    assert_eq!(v1.get("two").await?.data["spec"], json!({ "html": "<p>two</p>", "exposed": true }));
    // A v2 page with an empty html is refused by the validating webhook, at v1's field.
    let empty: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "sample.wasmop.dev/v2", "kind": "WebPage", "metadata": { "name": "empty" },
        "spec": { "content": { "html": "" } }
    }))?;
    let refused = refusal(v2.create(&dry_run(), &empty).await)?.expect("refused");
    assert!(refused.message.ends_with("spec.html: html must not be empty"), "{refused:?}");

    let stored = Api::<CustomResourceDefinition>::all(client.clone()).get(crd).await?;
    let stored_versions = stored.status.and_then(|s| s.stored_versions).unwrap_or_default();
    assert_eq!(stored_versions, ["v1"], "every page is stored as v1");
    assert!(hooks.answered("/convert/webpage") >= 4, "the conversions counted");
    hooks.stop(&client, &ns, &["webpage"]).await
}

/// A conversion by a plugin that traps fails the request with a message naming the plugin;
/// the objects it does not trap on convert.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversion_by_a_trapping_plugin_fails_naming_the_plugin() -> anyhow::Result<()> {
    let client = client().await?;
    let crd = "gates.fixture.wasmop.dev";
    apply_file(&client, &workspace_root().join("plugins/fixtures/admission/crd.yaml"), None).await?;
    let ns = namespace(&client, "webhooks-conversion-trap").await?;
    let hooks = Hooks::start(&client, &ns, &["fixture-admission"], settings(&ns, HostConfig::default())).await?;
    let url = format!("{}/convert/fixture-admission", hooks.url);
    until(
        "the conversion written",
        async || conversion_of(&client, crd).await,
        |c| c["webhook"]["clientConfig"]["url"] == url.as_str(),
    )
    .await?;
    gates(&client, &ns).create(&PostParams::default(), &gate("plain", json!({}))?).await?;
    let trapping = gate("trapping", json!({ "wasmop.dev/trap-conversion": "yes" }))?;
    gates(&client, &ns).create(&PostParams::default(), &trapping).await?;

    let v2 = gates_of(&client, &ns, "v2");
    let plain =
        until("the plain gate read as v2 through the plugin", async || Ok(v2.get("plain").await.ok()), |g| g.is_some())
            .await?
            .expect("read");
    assert_eq!(plain.types.map(|t| t.api_version), Some("fixture.wasmop.dev/v2".to_string()));
    let converted = hooks.answered("/convert/fixture-admission");
    assert!(converted >= 1, "the plugin converted the plain gate");
    let failed = match v2.get("trapping").await {
        Ok(gate) => anyhow::bail!("the trapping gate converted: {gate:?}"),
        Err(kube::Error::Api(status)) => status,
        Err(other) => return Err(other.into()),
    };
    assert!(failed.message.contains("conversion webhook of plugin \"fixture-admission\" failed"), "{failed:?}");
    assert!(failed.message.contains("traps on purpose converting gate"), "the trap says why: {failed:?}");
    assert!(gates(&client, &ns).get("trapping").await.is_ok(), "as v1, stored, it reads without a conversion");
    hooks.stop(&client, &ns, &["fixture-admission"]).await
}

/// A rule of the CRD generated from the webpage plugin's types (CEL: the HTML fits in a
/// ConfigMap) refuses a page in the API server itself: the validating webhook is not called.
/// The defaulting one is: the API server checks an object's schema after its mutating webhooks
/// and before its validating ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_rule_refuses_without_calling_the_validating_webhook() -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/webpage/crd.yaml"), None).await?;
    let ns = namespace(&client, "webhooks-crd-rule").await?;
    let hooks = Hooks::start(&client, &ns, &["webpage"], settings(&ns, HostConfig::default())).await?;
    let pages = web_pages(&client, &ns);
    // Once the webhooks are called, an empty page is the plugin's to refuse.
    let empty = page("empty", json!({ "html": "" }))?;
    until("the empty page refused", async || refusal(pages.create(&dry_run(), &empty).await), Option::is_some).await?;
    until(
        "exposed defaulted",
        async || Ok(pages.create(&dry_run(), &page("plain", json!({ "html": "hi" }))?).await?),
        |p| p.data["spec"]["exposed"] == json!(false),
    )
    .await?;

    let validated = hooks.answered("/validate/webpage");
    let huge = page("huge", json!({ "html": "x".repeat(1024 * 1024 + 1) }))?;
    let refused = refusal(pages.create(&PostParams::default(), &huge).await)?.expect("refused");
    let shown: String = refused.message.chars().take(300).collect();
    assert!(refused.message.contains("the HTML must fit in a ConfigMap (1 MiB)"), "{shown}");
    assert_eq!((refused.code, refused.reason.as_str()), (422, "Invalid"));
    assert!(!refused.message.contains("webpage.wasmop.dev"), "no webhook refused it");
    assert_eq!(hooks.answered("/validate/webpage"), validated, "the validating webhook was not called");
    // One byte less fits: the webhooks are called and admit it.
    let fits = page("fits", json!({ "html": "x".repeat(1024 * 1024) }))?;
    pages.create(&dry_run(), &fits).await?;
    assert_eq!(hooks.answered("/validate/webpage"), validated + 1, "the validating webhook admitted it");
    hooks.stop(&client, &ns, &["webpage"]).await
}
