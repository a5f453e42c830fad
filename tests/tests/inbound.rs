//! Inbound events against the real kube-apiserver: `POST /plugins/<name>/events` with the
//! plugin's bearer token reconciles exactly the primaries its `map-inbound` names, with the
//! payload cached per primary for `reconcile`; requests without the token, with a wrong one, over
//! 1 MiB or not JSON are refused (401, 413, 400), counted, and never reach the plugin. The
//! listener of `wasmop run` serves TLS; plugins installed by `ReconcilerPlugin` resources take
//! events as soon as they run, and keep taking them across a hot reload. With several replicas,
//! an event posted to a shard member that does not own its primaries, or to a standby, reaches
//! the replica that runs them (over TLS too), and is answered 202 once queued there.
//!
//! The plugin is `fixture-inbound`: ConfigMaps labelled `wasmop.dev/fixture=inbound`, each
//! reconcile counting itself in the annotation `fixture.wasmop.dev/reconciles` and recording the
//! cached payload in `fixture.wasmop.dev/inbound`.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use wasmop::host::Host;
use wasmop::inbound::Endpoint;
use wasmop::listener::tls::TlsFiles;
use wasmop::metrics::Metrics;
use wasmop::settings::{HostConfig, Settings};
use wasmop_tests::{
    ResourceHost, apply_file, bare_host, client, kubeconfig, module_map, namespace, plugin, reconciler_plugin,
    settings, until, wasmop_binary, workspace_root,
};

const PLUGIN: &str = "fixture-inbound";
const RECONCILES: &str = "fixture.wasmop.dev/reconciles";
const PAYLOAD: &str = "fixture.wasmop.dev/inbound";
const TOKEN: &str = "s3cret-token";
/// The operator's word that the plugin may have its token Secret read for it.
const ALLOWED: &str = "allowedSecrets: [{ name: inbound-token }]";

/// The overrides that allow the plugin its token Secret.
fn allowed() -> anyhow::Result<Settings> {
    Ok(serde_saphyr::from_str(ALLOWED)?)
}

/// The plugin's token Secret (its value ends in a newline, as `echo` writes it) and ConfigMaps
/// `names` labelled for the plugin, in `ns`.
async fn seed(client: &Client, ns: &str, names: &[&str]) -> anyhow::Result<Api<ConfigMap>> {
    let secret = Secret {
        metadata: ObjectMeta { name: Some("inbound-token".into()), ..ObjectMeta::default() },
        string_data: Some(BTreeMap::from([("token".to_string(), format!("{TOKEN}\n"))])),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(client.clone(), ns).create(&PostParams::default(), &secret).await?;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    for name in names {
        maps.create(&PostParams::default(), &primary(name)).await?;
    }
    Ok(maps)
}

fn primary(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([("wasmop.dev/fixture".to_string(), "inbound".to_string())])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("value".to_string(), "1".to_string())])),
        ..ConfigMap::default()
    }
}

/// How often the ConfigMap was reconciled, and the payload its last reconcile saw (`Null` for
/// none).
fn seen(map: &ConfigMap) -> (u64, Value) {
    let annotations = map.metadata.annotations.clone().unwrap_or_default();
    let reconciles = annotations.get(RECONCILES).and_then(|n| n.parse().ok()).unwrap_or(0);
    let payload = annotations.get(PAYLOAD).filter(|p| !p.is_empty()).map_or(Value::Null, |p| {
        serde_json::from_str(p).unwrap_or_else(|e| panic!("the recorded payload {p:?} is JSON: {e}"))
    });
    (reconciles, payload)
}

/// Waits until ConfigMap `name` was reconciled `reconciles` times, the last with `payload`.
async fn reconciled(maps: &Api<ConfigMap>, name: &str, reconciles: u64, payload: &Value) -> anyhow::Result<()> {
    let what = format!("{name} reconciled {reconciles} times, the last with {payload}");
    until(&what, async || Ok(seen(&maps.get(name).await?)), |s| s.0 == reconciles && &s.1 == payload).await?;
    Ok(())
}

