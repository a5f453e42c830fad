//! Plugins from OCI registries, against the real kube-apiserver and a real registry (the CNCF
//! distribution registry, built by `tests/testbed/build-registry.sh`, on 127.0.0.1):
//! `wasmop push` publishes greeting and prints its digest reference, which pulls the same bytes;
//! a `ReconcilerPlugin` naming that reference runs the plugin; a wrong digest, a missing tag, a
//! registry that is down and bad credentials each leave `Degraded` naming the cause while the
//! previous version keeps reconciling; a tag without a digest is refused.

use std::path::PathBuf;
use std::process::Stdio;

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::json;
use wasmop::loader::fetch::FetchPolicy;
use wasmop::loader::oci::{Credentials, OciRef, Registries};
use wasmop::metrics::Metrics;
use wasmop::settings::HostConfig;
use wasmop_tests::registry::Registry;
use wasmop_tests::{
    ResourceHost, apply_file, client, condition, namespace, plugin, settings, until, wait_until, wasmop_binary,
    workspace_root,
};

/// A digest no registry has.
const ABSENT: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// Runs `wasmop push FILE REFERENCE --insecure-registry REGISTRY [ARGS]` with `stdin`; returns its
/// exit status, stdout and stderr.
async fn push(
    file: &PathBuf,
    reference: &str,
    registry: &str,
    args: &[&str],
    stdin: &str,
) -> anyhow::Result<(bool, String, String)> {
    use tokio::io::AsyncWriteExt as _;
    let mut child = tokio::process::Command::new(wasmop_binary()?)
        .arg("push")
        .arg(file)
        .args([reference, "--insecure-registry", registry])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut input = child.stdin.take().expect("piped");
    input.write_all(stdin.as_bytes()).await?;
    drop(input);
    let out = child.wait_with_output().await?;
    Ok((out.status.success(), String::from_utf8(out.stdout)?.trim().to_string(), String::from_utf8(out.stderr)?))
}

/// Puts `manifest` (an OCI image manifest) under `repository:tag` of the registry at `address`;
/// returns its digest reference.
async fn put_manifest(
    address: &str,
    repository: &str,
    tag: &str,
    manifest: &serde_json::Value,
) -> anyhow::Result<String> {
    let bytes = serde_json::to_vec(manifest)?;
    let digest = format!("sha256:{}", hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes)));
    reqwest::Client::new()
        .put(format!("http://{address}/v2/{repository}/manifests/{tag}"))
        .header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
        .body(bytes)
        .send()
        .await?
        .error_for_status()?;
    Ok(format!("{address}/{repository}:{tag}@{digest}"))
}

/// The manifest `repository:tag` names in the registry at `address`.
async fn manifest_of(address: &str, repository: &str, tag: &str) -> anyhow::Result<serde_json::Value> {
    let response = reqwest::Client::new()
        .get(format!("http://{address}/v2/{repository}/manifests/{tag}"))
        .header("Accept", "application/vnd.oci.image.manifest.v1+json")
        .send()
        .await?
        .error_for_status()?;
    Ok(serde_json::from_slice(&response.bytes().await?)?)
}

/// A fresh store directory for pulled modules, removed when dropped.
struct Store(PathBuf);

impl Store {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("wasmop-oci-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Self(dir)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn greetings(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("example.wasmop.dev", "v1", "Greeting");
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk(&gvk))
}

/// Creates Greeting `name` and waits until the plugin greets it.
async fn greeted(api: &Api<DynamicObject>, name: &str) -> anyhow::Result<()> {
    let greeting = json!({
        "apiVersion": "example.wasmop.dev/v1", "kind": "Greeting",
        "metadata": { "name": name }, "spec": { "name": name },
    });
    api.create(&PostParams::default(), &serde_json::from_value(greeting)?).await?;
    let message = format!("Hello, {name}!");
    wait_until(api, name, "greeted", move |g| g.data["status"]["message"] == message.as_str()).await?;
    Ok(())
}

fn resources(client: &Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &wasmop::loader::resource::resource())
}

/// Whether the host reported on the resource's current spec.
fn current(r: &DynamicObject) -> bool {
    r.data["status"]["observedGeneration"].as_i64() == r.metadata.generation
}

