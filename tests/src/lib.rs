//! Test bed for wasmop's integration tests: one real control plane per test run, one namespace
//! per test, the compiled plugins, and the host running in-process.
//!
//! The control plane is the one named by `WASMOP_TEST_KUBECONFIG` (set by `make test`, or by a
//! user pointing at kind/k3d), else one started here with `tests/testbed/cluster.sh`, which
//! stops it when this process exits.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{Context as _, bail};
use futures::future::{BoxFuture, FutureExt};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, Config, ResourceExt};
use wasmop::host::{Host, HostSettings};
use wasmop::informer::Clusters;
use wasmop::metrics::Metrics;
use wasmop::runtime::bindings::wasmop::plugin::types::{KindRef, ReconcileRequest};
use wasmop::runtime::{GetResult, Limits, ListResult, Runtime, RuntimeConfig};
use wasmop::settings::{Defaults, HostConfig};

pub mod helm;
pub mod http_service;
pub mod in_process;
pub mod links;
pub mod overlaps;
pub mod proxy;
pub mod records;
pub mod registry;
pub mod relay;
pub mod runs;
pub mod swaps;

/// The workspace root.
pub fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ lives in the workspace root")
}

/// The kubeconfig of the shared control plane, starting one on first use.
pub fn kubeconfig() -> &'static Path {
    static KUBECONFIG: OnceLock<PathBuf> = OnceLock::new();
    KUBECONFIG.get_or_init(|| control_plane("WASMOP_TEST_KUBECONFIG", "target/test-cluster"))
}

/// The kubeconfig of a second control plane, for multi-cluster tests: the one named by
/// `WASMOP_TEST_REMOTE_KUBECONFIG`, else one started on first use and stopped when this process
/// exits.
pub fn remote_kubeconfig() -> &'static Path {
    static KUBECONFIG: OnceLock<PathBuf> = OnceLock::new();
    KUBECONFIG.get_or_init(|| control_plane("WASMOP_TEST_REMOTE_KUBECONFIG", "target/test-cluster-remote"))
}

/// The kubeconfig of the fault suite's own control plane, whose processes its tests kill and
/// restart: the one named by `WASMOP_TEST_FAULTS_KUBECONFIG` (it must be `DIR/kubeconfig` of a
/// cluster that `tests/testbed/cluster.sh up DIR` started), else one started on first use in
/// `target/test-cluster-faults` and stopped when this process exits.
pub fn faults_kubeconfig() -> &'static Path {
    static KUBECONFIG: OnceLock<PathBuf> = OnceLock::new();
    KUBECONFIG.get_or_init(|| control_plane("WASMOP_TEST_FAULTS_KUBECONFIG", "target/test-cluster-faults"))
}

/// A client for the fault suite's control plane.
pub async fn faults_client() -> anyhow::Result<Client> {
    client_of(faults_kubeconfig()).await
}

/// The client configuration of the fault suite's control plane.
pub async fn faults_config() -> anyhow::Result<Config> {
    config_of(faults_kubeconfig()).await
}

/// Runs `cluster.sh kill|start DIR component` on the fault suite's control plane: `kill` is a
/// SIGKILL, `start` returns once the component is healthy again.
pub async fn faults_cluster(command: &str, component: &str) -> anyhow::Result<()> {
    let dir = faults_kubeconfig().parent().context("the kubeconfig lies in the cluster's directory")?;
    let status = tokio::process::Command::new(workspace_root().join("tests/testbed/cluster.sh"))
        .args([command, &dir.to_string_lossy(), component])
        .status()
        .await?;
    anyhow::ensure!(status.success(), "cluster.sh {command} {} {component} failed", dir.display());
    Ok(())
}

/// The kubeconfig named by `variable`, else that of a control plane started in `dir`.
fn control_plane(variable: &str, dir: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(variable) {
        return PathBuf::from(path);
    }
    let out = std::process::Command::new(workspace_root().join("tests/testbed/cluster.sh"))
        .arg("up")
        .arg(workspace_root().join(dir))
        .arg("--watch-pid")
        .arg(std::process::id().to_string())
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("running tests/testbed/cluster.sh");
    assert!(out.status.success(), "cannot start the test control plane in {dir} (see the output above)");
    let stdout = String::from_utf8(out.stdout).expect("utf-8 output");
    PathBuf::from(stdout.lines().last().expect("cluster.sh prints the kubeconfig path").trim())
}