/// An events endpoint on a free local port serving `host`, until the token is cancelled.
struct Events {
    url: String,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Events {
    async fn start(host: Arc<Host>) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let endpoint = Endpoint::on(listener, None)?;
        let url = format!("http://{}", endpoint.local_addr());
        let stop = CancellationToken::new();
        let task = tokio::spawn(endpoint.serve(host, stop.clone()));
        Ok(Self { url, stop, task })
    }

    /// Posts `body` to plugin `plugin`'s events with `authorization`; the status and the body.
    async fn post(&self, plugin: &str, authorization: Option<&str>, body: Vec<u8>) -> anyhow::Result<(u16, Value)> {
        post(&reqwest::Client::new(), &format!("{}/plugins/{plugin}/events", self.url), authorization, body).await
    }

    async fn stop(self) -> anyhow::Result<()> {
        self.stop.cancel();
        Ok(self.task.await??)
    }
}

async fn post(
    http: &reqwest::Client,
    url: &str,
    authorization: Option<&str>,
    body: Vec<u8>,
) -> anyhow::Result<(u16, Value)> {
    let mut request = http.post(url).header("content-type", "application/json").body(body);
    if let Some(authorization) = authorization {
        request = request.header("authorization", authorization);
    }
    let response = request.send().await?;
    let status = response.status().as_u16();
    let text = response.text().await?;
    Ok((status, serde_json::from_str(&text).unwrap_or(Value::String(text))))
}

fn bearer() -> String {
    format!("Bearer {TOKEN}")
}

fn json_bytes(value: &Value) -> Vec<u8> {
    value.to_string().into_bytes()
}