fn loaded(r: &DynamicObject) -> bool {
    current(r)
        && condition(r, "Loaded").is_some_and(|c| c["status"] == "True")
        && condition(r, "Degraded").is_some_and(|c| c["status"] == "False")
}

/// Degraded with `reason` and a message containing `needle`, while an older version runs.
fn degraded(reason: &'static str, needle: String) -> impl Fn(&DynamicObject) -> bool + Send + 'static {
    move |r| {
        current(r)
            && condition(r, "Ready").is_some_and(|c| c["status"] == "True")
            && condition(r, "Degraded").is_some_and(|c| {
                c["status"] == "True"
                    && c["reason"] == reason
                    && c["message"].as_str().unwrap_or("").contains(needle.as_str())
            })
    }
}

/// Prints the Degraded condition of `resource` (seen with `--nocapture`).
fn say(resource: &DynamicObject) {
    if let Some(c) = condition(resource, "Degraded") {
        eprintln!("Degraded {}: {}", c["reason"], c["message"]);
    }
}

async fn set_module(api: &Api<DynamicObject>, name: &str, spec: serde_json::Value) -> kube::Result<DynamicObject> {
    api.patch(name, &PatchParams::default(), &Patch::Merge(json!({ "spec": spec }))).await
}

/// A host loading `ReconcilerPlugin`s for `ns`, pulling from the (plain http) registry at
/// `address` into `store`.
fn start_loader(
    client: &Client,
    ns: &str,
    address: &str,
    store: &Store,
    metrics: std::sync::Arc<Metrics>,
) -> anyhow::Result<ResourceHost> {
    let policy = FetchPolicy::new(&[])
        .map_err(anyhow::Error::msg)?
        .with_registries(Registries::new(vec![address.to_string()], Some(store.0.clone())));
    ResourceHost::start_with(client, settings(ns, HostConfig::default()), metrics, policy)
}

/// Creates the `ReconcilerPlugin` `name` running the module `oci` for `ns`.
async fn create_plugin(api: &Api<DynamicObject>, name: &str, ns: &str, oci: &str) -> anyhow::Result<()> {
    let resource: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "wasmop.dev/v1alpha1", "kind": "ReconcilerPlugin", "metadata": { "name": name },
        "spec": { "module": { "oci": oci }, "overrides": { "namespace": ns } }
    }))?;
    api.create(&PostParams::default(), &resource).await?;
    Ok(())
}

async fn setup(client: &Client, test: &str) -> anyhow::Result<String> {
    apply_file(client, &workspace_root().join("host/crds/reconcilerplugin.yaml"), None).await?;
    apply_file(client, &workspace_root().join("plugins/greeting/crd.yaml"), None).await?;
    namespace(client, test).await
}

/// One test, two scenarios in turn: every host loads every `ReconcilerPlugin` of the cluster, so
/// two hosts of this process at once would each report on the other's resource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_from_an_oci_registry_with_and_without_authentication() -> anyhow::Result<()> {
    let client = client().await?;
    a_plugin_pulled_by_digest_reconciles_and_failed_pulls_keep_the_previous_version(&client).await?;
    a_registry_with_authentication_needs_the_pull_secret(&client).await
}

