//! The in-cluster deployment, proven without a kubelet: the image `make test-image` built
//! (`target/test-image/wasmop.tar`: `make image`'s, less optimized) is unpacked with umoci, and its entrypoint runs from the unpacked
//! root filesystem as the image's non-root user, with a kubeconfig made from a token of the
//! ServiceAccount the manifests in `deploy/` create, so with exactly the RBAC they grant. It runs
//! sharded, as `deploy/sharded/` runs it: the shipped plugins reconcile, the host leads on a Lease
//! and holds its shard membership Lease in its own namespace, and a write the RBAC does not grant
//! fails with an error naming the verb and the resource. The image's labels name the version
//! and the revision its host reports.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::config::Kubeconfig;
use kube::runtime::wait::await_condition;
use wasmop_tests::{
    apply, apply_file, client, condition, kubeconfig, namespace, plugin, relocation_bytes, section_names, within,
    workspace_root,
};

const WAIT: Duration = Duration::from_secs(60);
/// The manifests' namespace and ServiceAccount.
const HOST_NAMESPACE: &str = "wasmop";
const LEASE: &str = "in-cluster-test";
/// The shard group the host joins (`--shards`).
const SHARD_GROUP: &str = "in-cluster-test";

/// The image, unpacked: its root filesystem and what its configuration says to run.
struct Unpacked {
    dir: PathBuf,
    rootfs: PathBuf,
    entrypoint: PathBuf,
    user: (u64, u64),
    env: Vec<(String, String)>,
}

fn run(command: &mut Command) -> anyhow::Result<()> {
    let out = command.output()?;
    anyhow::ensure!(out.status.success(), "{command:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    Ok(())
}

/// Unpacks the OCI archive into `dir` with umoci.
fn unpack(dir: &Path) -> anyhow::Result<Unpacked> {
    let archive = workspace_root().join("target/test-image/wasmop.tar");
    anyhow::ensure!(archive.exists(), "{} is missing: `make test-image` builds it", archive.display());
    let layout = dir.join("layout");
    std::fs::create_dir_all(&layout)?;
    run(Command::new("tar").arg("-xf").arg(&archive).arg("-C").arg(&layout))?;
    let index: serde_json::Value = serde_json::from_slice(&std::fs::read(layout.join("index.json"))?)?;
    let tag = index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("the archive's index names no image: {index}"))?;
    let bundle = dir.join("bundle");
    run(Command::new("umoci").arg("unpack").arg("--image").arg(format!("{}:{tag}", layout.display())).arg(&bundle))?;
    // umoci makes the bundle private to its owner; the image's user must reach the root inside.
    std::fs::set_permissions(&bundle, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let config: serde_json::Value = serde_json::from_slice(&std::fs::read(bundle.join("config.json"))?)?;
    let process = &config["process"];
    let entrypoint = process["args"][0].as_str().ok_or_else(|| anyhow::anyhow!("no entrypoint: {process}"))?;
    let env = process["env"].as_array().into_iter().flatten().filter_map(|e| e.as_str()?.split_once('='));
    let rootfs = bundle.join("rootfs");
    Ok(Unpacked {
        dir: dir.to_path_buf(),
        entrypoint: rootfs.join(entrypoint.trim_start_matches('/')),
        rootfs,
        user: (process["user"]["uid"].as_u64().unwrap_or(0), process["user"]["gid"].as_u64().unwrap_or(0)),
        env: env.map(|(k, v)| (k.to_string(), v.to_string())).collect(),
    })
}

/// A blob of the OCI layout at `layout`, by its digest (`sha256:...`), as JSON.
fn blob(layout: &Path, digest: &serde_json::Value) -> anyhow::Result<serde_json::Value> {
    let digest = digest.as_str().ok_or_else(|| anyhow::anyhow!("not a digest: {digest}"))?;
    let (algorithm, hex) = digest.split_once(':').ok_or_else(|| anyhow::anyhow!("not a digest: {digest}"))?;
    Ok(serde_json::from_slice(&std::fs::read(layout.join("blobs").join(algorithm).join(hex))?)?)
}

/// The labels of the image in the OCI layout at `layout` (its configuration's `Labels`).
fn labels(layout: &Path) -> anyhow::Result<serde_json::Map<String, serde_json::Value>> {
    let index: serde_json::Value = serde_json::from_slice(&std::fs::read(layout.join("index.json"))?)?;
    let mut manifest = blob(layout, &index["manifests"][0]["digest"])?;
    // An index of its own (as some builders write), naming the image's manifest.
    if manifest.get("manifests").is_some() {
        manifest = blob(layout, &manifest["manifests"][0]["digest"])?;
    }
    let config = blob(layout, &manifest["config"]["digest"])?;
    Ok(config["config"]["Labels"].as_object().cloned().unwrap_or_default())
}

/// The `origin` remote of the workspace's git checkout without credentials, as
/// `deploy/image/build.sh` labels the image with it unless `WASMOP_SOURCE` says (`None`: no
/// git, or no such remote).
fn origin() -> Option<String> {
    let out = Command::new("git").args(["remote", "get-url", "origin"]).current_dir(workspace_root()).output().ok()?;
    let url = String::from_utf8(out.stdout).ok()?.trim().to_string();
    let without_credentials = match url.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('/') {
            Some((authority, path)) => {
                let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
                format!("{scheme}://{host}/{path}")
            }
            None => url.clone(),
        },
        None => url.clone(),
    };
    (out.status.success() && !url.is_empty()).then_some(without_credentials)
}