/// The count of a Prometheus sample `line` (name and labels) in `text`.
fn sample(text: &str, line: &str) -> Option<u64> {
    let found = text.lines().find(|l| l.rsplit_once(' ').is_some_and(|(name, _)| name == line))?;
    found.rsplit(' ').next()?.parse::<f64>().ok().map(|v| v as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authenticated_event_reconciles_exactly_the_mapped_primaries_and_refused_ones_reach_nothing()
-> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "inbound").await?;
    let maps = seed(&client, &ns, &["a", "b", "c", "z"]).await?;
    let host = bare_host(&client, &ns)?;
    let file = plugin(PLUGIN);
    host.install(&file.display().to_string(), &file, std::fs::read(&file)?, Some(allowed()?)).await?;
    host.loaded();
    let events = Events::start(host.clone()).await?;
    for name in ["a", "b", "c", "z"] {
        reconciled(&maps, name, 1, &Value::Null).await?;
    }

    // The token (whitespace around the Secret's value is not part of it) reconciles exactly
    // the primaries the payload names, each seeing the payload.
    let first = json!({ "namespace": ns, "names": ["a", "b"], "note": "first" });
    assert_eq!(events.post(PLUGIN, Some(&bearer()), json_bytes(&first)).await?, (202, json!({ "enqueued": 2 })));
    reconciled(&maps, "a", 2, &first).await?;
    reconciled(&maps, "b", 2, &first).await?;
    // The payload is kept per primary: a later one replaces it for the primaries it names only.
    let second = json!({ "namespace": ns, "names": ["a"], "note": "second" });
    assert_eq!(events.post(PLUGIN, Some(&bearer()), json_bytes(&second)).await?.0, 202);
    reconciled(&maps, "a", 3, &second).await?;

    // Refused before the plugin sees anything.
    let anything = json_bytes(&json!({ "namespace": ns, "names": ["c"] }));
    let (code, body) = events.post(PLUGIN, None, anything.clone()).await?;
    assert_eq!((code, &body), (401, &json!({ "error": "unauthorized" })), "no token");
    assert_eq!(events.post(PLUGIN, Some("Bearer guess"), anything.clone()).await?.0, 401, "a wrong token");
    assert_eq!(events.post(PLUGIN, Some(TOKEN), anything.clone()).await?.0, 401, "not the bearer scheme");
    let oversized = format!("{{\"namespace\":\"{ns}\",\"names\":[\"c\"],\"pad\":\"{}\"}}", "x".repeat(1024 * 1024));
    let (code, body) = events.post(PLUGIN, Some(&bearer()), oversized.into_bytes()).await?;
    assert_eq!((code, &body), (413, &json!({ "error": "the payload is larger than 1048576 bytes" })));
    let (code, body) = events.post(PLUGIN, Some(&bearer()), b"{\"names\": [\"c\"".to_vec()).await?;
    assert_eq!(code, 400, "malformed JSON: {body}");
    assert!(body["error"].as_str().is_some_and(|e| e.starts_with("the payload is not JSON")), "{body}");
    assert_eq!(events.post("no-such-plugin", Some(&bearer()), anything.clone()).await?.0, 404);
    // The plugin refuses a payload (422); a namespaced primary named without a namespace is
    // skipped (202, none enqueued).
    let refuse = json_bytes(&json!({ "refuse": "unknown repository" }));
    let (code, body) = events.post(PLUGIN, Some(&bearer()), refuse).await?;
    assert_eq!((code, &body), (422, &json!({ "error": "the plugin refused the payload: unknown repository" })));
    let unplaced = json_bytes(&json!({ "names": ["c"] }));
    assert_eq!(events.post(PLUGIN, Some(&bearer()), unplaced).await?, (202, json!({ "enqueued": 0 })));

    // Settled: an event for `z`, sent last, has been reconciled; nothing else was.
    let marker = json!({ "namespace": ns, "names": ["z"], "note": "marker" });
    assert_eq!(events.post(PLUGIN, Some(&bearer()), json_bytes(&marker)).await?.0, 202);
    reconciled(&maps, "z", 2, &marker).await?;
    assert_eq!(seen(&maps.get("a").await?), (3, second.clone()));
    assert_eq!(seen(&maps.get("b").await?), (2, first.clone()));
    assert_eq!(seen(&maps.get("c").await?), (1, Value::Null), "c was never mapped");
    let metrics = host.metrics();
    assert_eq!(metrics.reconciles_of(PLUGIN, wasmop::metrics::Outcome::Success), 4 + 4, "4 initial, a twice, b, z");
    for (code, count) in [(202, 4), (401, 3), (413, 1), (400, 1), (422, 1)] {
        assert_eq!(metrics.inbound_requests_of(PLUGIN, code), count, "requests answered {code}");
    }
    assert_eq!(metrics.inbound_requests_of("", 404), 1, "an unknown plugin's name is not a label");
    let text = metrics.encode();
    let calls = "wasmop_plugin_call_duration_seconds_count{plugin=\"fixture-inbound\",export=\"map-inbound\"}";
    assert_eq!(sample(&text, calls), Some(5), "map-inbound saw the 202s and the 422 only:\n{text}");
    assert_eq!(sample(&text, "wasmop_inbound_requests_total{plugin=\"fixture-inbound\",code=\"401\"}"), Some(3));

    // The cached payload stays for the primary's later reconciles, whatever causes them...
    let change = json!({ "data": { "value": "2" } });
    maps.patch("b", &PatchParams::default(), &Patch::Merge(&change)).await?;
    reconciled(&maps, "b", 3, &first).await?;
    // ...and goes with the primary: a new `b` starts without one.
    maps.delete("b", &DeleteParams::default()).await?;
    until("b deleted", async || Ok(maps.get_opt("b").await?), Option::is_none).await?;
    maps.create(&PostParams::default(), &primary("b")).await?;
    reconciled(&maps, "b", 1, &Value::Null).await?;

    events.stop().await?;
    host.stop_all().await;
    Ok(())
}