async fn a_plugin_pulled_by_digest_reconciles_and_failed_pulls_keep_the_previous_version(
    client: &Client,
) -> anyhow::Result<()> {
    let client = client.clone();
    let ns = setup(&client, "oci").await?;
    let mut registry = Registry::start(None).await?;
    let address = registry.address.clone();
    let file = plugin("greeting");

    // `wasmop push` prints the digest reference; it pulls the very bytes pushed, and a second
    // pull of it reads the store, with the registry down.
    let (ok, pinned, stderr) = push(&file, &format!("{address}/plugins/greeting:v1"), &address, &[], "").await?;
    assert!(ok, "push failed: {stderr}");
    assert!(pinned.starts_with(&format!("{address}/plugins/greeting:v1@sha256:")), "{pinned}");
    let round_trip = Store::new("round-trip");
    let registries = Registries::new(vec![address.clone()], Some(round_trip.0.clone()));
    let started = std::time::Instant::now();
    let (bytes, outcome) = registries.pull(&OciRef::parse(&pinned)?, &Credentials::default()).await?;
    eprintln!("pulled {} bytes in {:?}", bytes.len(), started.elapsed());
    assert_eq!((bytes == std::fs::read(&file)?, outcome), (true, "pulled"));
    registry.stop().await?;
    let (again, outcome) = registries.pull(&OciRef::parse(&pinned)?, &Credentials::default()).await?;
    assert_eq!((again == bytes, outcome), (true, "stored"), "the second pull asks the registry nothing");
    registry.restart().await?;
    drop(round_trip);
    // Pushing the same file again gives the same digest.
    let (ok, repushed, stderr) = push(&file, &format!("{address}/plugins/greeting:v1"), &address, &[], "").await?;
    assert!(ok && repushed == pinned, "{repushed} {stderr}");

    let host_store = Store::new("host");
    let metrics = Metrics::new();
    let loader = start_loader(&client, &ns, &address, &host_store, metrics.clone())?;
    let (api, name) = (resources(&client), format!("greeting-{ns}"));
    create_plugin(&api, &name, &ns, &pinned).await?;
    wait_until(&api, &name, "loaded from the registry", loaded).await?;
    let greetings = greetings(&client, &ns);
    greeted(&greetings, "ada").await?;
    assert_eq!(metrics.oci_pulls("pulled"), 1);

    // A tag without a digest never reaches the host: the CRD refuses it (and the host would).
    let tag_only =
        set_module(&api, &name, json!({ "module": { "oci": format!("{address}/plugins/greeting:v1") } })).await;
    assert!(
        matches!(&tag_only, Err(kube::Error::Api(s)) if s.code == 422 && s.message.contains("sha256")),
        "{tag_only:?}"
    );

    // Artifacts that are not the Wasm layout, or too large, pushed beside it (same blobs).
    let mut old = manifest_of(&address, "plugins/greeting", "v1").await?;
    old["layers"][0]["mediaType"] = json!("application/vnd.wasm.content.layer.v1+wasm");
    let old = put_manifest(&address, "plugins/greeting", "old-layout", &old).await?;
    let mut big = manifest_of(&address, "plugins/greeting", "v1").await?;
    big["layers"][0]["size"] = json!(100_000_000);
    let big = put_manifest(&address, "plugins/greeting", "big", &big).await?;

    // Each failed pull is Degraded with its cause; the previous version keeps greeting.
    let manifest = pinned.rsplit_once('@').expect("a digest").1.to_string();
    let cases = [
        (
            "old layout",
            old,
            "WrongMediaType",
            "application/vnd.wasm.content.layer.v1+wasm, not application/wasm".into(),
        ),
        ("too large", big, "TooLarge", "100000000 bytes".into()),
        ("wrong digest", format!("{address}/plugins/greeting:v1@{ABSENT}"), "DigestMismatch", manifest.clone()),
        ("missing tag", format!("{address}/plugins/greeting:v9@{ABSENT}"), "NotFound", "manifest unknown".into()),
        ("missing repository", format!("{address}/plugins/nothing:v1@{ABSENT}"), "NotFound", "unknown".into()),
    ];
    for (i, (case, reference, reason, needle)) in cases.into_iter().enumerate() {
        set_module(&api, &name, json!({ "module": { "oci": reference } })).await?;
        let r = wait_until(&api, &name, case, degraded(reason, needle)).await?;
        say(&r);
        greeted(&greetings, &format!("after-{i}")).await?;
    }

    // A registry that is down: a new digest cannot be pulled; the running one stays.
    registry.stop().await?;
    let elsewhere = format!("{address}/plugins/greeting:v2@{ABSENT}");
    set_module(&api, &name, json!({ "module": { "oci": elsewhere } })).await?;
    let r = wait_until(&api, &name, "registry down", degraded("Unreachable", address.clone())).await?;
    say(&r);
    greeted(&greetings, "while-down").await?;
    // Back to the running digest: loaded again without asking the (still stopped) registry.
    set_module(&api, &name, json!({ "module": { "oci": pinned } })).await?;
    wait_until(&api, &name, "loaded again", loaded).await?;
    registry.restart().await?;
    assert_eq!(metrics.oci_pulls("pulled"), 1, "the running digest was never pulled again");
    assert!(metrics.oci_pulls("Unreachable") >= 1);

    api.delete(&name, &Default::default()).await?;
    let owner = format!("ReconcilerPlugin/{name}");
    until("the plugin stopped", async || Ok(loader.host.owned_by(&owner)), |p: &Vec<String>| p.is_empty()).await?;
    loader.stop().await?;
    Ok(())
}