/// The image says what it is (`deploy/image/Containerfile`): its title and licence (the
/// workspace's), the version and the git revision of the host it holds, as that host's `wasmop
/// version` reports them, and where its source is. Needs no cluster.
#[test]
fn the_image_is_labelled_with_the_version_and_revision_its_host_reports() -> anyhow::Result<()> {
    let dir = workspace_root().join(format!("target/image-labels-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let image = unpack(&dir)?;
    let labels = labels(&dir.join("layout"))?;
    let label = |name: &str| {
        let value = labels.get(&format!("org.opencontainers.image.{name}")).and_then(serde_json::Value::as_str);
        value.unwrap_or_else(|| panic!("the image has no label {name}: {labels:?}")).to_string()
    };
    let reported = Command::new(&image.entrypoint).arg("version").env_clear().output()?;
    anyhow::ensure!(reported.status.success(), "{}", String::from_utf8_lossy(&reported.stderr));
    let reported = String::from_utf8(reported.stdout)?;
    let (version, revision) = (label("version"), label("revision"));
    assert_eq!(version, env!("CARGO_PKG_VERSION"));
    let host = match revision.as_str() {
        "" => format!("wasmop {version}"),
        revision => format!("wasmop {version} (revision {revision})"),
    };
    assert_eq!(reported.lines().next(), Some(host.as_str()), "the host reports what the labels say");
    if workspace_root().join(".git").exists() {
        let commit = revision.strip_suffix("-dirty").unwrap_or(&revision);
        assert!(commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()), "a git commit: {revision}");
    }
    assert_eq!(label("title"), "wasmop");
    let cargo = std::fs::read_to_string(workspace_root().join("Cargo.toml"))?;
    let license = cargo.lines().find_map(|line| line.strip_prefix("license = \"")?.strip_suffix('"'));
    assert_eq!(Some(label("licenses").as_str()), license, "the workspace's licence");
    let source = std::env::var("WASMOP_SOURCE").ok().or_else(origin).unwrap_or_default();
    assert_eq!(label("source"), source, "WASMOP_SOURCE, else the git remote `origin` without credentials");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// A kubeconfig for the test API server that authenticates with `token`.
fn token_kubeconfig(token: &str) -> anyhow::Result<serde_json::Value> {
    let admin = Kubeconfig::read_from(kubeconfig())?;
    let cluster = admin.clusters.first().and_then(|c| c.cluster.clone()).expect("the kubeconfig has a cluster");
    Ok(serde_json::json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{ "name": "test", "cluster": cluster }],
        "users": [{ "name": "wasmop", "user": { "token": token } }],
        "contexts": [{ "name": "wasmop", "context": { "cluster": "test", "user": "wasmop" } }],
        "current-context": "wasmop",
    }))
}