/// A `wasmop run` process this test started, killed when dropped (on failure too).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A local port nothing listens on now.
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wasmop_run_serves_inbound_events_over_tls() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "inbound-tls").await?;
    let maps = seed(&client, &ns, &["a"]).await?;
    let dir = workspace_root().join(format!("target/inbound-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])?;
    let files = TlsFiles { cert: dir.join("cert.pem"), key: dir.join("key.pem") };
    std::fs::write(&files.cert, certified.cert.pem())?;
    std::fs::write(&files.key, certified.signing_key.serialize_pem())?;

    // A certificate file that holds none is refused before anything runs, naming the file.
    let bad = Command::new(wasmop_binary()?)
        .args(["run", "--plugin"])
        .arg(plugin(PLUGIN))
        .args(["--events-addr", "127.0.0.1:0", "--events-tls-cert"])
        .arg(&files.key)
        .arg("--events-tls-key")
        .arg(&files.key)
        .env("KUBECONFIG", kubeconfig())
        .output()?;
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success(), "a bad certificate is refused");
    assert!(stderr.contains("key.pem holds no PEM certificate"), "{stderr}");

    let port = free_port()?;
    std::fs::write(dir.join("config.yaml"), format!("plugins:\n  {PLUGIN}:\n    {ALLOWED}\n"))?;
    let _host = Running(
        Command::new(wasmop_binary()?)
            .args(["run", "--plugin"])
            .arg(plugin(PLUGIN))
            .arg("--config")
            .arg(dir.join("config.yaml"))
            .args(["--namespace", &ns, "--events-addr", &format!("127.0.0.1:{port}"), "--events-tls-cert"])
            .arg(&files.cert)
            .arg("--events-tls-key")
            .arg(&files.key)
            .env("KUBECONFIG", kubeconfig())
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?,
    );
    reconciled(&maps, "a", 1, &Value::Null).await?;

    let trusting = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(certified.cert.pem().as_bytes())?)
        .build()?;
    let url = format!("https://127.0.0.1:{port}/plugins/{PLUGIN}/events");
    let event = json!({ "namespace": ns, "names": ["a"], "note": "over tls" });
    assert_eq!(post(&trusting, &url, Some(&bearer()), json_bytes(&event)).await?, (202, json!({ "enqueued": 1 })));
    reconciled(&maps, "a", 2, &event).await?;
    assert_eq!(post(&trusting, &url, None, json_bytes(&event)).await?.0, 401, "TLS does not replace the token");
    // Neither plain HTTP nor a client that does not trust the certificate gets through.
    let plain = format!("http://127.0.0.1:{port}/plugins/{PLUGIN}/events");
    assert!(post(&reqwest::Client::new(), &plain, Some(&bearer()), json_bytes(&event)).await.is_err());
    assert!(post(&reqwest::Client::new(), &url, Some(&bearer()), json_bytes(&event)).await.is_err());
    assert_eq!(seen(&maps.get("a").await?), (2, event));
    std::fs::remove_dir_all(dir)?;
    Ok(())
}

/// `bytes`, a component, with a custom section appended: the same plugin, another digest.
fn rebuilt(bytes: &[u8]) -> Vec<u8> {
    let (name, payload) = (b"wasmop-test", b"v2");
    let size = 1 + name.len() + payload.len();
    let mut out = bytes.to_vec();
    out.extend([0, u8::try_from(size).expect("a small section"), u8::try_from(name.len()).expect("a short name")]);
    out.extend(name);
    out.extend(payload);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_installed_by_a_reconciler_plugin_takes_events_while_it_runs_across_a_hot_reload() -> anyhow::Result<()>
{
    let client = client().await?;
    apply_file(&client, &workspace_root().join("host/crds/reconcilerplugin.yaml"), None).await?;
    let ns = namespace(&client, "inbound-resource").await?;
    let maps = seed(&client, &ns, &["a"]).await?;
    let loader = ResourceHost::start(&client, settings(&ns, HostConfig::default()), Metrics::new())?;
    let host = loader.host.clone();
    let events = Events::start(host.clone()).await?;
    let event = |note: &str| json!({ "namespace": ns, "names": ["a"], "note": note });
    assert_eq!(events.post(PLUGIN, Some(&bearer()), json_bytes(&event("early"))).await?.0, 404, "not running yet");

    let v1 = std::fs::read(plugin(PLUGIN))?;
    let maps_of_modules: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    maps_of_modules.create(&PostParams::default(), &module_map(&v1)).await?;
    let resources: Api<DynamicObject> = Api::all_with(client.clone(), &wasmop::loader::resource::resource());
    let name = format!("inbound-{ns}");
    let mut resource = reconciler_plugin(&name, &ns)?;
    resource.data["spec"]["overrides"]["allowedSecrets"] = json!([{ "name": "inbound-token" }]);
    resources.create(&PostParams::default(), &resource).await?;
    reconciled(&maps, "a", 1, &Value::Null).await?;
    let accepted = |note: &'static str| {
        let body = json_bytes(&event(note));
        let events = &events;
        async move { events.post(PLUGIN, Some(&bearer()), body).await }
    };
    assert_eq!(accepted("installed").await?, (202, json!({ "enqueued": 1 })));
    reconciled(&maps, "a", 2, &event("installed")).await?;

    // A new version swaps in place; events go to it.
    let v2 = rebuilt(&v1);
    maps_of_modules.replace("module", &PostParams::default(), &module_map(&v2)).await?;
    let digest = |bytes: &[u8]| {
        use sha2::Digest as _;
        hex::encode(sha2::Sha256::digest(bytes))
    };
    let (host_of, v2_digest) = (host.clone(), digest(&v2));
    until(
        "v2 runs",
        async || Ok(host_of.module(PLUGIN).map(|m| m.digest().to_string())),
        |d| d.as_deref() == Some(v2_digest.as_str()),
    )
    .await?;
    // The swap reconciles every primary again (with its cached payload), then the event.
    reconciled(&maps, "a", 3, &event("installed")).await?;
    assert_eq!(accepted("reloaded").await?.0, 202);
    reconciled(&maps, "a", 4, &event("reloaded")).await?;

    // Deleting the resource stops the plugin: its events are no longer taken.
    resources.delete(&name, &DeleteParams::default()).await?;
    until("the plugin stopped", async || Ok(host.plugins()), |p: &Vec<String>| p.is_empty()).await?;
    assert_eq!(accepted("stopped").await?.0, 404);
    assert_eq!(seen(&maps.get("a").await?), (4, event("reloaded")), "no reconcile after the stop");
    events.stop().await?;
    loader.stop().await
}