/// A client for the shared control plane.
pub async fn client() -> anyhow::Result<Client> {
    client_of(kubeconfig()).await
}

/// A client for the second control plane of multi-cluster tests.
pub async fn remote_client() -> anyhow::Result<Client> {
    client_of(remote_kubeconfig()).await
}

async fn client_of(kubeconfig: &Path) -> anyhow::Result<Client> {
    Ok(Client::try_from(config_of(kubeconfig).await?)?)
}

/// The body and status line of `GET path` from a host's metrics address (`/metrics`,
/// `/readyz`), as one text; `None` while it does not answer.
pub async fn http_get(address: std::net::SocketAddr, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
    stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    Some(response)
}

/// A kubeconfig like the test's whose server is `url` (a relay or proxy in front of the API
/// server), written into `dir`; its path.
pub fn kubeconfig_via(url: &http::Uri, dir: &Path) -> anyhow::Result<PathBuf> {
    let mut config = kube::config::Kubeconfig::read_from(kubeconfig())?;
    for cluster in config.clusters.iter_mut().filter_map(|c| c.cluster.as_mut()) {
        cluster.server = Some(url.to_string().trim_end_matches('/').to_string());
    }
    std::fs::create_dir_all(dir)?;
    let path = dir.join("kubeconfig-via-relay");
    std::fs::write(&path, serde_json::to_vec(&config)?)?;
    Ok(path)
}

/// A kubeconfig for the plain-HTTP `url` of a proxy that holds the credentials (it has none of
/// its own), in `dir`.
pub fn kubeconfig_for_proxy(url: &http::Uri, dir: &Path) -> anyhow::Result<PathBuf> {
    let config = serde_json::json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "proxy",
        "clusters": [{ "name": "proxy", "cluster": { "server": url.to_string().trim_end_matches('/') } }],
        "users": [{ "name": "none", "user": {} }],
        "contexts": [{ "name": "proxy", "context": { "cluster": "proxy", "user": "none" } }],
    });
    std::fs::create_dir_all(dir)?;
    let path = dir.join("kubeconfig-via-proxy");
    std::fs::write(&path, serde_json::to_vec(&config)?)?;
    Ok(path)
}

/// The client configuration of the shared control plane, for hosts that impersonate.
pub async fn config() -> anyhow::Result<Config> {
    config_of(kubeconfig()).await
}

async fn config_of(kubeconfig: &Path) -> anyhow::Result<Config> {
    let kubeconfig = Kubeconfig::read_from(kubeconfig)?;
    Ok(Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?)
}

/// The `wasmop` binary of this build (`target/<profile>/wasmop`), which `make test` builds
/// before the tests run.
pub fn wasmop_binary() -> anyhow::Result<PathBuf> {
    let binary = std::env::current_exe()?
        .parent()
        .and_then(Path::parent)
        .map(|profile| profile.join(format!("wasmop{}", std::env::consts::EXE_SUFFIX)))
        .context("the test binary lies in target/<profile>/deps")?;
    anyhow::ensure!(binary.exists(), "{} is missing: run `cargo build -p wasmop` first", binary.display());
    Ok(binary)
}

/// The sizes of a binary's relocation sections, from `readelf`.
#[derive(Debug)]
pub struct Relocations {
    /// `.rela.dyn`: one entry of 24 bytes per relocation.
    pub rela: u64,
    /// `.relr.dyn`: the relative ones packed (`DT_RELR`).
    pub relr: u64,
}