/// The host process from the image's root, stopped when dropped.
struct Host(Child);

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Unpacked {
    /// Runs the entrypoint as the image's user (when this process may switch users) with the
    /// image's environment, `kubeconfig` and `args`; its log goes to `host.log` beside it.
    fn start(&self, kubeconfig: &Path, args: &[&str]) -> anyhow::Result<Host> {
        let root = is_root();
        let mut command = if root {
            let (uid, gid) = self.user;
            let mut c = Command::new("setpriv");
            c.args(["--reuid", &uid.to_string(), "--regid", &gid.to_string(), "--clear-groups", "--"]);
            c.arg(&self.entrypoint);
            c
        } else {
            Command::new(&self.entrypoint)
        };
        let log = std::fs::File::create(self.dir.join("host.log"))?;
        command
            .args(args)
            .env_clear()
            .envs(self.env.iter().cloned())
            .env("KUBECONFIG", kubeconfig)
            .env("POD_NAME", "in-cluster-test")
            .current_dir(&self.rootfs)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        Ok(Host(command.spawn()?))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("host.log")).unwrap_or_default()
    }
}

/// Whether this process runs as root (and so may run the host as the image's user).
fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|out| out.stdout.trim_ascii() == b"0")
}

/// Applies `deploy/`'s namespace, CRD, ServiceAccount and RBAC for real (the Deployment would
/// never run here: there is no kubelet).
async fn apply_manifests(client: &Client) -> anyhow::Result<()> {
    for file in ["namespace.yaml", "crd.yaml", "serviceaccount.yaml", "rbac.yaml"] {
        apply_file(client, &workspace_root().join("deploy").join(file), Some(HOST_NAMESPACE)).await?;
    }
    Ok(())
}

/// A token of the manifests' ServiceAccount, valid for an hour.
async fn service_account_token(client: &Client) -> anyhow::Result<String> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), HOST_NAMESPACE);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec { expiration_seconds: Some(3600), ..TokenRequestSpec::default() }),
        ..TokenRequest::default()
    };
    let issued = accounts.create_token_request("wasmop", &PostParams::default(), &request).await?;
    issued.status.and_then(|s| s.token).ok_or_else(|| anyhow::anyhow!("the TokenRequest has no token"))
}

fn api(client: &Client, ns: &str, group: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(group, "v1", kind);
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, plural))
}