/// A `kubernetes.io/dockerconfigjson` Secret with `user` and `password` for `registry`.
fn pull_secret(name: &str, registry: &str, user: &str, password: &str) -> anyhow::Result<Secret> {
    let config = json!({ "auths": { registry: { "username": user, "password": password } } });
    Ok(serde_json::from_value(json!({
        "metadata": { "name": name }, "type": "kubernetes.io/dockerconfigjson",
        "stringData": { ".dockerconfigjson": config.to_string() },
    }))?)
}

async fn a_registry_with_authentication_needs_the_pull_secret(client: &Client) -> anyhow::Result<()> {
    let client = client.clone();
    let ns = setup(&client, "oci-auth").await?;
    let registry = Registry::start(Some(("alice", "wonderland"))).await?;
    let address = registry.address.clone();
    let file = plugin("greeting");
    let target = format!("{address}/greeting:v1");

    let (ok, _, stderr) = push(&file, &target, &address, &[], "").await?;
    assert!(!ok && stderr.contains("wants credentials"), "an anonymous push is refused: {stderr}");
    let (ok, pinned, stderr) =
        push(&file, &target, &address, &["--username", "alice", "--password-stdin"], "wonderland\n").await?;
    assert!(ok, "push failed: {stderr}");

    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    secrets.create(&PostParams::default(), &pull_secret("good", &address, "alice", "wonderland")?).await?;
    secrets.create(&PostParams::default(), &pull_secret("bad", &address, "alice", "looking-glass")?).await?;

    let host_store = Store::new("auth");
    let loader = start_loader(&client, &ns, &address, &host_store, Metrics::new())?;
    let (api, name) = (resources(&client), format!("greeting-{ns}"));
    create_plugin(&api, &name, &ns, &pinned).await?;
    // Without a pull secret: asked anonymously, refused; nothing runs.
    wait_until(&api, &name, "refused anonymously", |r| {
        current(r)
            && condition(r, "Ready").is_some_and(|c| c["status"] == "False")
            && condition(r, "Degraded").is_some_and(|c| {
                c["reason"] == "Unauthorized" && c["message"].as_str().unwrap_or("").contains("wants credentials")
            })
    })
    .await
    .map(|r| say(&r))?;

    // A pull secret that does not exist is named as the cause.
    set_module(&api, &name, json!({ "imagePullSecrets": [{ "name": "absent" }] })).await?;
    let absent = format!("Secret {ns}/absent does not exist");
    wait_until(&api, &name, "a missing pull secret", move |r| {
        current(r)
            && condition(r, "Degraded").is_some_and(|c| {
                c["reason"] == "PullSecretInvalid" && c["message"].as_str().unwrap_or("").contains(&absent)
            })
    })
    .await
    .map(|r| say(&r))?;

    set_module(&api, &name, json!({ "imagePullSecrets": [{ "name": "good" }] })).await?;
    wait_until(&api, &name, "loaded with the pull secret", loaded).await?;
    let greetings = greetings(&client, &ns);
    greeted(&greetings, "alice").await?;

    // Bad credentials for a new version: Degraded; the running version keeps greeting.
    let next = format!("{address}/greeting:v2@{ABSENT}");
    set_module(&api, &name, json!({ "module": { "oci": next }, "imagePullSecrets": [{ "name": "bad" }] })).await?;
    let r =
        wait_until(&api, &name, "bad credentials", degraded("Unauthorized", "refused the credentials".into())).await?;
    say(&r);
    greeted(&greetings, "hatter").await?;

    api.delete(&name, &Default::default()).await?;
    let owner = format!("ReconcilerPlugin/{name}");
    until("the plugin stopped", async || Ok(loader.host.owned_by(&owner)), |p: &Vec<String>| p.is_empty()).await?;
    loader.stop().await?;
    Ok(())
}