/// The section headers of `binary`, as `readelf -SW` lists them.
fn section_headers(binary: &Path) -> anyhow::Result<String> {
    let out = std::process::Command::new("readelf").arg("-SW").arg(binary).output()?;
    anyhow::ensure!(out.status.success(), "readelf -SW {}: {}", binary.display(), String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The names of `binary`'s sections (`.text`, `.symtab`, ...), from `readelf`.
pub fn section_names(binary: &Path) -> anyhow::Result<Vec<String>> {
    let text = section_headers(binary)?;
    let names = text.lines().filter_map(|line| line.split_once(']')?.1.split_whitespace().next());
    Ok(names.filter(|name| name.starts_with('.')).map(str::to_string).collect())
}

/// Reads them of `binary`.
pub fn relocation_bytes(binary: &Path) -> anyhow::Result<Relocations> {
    let text = section_headers(binary)?;
    let size = |section: &str| -> anyhow::Result<u64> {
        // `[ 5] .relr.dyn RELR 0000000000000308 000308 004a10 08 A 0 0 8`: the size follows the
        // name, type, address and offset.
        let Some(line) = text.lines().find(|l| l.split_whitespace().any(|w| w == section)) else { return Ok(0) };
        let fields: Vec<&str> = line.split(']').nth(1).unwrap_or_default().split_whitespace().collect();
        let hex = fields.get(4).ok_or_else(|| anyhow::anyhow!("no size in {line:?}"))?;
        Ok(u64::from_str_radix(hex, 16)?)
    };
    Ok(Relocations { rela: size(".rela.dyn")?, relr: size(".relr.dyn")? })
}

/// A namespace of its own for one test.
pub async fn namespace(client: &Client, test: &str) -> anyhow::Result<String> {
    static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("{}-{}-{n}", test.replace('_', "-"), std::process::id());
    let ns: Namespace = serde_json::from_value(serde_json::json!({ "metadata": { "name": name } }))?;
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;
    Ok(name)
}

/// Applies every document of a YAML file with server-side apply, into `namespace` when the
/// documents are namespaced and name none; waits for CRDs to be established.
pub async fn apply_file(client: &Client, path: &Path, namespace: Option<&str>) -> anyhow::Result<Vec<DynamicObject>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut applied = Vec::new();
    for value in serde_saphyr::from_multiple::<serde_json::Value>(&text)? {
        if value.is_null() {
            continue;
        }
        applied.push(apply(client, value, namespace).await?);
    }
    Ok(applied)
}

/// Server-side applies one object given as JSON.
pub async fn apply(
    client: &Client,
    value: serde_json::Value,
    namespace: Option<&str>,
) -> anyhow::Result<DynamicObject> {
    let mut object: DynamicObject = serde_json::from_value(value)?;
    let types = object.types.clone().context("object without apiVersion/kind")?;
    let gvk = kube::api::GroupVersionKind::try_from(&types)?;
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk).await?;
    let api: Api<DynamicObject> = if caps.scope == kube::discovery::Scope::Namespaced {
        let ns = object
            .metadata
            .namespace
            .clone()
            .or(namespace.map(String::from))
            .context("namespaced object without namespace")?;
        object.metadata.namespace = Some(ns.clone());
        Api::namespaced_with(client.clone(), &ns, &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    };
    let name = object.name_any();
    let applied = api.patch(&name, &PatchParams::apply("wasmop-tests").force(), &Patch::Apply(&object)).await?;
    if types.kind == "CustomResourceDefinition" {
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let crd = within(
            Duration::from_secs(30),
            &format!("CRD {name} established"),
            await_condition(crds, &name, conditions::is_crd_established()),
        )
        .await??
        .context("the CRD vanished")?;
        // Established is not yet served: the API server sets up the kind's handler after it, and
        // answers 404 until then. Wait until a list of the kind succeeds.
        let version = crd.spec.versions.iter().find(|v| v.storage).context("a CRD has a storage version")?;
        let gvk = kube::api::GroupVersionKind::gvk(&crd.spec.group, &version.name, &crd.spec.names.kind);
        let served: Api<DynamicObject> =
            Api::all_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural));
        within(Duration::from_secs(30), &format!("{} served", crd.spec.names.plural), async {
            while served.list(&kube::api::ListParams::default().limit(1)).await.is_err() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await?;
    }
    Ok(applied)
}

/// Awaits `future`, failing with `what` after `limit`.
pub async fn within<F: std::future::Future>(limit: Duration, what: &str, future: F) -> anyhow::Result<F::Output> {
    match tokio::time::timeout(limit, future).await {
        Ok(output) => Ok(output),
        Err(_) => bail!("timed out after {limit:?} waiting for {what}"),
    }
}

/// Polls `get` every 200 ms, for up to a minute, until `done` holds for what it returns.
pub async fn until<T>(
    what: &str,
    get: impl AsyncFnMut() -> anyhow::Result<T>,
    done: impl Fn(&T) -> bool,
) -> anyhow::Result<T> {
    until_within(Duration::from_secs(60), what, get, done).await
}

/// Like [`until`], waiting up to `limit`: for conditions whose setup is large (a thousand
/// objects), where a loaded machine may need minutes.
pub async fn until_within<T>(
    limit: Duration,
    what: &str,
    mut get: impl AsyncFnMut() -> anyhow::Result<T>,
    done: impl Fn(&T) -> bool,
) -> anyhow::Result<T> {
    within(limit, what, async {
        loop {
            let value = get().await?;
            if done(&value) {
                return anyhow::Ok(value);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await?
}

/// The status condition `type_` of `object`.
pub fn condition<'a>(object: &'a DynamicObject, type_: &str) -> Option<&'a serde_json::Value> {
    object.data["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_)
}

/// Waits up to `limit` for an Event on `object` in `ns` whose note contains `needle`; returns
/// the note.
pub async fn event_note(
    client: &Client,
    ns: &str,
    limit: Duration,
    object: &str,
    needle: &str,
) -> anyhow::Result<String> {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), ns);
    within(limit, &format!("an event on {object} mentioning {needle:?}"), async {
        loop {
            let list = events.list(&Default::default()).await?;
            let found = list.items.into_iter().find_map(|e| {
                let about = e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(object);
                e.note.filter(|n| about && n.contains(needle))
            });
            if let Some(note) = found {
                return anyhow::Ok(note);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await?
}

/// The Warning Events in `ns` about `object`.
pub async fn warnings_about(
    client: &Client,
    ns: &str,
    object: &str,
) -> anyhow::Result<Vec<k8s_openapi::api::events::v1::Event>> {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), ns);
    let list = events.list(&Default::default()).await?.items;
    Ok(list
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(object))
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .collect())
}

/// A compiled plugin's bytes, changed to export the reconciler interface of contract `version`
/// (same length as the host's version): a module "built against" another contract.
pub fn with_contract_version(bytes: &[u8], version: &str) -> Vec<u8> {
    let from = format!("wasmop:plugin/reconciler@{}", wasmop::runtime::bindings::CONTRACT_VERSION);
    let to = format!("wasmop:plugin/reconciler@{version}");
    assert_eq!(from.len(), to.len(), "the version keeps the length of {from}");
    let (from, to) = (from.as_bytes(), to.as_bytes());
    let mut patched = bytes.to_vec();
    let mut replaced = 0;
    let mut i = 0;
    while i + from.len() <= patched.len() {
        if &patched[i..i + from.len()] == from {
            patched[i..i + from.len()].copy_from_slice(to);
            replaced += 1;
        }
        i += 1;
    }
    assert!(replaced > 0, "the component names its exported interface");
    patched
}

/// A compiled plugin's bytes with the names `a` and `b` (of one length, under 128 bytes)
/// swapped wherever they occur whole, as a binary writes a name (its length, then its bytes):
/// still a valid component, whose functions so named have each other's type.
pub fn with_names_swapped(bytes: &[u8], a: &str, b: &str) -> Vec<u8> {
    assert!(a.len() == b.len() && a.len() < 128, "{a} and {b} have one length, written in a byte");
    let encoded = |name: &str| [&[name.len() as u8], name.as_bytes()].concat();
    let (a, b) = (encoded(a), encoded(b));
    let mut patched = bytes.to_vec();
    let mut i = 0;
    let mut swapped = 0;
    while i + a.len() <= patched.len() {
        let at = &mut patched[i..i + a.len()];
        let to = if at == a.as_slice() {
            &b
        } else if at == b.as_slice() {
            &a
        } else {
            i += 1;
            continue;
        };
        at.copy_from_slice(to);
        swapped += 1;
        i += a.len();
    }
    assert!(swapped > 0, "the component names neither");
    patched
}

/// The path of a compiled plugin in `plugins/dist`.
pub fn plugin(name: &str) -> PathBuf {
    let path = workspace_root().join("plugins/dist").join(format!("{name}.wasm"));
    assert!(path.exists(), "{} is missing: run `make plugins` first", path.display());
    path
}

/// A cache that holds nothing and refuses no kind: the guest's view for calls without a
/// cluster.
pub struct EmptyCache;

impl wasmop::runtime::CacheReader for EmptyCache {
    fn get<'a>(&'a self, _: &'a KindRef, _: Option<&'a str>, _: &'a str) -> BoxFuture<'a, GetResult> {
        futures::future::ready(Ok(None)).boxed()
    }
    fn list<'a>(&'a self, _: &'a KindRef, _: Option<&'a str>, _: Option<&'a str>) -> BoxFuture<'a, ListResult> {
        futures::future::ready(Ok(Vec::new())).boxed()
    }
    fn secondaries<'a>(&'a self, _: &'a KindRef) -> BoxFuture<'a, ListResult> {
        futures::future::ready(Ok(Vec::new())).boxed()
    }
}

/// A runtime with test-sized limits and a compile cache under `target/`.
pub fn runtime(limits: Limits) -> anyhow::Result<Runtime> {
    observed_runtime(limits, None)
}

/// Like [`runtime`], telling `metrics` about every call.
pub fn observed_runtime(limits: Limits, metrics: Option<Arc<Metrics>>) -> anyhow::Result<Runtime> {
    let cache_dir = Some(workspace_root().join("target/wasmop-test-cache"));
    let observer = metrics.map(|m| m as Arc<dyn wasmop::runtime::CallObserver>);
    Ok(Runtime::new(RuntimeConfig { cache_dir, limits, observer, dev_source: None })?)
}

/// Host settings for tests: every plugin runs in `namespace` unless overridden.
pub fn settings(namespace: &str, config: HostConfig) -> HostSettings {
    HostSettings {
        shards: None,
        config,
        defaults: Defaults { namespace: Some(namespace.to_string()), max_concurrent_reconciles: 4, record_dir: None },
        max_concurrent_reconciles: 16,
        fence: wasmop::fence::Fence::unfenced(),
        shutdown: wasmop::shutdown::Shutdown::default(),
        cache: None,
    }
}

/// `config` with the operator's allowances for `plugin` added (what its own code cannot give it):
/// it may have the Secrets `secrets` (names in the host's namespace) read for it, and send secret
/// headers to the plain-http `origins` (`http://host:port`).
pub fn allowing(mut config: HostConfig, plugin: &str, secrets: &[&str], origins: &[&str]) -> HostConfig {
    let overrides = config.plugins.entry(plugin.to_string()).or_default();
    let allowed = secrets.iter().map(|name| wasmop::settings::AllowedSecret { namespace: None, name: (*name).into() });
    overrides.allowed_secrets = Some(allowed.collect());
    overrides.allow_plain_http_secrets = Some(origins.iter().map(|origin| (*origin).to_string()).collect());
    config
}

/// The fixtures that watch Secrets: `fixture-link` (metadata only) and `fixture-record`.
pub const SECRET_WATCHERS: [&str; 2] = ["fixture-link", "fixture-record"];

/// `config` with the operator's word that the fixtures that watch Secrets may
/// (`allowSecretWatches: true`, what their own code cannot give them), unless it says otherwise.
pub fn allowing_secret_watches(mut config: HostConfig) -> HostConfig {
    for plugin in SECRET_WATCHERS {
        config.plugins.entry(plugin.to_string()).or_default().allow_secret_watches.get_or_insert(true);
    }
    config
}

/// A host on `namespace` without plugins (install them with [`Host::install`]), whose calls are
/// timed into its metrics; its log goes to the test's captured output.
pub fn bare_host(client: &Client, namespace: &str) -> anyhow::Result<Arc<Host>> {
    in_process::overlaps();
    let metrics = Metrics::new();
    let runtime = Arc::new(observed_runtime(Limits::default(), Some(metrics.clone()))?);
    let clusters = Clusters::new(client.clone());
    Ok(Arc::new(Host::new(clusters, runtime, metrics, settings(namespace, HostConfig::default()))))
}

/// A host running in-process on one namespace; its plugins stop when it is dropped, and its log
/// goes to the test's captured output.
pub struct RunningHost {
    host: Host,
}

impl RunningHost {
    /// Loads `plugins` (names in `plugins/dist`) and runs them against `namespace`.
    pub fn start(client: &Client, namespace: &str, plugins: &[&str], limits: Limits) -> anyhow::Result<Self> {
        Self::start_on(Clusters::new(client.clone()), namespace, plugins, limits, HostConfig::default())
    }

    /// Like [`RunningHost::start`] with the configuration file `config` (see [`allowing`]).
    pub fn start_with_config(
        client: &Client,
        namespace: &str,
        plugins: &[&str],
        config: HostConfig,
    ) -> anyhow::Result<Self> {
        Self::start_on(Clusters::new(client.clone()), namespace, plugins, Limits::default(), config)
    }

    /// Like [`RunningHost::start`] with deployment-time overrides given as YAML.
    pub fn start_with_yaml(client: &Client, namespace: &str, plugins: &[&str], yaml: &str) -> anyhow::Result<Self> {
        Self::start_on(
            Clusters::new(client.clone()),
            namespace,
            plugins,
            Limits::default(),
            serde_saphyr::from_str(yaml)?,
        )
    }

    /// Like [`RunningHost::start`] with bounded caches: the host's budget is `budget`.
    pub fn start_bounded(
        client: &Client,
        namespace: &str,
        plugins: &[&str],
        budget: wasmop::informer::Budget,
    ) -> anyhow::Result<Self> {
        let mut settings = settings(namespace, HostConfig::default());
        settings.cache = Some(budget);
        Self::launch(Clusters::new(client.clone()), plugins, Limits::default(), settings)
    }

    /// Like [`RunningHost::start`] on the given clusters, with overrides.
    pub fn start_on(
        clusters: Clusters,
        namespace: &str,
        plugins: &[&str],
        limits: Limits,
        config: HostConfig,
    ) -> anyhow::Result<Self> {
        Self::launch(clusters, plugins, limits, settings(namespace, config))
    }

    /// Runs `plugins` under `settings`, whose configuration lets the fixtures that watch
    /// Secrets do so ([`allowing_secret_watches`]).
    fn launch(
        clusters: Clusters,
        plugins: &[&str],
        limits: Limits,
        mut settings: HostSettings,
    ) -> anyhow::Result<Self> {
        settings.config = allowing_secret_watches(settings.config);
        // The host's log goes to the test's captured output.
        in_process::overlaps();
        let metrics = Metrics::new();
        let runtime = Arc::new(observed_runtime(limits, Some(metrics.clone()))?);
        let files: Vec<PathBuf> = plugins.iter().map(|p| plugin(p)).collect();
        let modules = wasmop::host::load_all(&runtime, &files, &settings.config)?;
        let host = Host::new(clusters, runtime, metrics, settings);
        for module in modules {
            host.start(module)?;
        }
        host.loaded();
        Ok(Self { host })
    }

    /// The host, to start and stop plugins or look at its watches.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// Stops every plugin and waits for reconciles in flight; panics if that takes a minute.
    pub async fn stop(self) {
        within(Duration::from_secs(60), "the host to stop", self.host.stop_all()).await.expect("the host stops");
    }
}

/// The ConfigMap `module` holding a plugin module as `swap.wasm`, as the ReconcilerPlugin tests
/// name it in `spec.module.configMap`.
pub fn module_map(bytes: &[u8]) -> k8s_openapi::api::core::v1::ConfigMap {
    let data = std::collections::BTreeMap::from([("swap.wasm".to_string(), k8s_openapi::ByteString(bytes.to_vec()))]);
    k8s_openapi::api::core::v1::ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some("module".into()), ..Default::default() },
        binary_data: Some(data),
        ..Default::default()
    }
}

/// A host loading the plugins of `ReconcilerPlugin` resources, as `wasmop run
/// --reconciler-plugins` does.
pub struct ResourceHost {
    /// The host.
    pub host: Arc<Host>,
    stop: tokio_util::sync::CancellationToken,
    loader: tokio::task::JoinHandle<()>,
}

impl ResourceHost {
    /// Starts a host with `settings` and its resource loader.
    pub fn start(client: &Client, settings: HostSettings, metrics: Arc<Metrics>) -> anyhow::Result<Self> {
        Self::start_with(client, settings, metrics, wasmop::loader::fetch::FetchPolicy::default())
    }

    /// Starts a host with `settings` and its resource loader, fetching modules under `policy`.
    pub fn start_with(
        client: &Client,
        settings: HostSettings,
        metrics: Arc<Metrics>,
        policy: wasmop::loader::fetch::FetchPolicy,
    ) -> anyhow::Result<Self> {
        let runtime = Arc::new(observed_runtime(Limits::default(), Some(metrics.clone()))?);
        let host = Arc::new(Host::new(Clusters::new(client.clone()), runtime, metrics, settings));
        let stop = tokio_util::sync::CancellationToken::new();
        let loader = tokio::spawn(wasmop::loader::resource::run(host.clone(), policy, stop.clone()));
        Ok(Self { host, stop, loader })
    }

    /// Stops the loader.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.stop.cancel();
        Ok(self.loader.await?)
    }
}