/// The manifests' ClusterRole without the write verbs on Ingresses, as if the operator forgot
/// to grant one dependent kind of a plugin.
async fn revoke_ingress_writes(client: &Client) -> anyhow::Result<()> {
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let mut role = roles.get("wasmop").await?;
    for rule in role.rules.iter_mut().flatten() {
        if rule.resources.as_ref().is_some_and(|r| r.iter().any(|r| r == "ingresses")) {
            rule.verbs = ["get", "list", "watch"].map(String::from).to_vec();
        }
    }
    role.metadata.managed_fields = None;
    roles.replace("wasmop", &PostParams::default(), &role).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_runs_from_its_unpacked_root_with_the_manifests_service_account() -> anyhow::Result<()> {
    let client = client().await?;
    let dir = workspace_root().join(format!("target/in-cluster-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let image = unpack(&dir)?;
    assert_ne!(image.user.0, 0, "the image runs as a non-root user");
    assert!(image.rootfs.join("wasmop").exists(), "the image holds the host at /wasmop");
    let relocations = relocation_bytes(&image.entrypoint)?;
    assert!(
        relocations.relr > 0 && relocations.rela < 64 * 1024,
        "the image's host packs its relocations (host/build.rs): {relocations:?}"
    );
    let sections = section_names(&image.entrypoint)?;
    assert!(
        !sections.iter().any(|s| s == ".symtab" || s.starts_with(".debug")),
        "the image's host is stripped, without debug info (Cargo.toml, profile image): {sections:?}"
    );
    apply_manifests(&client).await?;
    apply_file(&client, &workspace_root().join("plugins/greeting/crd.yaml"), None).await?;
    apply_file(&client, &workspace_root().join("plugins/webpage/crd.yaml"), None).await?;
    let ns = namespace(&client, "in-cluster").await?;

    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, serde_json::to_vec(&token_kubeconfig(&service_account_token(&client).await?)?)?)?;
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins)?;
    for name in ["greeting", "webpage"] {
        std::fs::copy(plugin(name), plugins.join(format!("{name}.wasm")))?;
    }
    let plugins = plugins.to_string_lossy();
    // Sharded (as `deploy/sharded/` runs it), which also elects a leader: both Leases' RBAC.
    let args = ["run", "--namespace", &ns, "--plugins", &plugins, "--shards", "--shard-group", SHARD_GROUP];
    let election = ["--leader-election-namespace", HOST_NAMESPACE, "--leader-election-id", LEASE];
    let host = image.start(&kubeconfig, &[&args[..], &election[..]].concat())?;
    let outcome = scenario(&client, &ns).await;
    drop(host);
    // Restore the manifests' RBAC whatever happened.
    apply_file(&client, &workspace_root().join("deploy/rbac.yaml"), Some(HOST_NAMESPACE)).await?;
    if outcome.is_err() {
        eprintln!("the host's log:\n{}", image.log());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    outcome
}

/// What the host, running with the manifests' RBAC, must do.
async fn scenario(client: &Client, ns: &str) -> anyhow::Result<()> {
    let greetings = api(client, ns, "example.wasmop.dev", "Greeting", "greetings");
    let greeting = serde_json::json!({
        "apiVersion": "example.wasmop.dev/v1", "kind": "Greeting",
        "metadata": { "name": "hi", "namespace": ns }, "spec": { "name": "cluster" }
    });
    apply(client, greeting, None).await?;
    let greeted = |g: Option<&DynamicObject>| {
        g.is_some_and(|g| {
            g.data["status"]["message"] == "Hello, cluster!"
                && condition(g, "Ready").is_some_and(|c| c["status"] == "True")
        })
    };
    within(WAIT, "the Greeting greeted and Ready", await_condition(greetings, "hi", greeted)).await??;

    let pages = api(client, ns, "sample.wasmop.dev", "WebPage", "webpages");
    let page = |exposed: bool| {
        serde_json::json!({
            "apiVersion": "sample.wasmop.dev/v1", "kind": "WebPage",
            "metadata": { "name": "page", "namespace": ns }, "spec": { "html": "<h1>hi</h1>", "exposed": exposed }
        })
    };
    apply(client, page(false), None).await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    within(WAIT, "the WebPage's ConfigMap and Service", async {
        while config_maps.get_opt("page-html").await.ok().flatten().is_none()
            || services.get_opt("page").await.ok().flatten().is_none()
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await?;
    let listed = |p: Option<&DynamicObject>| p.is_some_and(|p| p.data["status"]["htmlConfigMap"] == "page-html");
    within(WAIT, "the WebPage's status", await_condition(pages.clone(), "page", listed)).await??;

    let leases: Api<Lease> = Api::namespaced(client.clone(), HOST_NAMESPACE);
    let holder = leases.get(LEASE).await?.spec.and_then(|s| s.holder_identity);
    // The holder is the pod's name and the process id.
    let holder = holder.unwrap_or_default();
    anyhow::ensure!(holder.starts_with("in-cluster-test_"), "the host leads on the Lease in its namespace: {holder}");
    let selector = format!("wasmop.dev/shard-group={SHARD_GROUP}");
    let members = leases.list(&kube::api::ListParams::default().labels(&selector)).await?.items;
    let holders: Vec<String> = members.into_iter().filter_map(|l| l.spec?.holder_identity).collect();
    anyhow::ensure!(
        holders.len() == 1 && holders[0].starts_with("in-cluster-test_"),
        "the host holds its shard membership Lease in its namespace: {holders:?}"
    );

    revoke_ingress_writes(client).await?;
    apply(client, page(true), None).await?;
    let denied = |p: Option<&DynamicObject>| {
        p.is_some_and(|p| {
            ["Ready", "Degraded"].iter().filter_map(|t| condition(p, t)).any(|c| {
                let message = c["message"].as_str().unwrap_or_default();
                message.contains(r#"cannot patch resource "ingresses""#) && message.contains("RBAC")
            })
        })
    };
    let page = within(WAIT, "a condition naming the denied verb and resource", await_condition(pages, "page", denied))
        .await??
        .expect("the WebPage exists");
    let reported = condition(&page, "Degraded").or(condition(&page, "Ready")).expect("a condition");
    eprintln!("in-cluster: the denied write is reported as {reported}");
    Ok(())
}