/// One `wasmop run` replica of a group with an events listener on its own port, logging to a
/// file under `target/tmp`.
struct Replica {
    _process: Running,
    events: String,
    metrics: std::net::SocketAddr,
}

impl Replica {
    /// Replica `index` of the test in `ns`, run with `mode` (`--shards …` or `--leader-elect …`).
    fn start(ns: &str, index: usize, config: &std::path::Path, mode: &[&str]) -> anyhow::Result<Self> {
        let (events, metrics) = (format!("127.0.0.1:{}", free_port()?), format!("127.0.0.1:{}", free_port()?));
        let dir = workspace_root().join("target/tmp");
        std::fs::create_dir_all(&dir)?;
        let log = std::fs::File::create(dir.join(format!("inbound-{ns}-{index}.log")))?;
        let child = Command::new(wasmop_binary()?)
            .args(["run", "--plugin"])
            .arg(plugin(PLUGIN))
            .arg("--config")
            .arg(config)
            .args(["--namespace", ns, "--events-addr", &events, "--metrics-address", &metrics])
            .args(["--leader-election-namespace", ns, "--leader-election-id", "inbound-leader"])
            .args(["--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "500ms"])
            .args(mode)
            .env("KUBECONFIG", kubeconfig())
            .env("POD_NAME", format!("replica-{index}"))
            .env("RUST_LOG", "info")
            .env("WASMOP_CACHE_DIR", workspace_root().join("target/wasmop-test-cache"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        Ok(Self { _process: Running(child), events, metrics: metrics.parse()? })
    }

    async fn ready(&self) -> bool {
        let response = wasmop_tests::http_get(self.metrics, "/readyz").await.unwrap_or_default();
        response.starts_with("HTTP/1.0 200") || response.starts_with("HTTP/1.1 200")
    }

    /// Posts `event` to this replica with the plugin's token.
    async fn post(&self, event: &Value) -> anyhow::Result<(u16, Value)> {
        let url = format!("http://{}/plugins/{PLUGIN}/events", self.events);
        post(&reqwest::Client::new(), &url, Some(&bearer()), json_bytes(event)).await
    }
}

/// The overrides file that allows the plugin its token Secret, in `target/tmp`.
fn config_file(ns: &str) -> anyhow::Result<std::path::PathBuf> {
    let dir = workspace_root().join("target/tmp");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("inbound-{ns}.yaml"));
    std::fs::write(&path, format!("plugins:\n  {PLUGIN}:\n    {ALLOWED}\n"))?;
    Ok(path)
}

/// Waits until ConfigMap `name` was reconciled with `payload` (however often).
async fn carries(maps: &Api<ConfigMap>, name: &str, payload: &Value) -> anyhow::Result<()> {
    let what = format!("{name} reconciled with {payload}");
    until(&what, async || Ok(seen(&maps.get(name).await?)), |s| &s.1 == payload).await?;
    Ok(())
}

/// The Leases of `ns` with `selector`: each holder's identity and advertised events address.
async fn holders(client: &Client, ns: &str, selector: &str) -> anyhow::Result<Vec<(String, Option<String>)>> {
    use k8s_openapi::api::coordination::v1::Lease;
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    let listed = leases.list(&kube::api::ListParams::default().labels(selector)).await?;
    Ok(listed
        .items
        .into_iter()
        .filter_map(|lease| {
            let holder = lease.spec?.holder_identity.filter(|h| !h.is_empty())?;
            let address = lease.metadata.annotations.and_then(|a| a.get("wasmop.dev/events-address").cloned());
            Some((holder, address))
        })
        .collect())
}

/// Three sharded replicas, each with its events listener: an event posted to one replica
/// naming primaries that others own is answered 202 once every part is queued at its owner, and
/// each primary is reconciled by its owner with the payload. Before forwarding, the replica
/// that took the event answered 202 and dropped the primaries it did not own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_posted_to_a_shard_that_does_not_own_its_primaries_reaches_their_owners() -> anyhow::Result<()> {
    let client = client().await?;
    let ns = namespace(&client, "inbound-shards").await?;
    let names = ["a", "b", "c", "d", "e", "f"];
    let maps = seed(&client, &ns, &names).await?;
    let config = config_file(&ns)?;
    let mode = ["--shards", "--shard-group", &ns];
    let replicas: Vec<Replica> = (0..3).map(|i| Replica::start(&ns, i, &config, &mode)).collect::<Result<_, _>>()?;
    let selector = format!("wasmop.dev/shard-group={ns}");
    // Every replica joined and advertises its address, and all are ready: the views settled.
    let members = until(
        "three members advertising their events addresses",
        async || holders(&client, &ns, &selector).await,
        |h| h.len() == 3 && h.iter().all(|(_, address)| address.is_some()),
    )
    .await?;
    for replica in &replicas {
        until("the replica is ready", async || Ok(replica.ready().await), |ready| *ready).await?;
    }
    for name in names {
        until("the first reconcile", async || Ok(seen(&maps.get(name).await?).0), |n| *n >= 1).await?;
    }
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;

    // The owner of each primary, as every replica computes it: by the hash of its UID.
    let assignment = wasmop_core::shard::Assignment::new(members.iter().map(|(identity, _)| identity.as_str()));
    let address_of: BTreeMap<&str, &str> =
        members.iter().map(|(identity, address)| (identity.as_str(), address.as_deref().unwrap_or(""))).collect();
    let mut owners = BTreeMap::new();
    for name in names {
        let uid = maps.get(name).await?.metadata.uid.expect("a UID");
        let owner = assignment.owner(wasmop_core::shard::hash(&uid)).expect("an owner");
        owners.insert(name, address_of[owner].to_string());
    }
    // Post to a replica that does not own `a`.
    let target = replicas.iter().find(|r| r.events != owners["a"]).expect("three replicas");
    let others = owners.values().filter(|owner| **owner != target.events).count();
    assert!(others >= 1, "some primaries are another replica's: {owners:?}");

    let event = json!({ "namespace": ns, "names": names, "note": "to a non-owner" });
    assert_eq!(target.post(&event).await?, (202, json!({ "enqueued": 6 })), "queued at every owner");
    for name in names {
        carries(&maps, name, &event).await?;
    }
    // An event naming only another replica's primary, too.
    let only = json!({ "namespace": ns, "names": ["a"], "note": "only a" });
    assert_eq!(target.post(&only).await?, (202, json!({ "enqueued": 1 })));
    carries(&maps, "a", &only).await?;
    // Without the token, no replica forwards anything.
    let url = format!("http://{}/plugins/{PLUGIN}/events", target.events);
    assert_eq!(post(&reqwest::Client::new(), &url, None, json_bytes(&only)).await?.0, 401);
    // A forged forward (the token, but primaries the payload does not name) is refused by the
    // owner: a forwarded request narrows what the payload maps to, never widens it.
    let owner = replicas.iter().find(|r| r.events == owners["a"]).expect("a's owner runs");
    let forged = reqwest::Client::new()
        .post(format!("http://{}/plugins/{PLUGIN}/events", owner.events))
        .header("authorization", bearer())
        .header("wasmop-forwarded", format!("[{{\"namespace\":\"{ns}\",\"name\":\"a\"}}]"))
        .body(json_bytes(&json!({ "namespace": ns, "names": ["b"] })))
        .send()
        .await?;
    assert_eq!(forged.status().as_u16(), 403, "{}", forged.text().await?);
    Ok(())
}

/// Two replicas with `--leader-elect`, each with its events listener: an event posted to the
/// standby is forwarded to the leader, which reconciles it, and the answer is 202. Before
/// forwarding, the standby answered 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_posted_to_a_standby_is_reconciled_by_the_leader() -> anyhow::Result<()> {
    use k8s_openapi::api::coordination::v1::Lease;
    let client = client().await?;
    let ns = namespace(&client, "inbound-leader").await?;
    let maps = seed(&client, &ns, &["a"]).await?;
    let config = config_file(&ns)?;
    let replicas: Vec<Replica> =
        (0..2).map(|i| Replica::start(&ns, i, &config, &["--leader-elect"])).collect::<Result<_, _>>()?;
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
    let leader = until(
        "a leader advertising its events address",
        async || {
            let lease = leases.get_opt("inbound-leader").await?;
            Ok(lease.and_then(|l| l.metadata.annotations?.get("wasmop.dev/events-address").cloned()))
        },
        Option::is_some,
    )
    .await?
    .expect("an address");
    reconciled(&maps, "a", 1, &Value::Null).await?;
    let standby = replicas.iter().find(|r| r.events != leader).expect("two replicas");
    assert!(replicas.iter().any(|r| r.events == leader), "the leader advertises its own listener");
    // The standby reads the Lease every retry period.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;

    let event = json!({ "namespace": ns, "names": ["a"], "note": "to the standby" });
    assert_eq!(standby.post(&event).await?, (202, json!({ "enqueued": 1 })), "queued at the leader");
    reconciled(&maps, "a", 2, &event).await?;
    Ok(())
}

/// The same over TLS: the standby forwards over https, trusting the replicas' own certificate
/// (`--events-tls-cert`, which names 127.0.0.1, the address each advertises).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_forwards_over_tls_trusting_the_replicas_certificate() -> anyhow::Result<()> {
    use k8s_openapi::api::coordination::v1::Lease;
    let client = client().await?;
    let ns = namespace(&client, "inbound-leader-tls").await?;
    let maps = seed(&client, &ns, &["a"]).await?;
    let config = config_file(&ns)?;
    let dir = workspace_root().join("target/tmp");
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()])?;
    let (cert, key) = (dir.join(format!("{ns}-cert.pem")), dir.join(format!("{ns}-key.pem")));
    std::fs::write(&cert, certified.cert.pem())?;
    std::fs::write(&key, certified.signing_key.serialize_pem())?;
    let (cert, key) = (cert.display().to_string(), key.display().to_string());
    let mode = ["--leader-elect", "--events-tls-cert", &cert, "--events-tls-key", &key];
    let replicas: Vec<Replica> = (0..2).map(|i| Replica::start(&ns, i, &config, &mode)).collect::<Result<_, _>>()?;
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
    let leader = until(
        "a leader advertising its events address",
        async || {
            let lease = leases.get_opt("inbound-leader").await?;
            Ok(lease.and_then(|l| l.metadata.annotations?.get("wasmop.dev/events-address").cloned()))
        },
        Option::is_some,
    )
    .await?
    .expect("an address");
    reconciled(&maps, "a", 1, &Value::Null).await?;
    let standby = replicas.iter().find(|r| r.events != leader).expect("two replicas");
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;

    let trusting = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(certified.cert.pem().as_bytes())?)
        .build()?;
    let url = format!("https://{}/plugins/{PLUGIN}/events", standby.events);
    let event = json!({ "namespace": ns, "names": ["a"], "note": "to the standby over tls" });
    assert_eq!(post(&trusting, &url, Some(&bearer()), json_bytes(&event)).await?, (202, json!({ "enqueued": 1 })));
    reconciled(&maps, "a", 2, &event).await?;
    Ok(())
}