/// A `ReconcilerPlugin` named `name` whose module is [`module_map`] in `namespace`, reconciling
/// in `namespace`.
pub fn reconciler_plugin(name: &str, namespace: &str) -> anyhow::Result<DynamicObject> {
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "wasmop.dev/v1alpha1", "kind": "ReconcilerPlugin", "metadata": { "name": name },
        "spec": { "module": { "configMap": { "namespace": namespace, "name": "module", "key": "swap.wasm" } },
                  "overrides": { "namespace": namespace } }
    }))?)
}

/// Waits up to 90 s until `name` exists and satisfies `condition`; returns it.
pub async fn wait_until(
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    condition: impl Fn(&DynamicObject) -> bool + Send + 'static,
) -> anyhow::Result<DynamicObject> {
    let waited = await_condition(api.clone(), name, move |o: Option<&DynamicObject>| o.is_some_and(&condition));
    let found = within(Duration::from_secs(90), &format!("{name}: {what}"), waited).await??;
    found.ok_or_else(|| anyhow::anyhow!("{name} vanished while waiting for {what}"))
}

/// The request of a first reconcile of `object`, without dependents, external state or an
/// inbound payload, as tests and the bench call `reconcile` directly.
pub fn first_request(object: &serde_json::Value) -> ReconcileRequest {
    ReconcileRequest {
        object: object.to_string(),
        attempt: 0,
        last_attempt: false,
        dependents: Vec::new(),
        external: Vec::new(),
        inbound: None,
    }
}

/// The suffixes of a sample's builds in each language: `greeting` (Rust), `greeting-py`
/// (Python), `greeting-ts` (TypeScript).
pub const LANGUAGES: [(&str, &str); 3] = [("rust", ""), ("python", "-py"), ("typescript", "-ts")];

/// The suffix of a sample's Go build (`greeting-go`), for the samples written in Go too.
pub const GO: (&str, &str) = ("go", "-go");

/// Turns `async fn NAME(plugin: &str) -> anyhow::Result<()>` into one test per language the
/// sample `BASE` is written in (a module `NAME` with tests `rust`, `python` and `typescript`),
/// each passing the file name of that language's build (see [`LANGUAGES`]). With `and go`, a
/// test `go` runs the sample's Go build too (see [`GO`]).
#[macro_export]
macro_rules! in_every_language {
    ($name:ident, $base:literal, and go) => {
        $crate::in_every_language!($name, $base, {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn go() -> anyhow::Result<()> {
                super::$name(concat!($base, "-go")).await
            }
        });
    };
    ($name:ident, $base:literal) => {
        $crate::in_every_language!($name, $base, {});
    };
    ($name:ident, $base:literal, { $($more:item)* }) => {
        mod $name {
            $($more)*
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn rust() -> anyhow::Result<()> {
                super::$name($base).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn python() -> anyhow::Result<()> {
                super::$name(concat!($base, "-py")).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn typescript() -> anyhow::Result<()> {
                super::$name(concat!($base, "-ts")).await
            }
        }
    };
}
