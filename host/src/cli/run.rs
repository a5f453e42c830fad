//! `wasmop run`: plugins run against a cluster, as one replica or many (leader election,
//! shards), until SIGTERM or Ctrl-C.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;
use wasmop::fence::Fence;
use wasmop::host::{Host, HostSettings};
use wasmop::inbound::Endpoint;
use wasmop::informer::{ClusterSpec, Clusters};
use wasmop::leader::{self, LeaseSettings};
use wasmop::listener::tls::TlsFiles;
use wasmop::loader::Sources;
use wasmop::loader::fetch::FetchPolicy;
use wasmop::loader::oci::Registries;
use wasmop::metrics::Metrics;
use wasmop::runtime::dev::DevSource;
use wasmop::settings::{Defaults, HostConfig};
use wasmop::shards::{self, MembershipSettings};
use wasmop::shutdown::Shutdown;
use wasmop::webhook::certificate::{Certificates, Source, files::Files, managed::Managed};
use wasmop::webhook::configurations::{Endpoint as WebhookEndpoint, Target};

use super::runtime::RuntimeArgs;

/// Run plugins against the cluster of the current kubeconfig (KUBECONFIG, ~/.kube/config or
/// in-cluster). Log verbosity follows RUST_LOG (default: info).
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// A plugin file; repeat for more.
    #[arg(long = "plugin", value_name = "FILE.wasm")]
    plugins: Vec<PathBuf>,
    /// A directory: every *.wasm file in it is a plugin. Repeat for more.
    #[arg(long = "plugins", value_name = "DIR")]
    plugin_dirs: Vec<PathBuf>,
    /// Reload plugin files and directories when they change (hot reload), and the candidate
    /// files of `--config`.
    #[arg(long)]
    watch: bool,
    /// Develop a plugin from its source: give the plugins this directory, read-only, at
    /// `/plugin`, and reload them whenever a file in it changes (implies --watch). Run the
    /// language's dev runtime as the plugin: it runs the source it reads there, so a saved edit
    /// takes effect without a build. For development only: not with --reconciler-plugins, and
    /// no other way of loading plugins gives them a directory.
    #[arg(long, value_name = "DIR", conflicts_with = "reconciler_plugins")]
    dev_source: Option<PathBuf>,
    /// Also run the plugins that ReconcilerPlugin resources name (install the CRD with
    /// `wasmop crd | kubectl apply -f -`).
    #[arg(long, env = "WASMOP_RECONCILER_PLUGINS")]
    reconciler_plugins: bool,
    /// A directory whose files ReconcilerPlugin resources may name as `spec.module.file`
    /// (symbolic links and `..` resolved first). Repeat for more; with none, file sources are
    /// refused.
    #[arg(long = "allow-module-dir", value_name = "DIR")]
    allow_module_dirs: Vec<PathBuf>,
    /// A registry (HOST:PORT, as references name it) that ReconcilerPlugin resources' OCI
    /// modules are pulled from over plain http instead of https; repeat for more.
    #[arg(
        long = "insecure-registry",
        value_name = "HOST:PORT",
        env = "WASMOP_INSECURE_REGISTRIES",
        value_delimiter = ','
    )]
    insecure_registries: Vec<String>,
    /// Only watch and reconcile objects in this namespace (a plugin's override wins).
    #[arg(long, short, env = "WASMOP_NAMESPACE")]
    namespace: Option<String>,
    /// Reconciles in flight across all plugins; plugins share them first come, first served.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..))]
    max_concurrent_reconciles: u16,
    /// Reconciles in flight per plugin when neither the plugin nor its overrides say (one
    /// object never runs twice at once).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    plugin_concurrency: u16,
    /// Threads that run the host and its plugins' calls. Default: the CPUs this process may use
    /// (its cgroup's CPU quota and affinity counted), as tokio, kube-rs and controller-runtime
    /// size their pools; a pod limited to one CPU gets one.
    #[arg(long, env = "WASMOP_WORKER_THREADS", value_parser = clap::value_parser!(u16).range(1..))]
    worker_threads: Option<u16>,
    /// Bound the caches of every plugin's primaries and declared watches to this many MiB in
    /// all (by an estimate of heap bytes): cold objects are evicted and fetched from the API
    /// server again when read. A plugin's `cache.budgetMib` is its share of it. Unset: every
    /// object is cached, except by plugins with a budget of their own.
    #[arg(long, value_name = "MIB")]
    cache_budget_mib: Option<u64>,
    /// With `--cache-budget-mib`: also evict objects not read or changed for this long.
    #[arg(long, value_parser = humantime::parse_duration, requires = "cache_budget_mib")]
    cache_idle: Option<Duration>,
    /// Record reconciles into this directory, each plugin's in `DIR/<plugin>/`, as a plugin's
    /// `record` setting says (default: failed reconciles only, Secrets redacted, 1 MiB per
    /// record, 256 MiB per plugin); replay one with `wasmop replay`.
    #[arg(long, value_name = "DIR", env = "WASMOP_RECORD")]
    record: Option<PathBuf>,
    /// YAML file of deployment-time overrides per plugin (`plugins:`) and of candidate versions
    /// shadowed beside plugins run from files (`candidates:`, module file by plugin name; see
    /// the README).
    #[arg(long, value_name = "FILE", env = "WASMOP_CONFIG")]
    config: Option<PathBuf>,
    /// A remote cluster that plugin watches may name: NAME=CONTEXT (from the kubeconfig in use),
    /// NAME=CONTEXT@KUBECONFIG or NAME=@KUBECONFIG. Repeat for more.
    #[arg(long = "cluster", value_name = "NAME=CONTEXT[@FILE]")]
    clusters: Vec<ClusterSpec>,
    /// Elect a leader among the replicas on a Lease: only the leader reconciles and writes;
    /// the others keep their caches warm to take over.
    #[arg(long, env = "WASMOP_LEADER_ELECT")]
    leader_elect: bool,
    /// Shard the primaries across the replicas: each holds a Lease of its own in the election
    /// namespace, the live ones split the objects, and each reconciles its share; plugins with
    /// `sharding: none` run on the elected leader (implies --leader-elect).
    #[arg(long, env = "WASMOP_SHARDS")]
    shards: bool,
    /// The replicas that split the same primaries: their Leases' label and name prefix.
    #[arg(long, default_value = "wasmop-shards", requires = "shards")]
    shard_group: String,
    /// Where sharded watches are filtered: `auto` asks the API server to (KEP-5866, when it
    /// honours it, checked from its answer) and filters here otherwise; `client` always
    /// filters here.
    #[arg(long, value_enum, default_value_t = ShardFilter::Auto, requires = "shards")]
    shard_filter: ShardFilter,
    /// The Lease's namespace (default: the pod's, from POD_NAMESPACE, else `default`).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    leader_election_namespace: String,
    /// The Lease's name.
    #[arg(long, default_value = "wasmop-leader")]
    leader_election_id: String,
    /// How long a lease holds without renewal.
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    lease_duration: Duration,
    /// How long the leader keeps writing after its last successful renewal (less than the lease
    /// duration: it stops before anyone else can take over).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    renew_deadline: Duration,
    /// How often replicas try to acquire or renew the lease.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    retry_period: Duration,
    /// On SIGTERM/SIGINT no reconcile starts any more; this is how long those in flight may take
    /// to finish before they are cancelled, the lease released and the host exits.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    shutdown_timeout: Duration,
    /// Serve Prometheus metrics on /metrics (and /healthz, /readyz) at this address, e.g. 0.0.0.0:8080.
    #[arg(long, env = "WASMOP_METRICS_ADDRESS")]
    metrics_address: Option<std::net::SocketAddr>,
    /// Take inbound events (POST /plugins/<name>/events) on this address, e.g. 0.0.0.0:8443; off
    /// by default. Plugins that declare `inbound` accept them with their bearer token.
    #[arg(long, env = "WASMOP_EVENTS_ADDR")]
    events_addr: Option<std::net::SocketAddr>,
    /// Serve the inbound events over TLS with this certificate chain (PEM); with
    /// --events-tls-key.
    #[arg(long, value_name = "FILE", requires_all = ["events_addr", "events_tls_key"])]
    events_tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --events-tls-cert.
    #[arg(long, value_name = "FILE", requires_all = ["events_addr", "events_tls_cert"])]
    events_tls_key: Option<PathBuf>,
    /// How long an events client may take to send a request's headers; an idle connection is
    /// closed after it too.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    events_header_timeout: Duration,
    /// How long an events client may take to send a request's body (else 408).
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    events_body_timeout: Duration,
    /// How many events connections are served at once; more wait to be accepted.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    events_max_connections: u32,
    /// Where the other replicas forward the inbound events this one runs (HOST:PORT), written
    /// into its Lease with --leader-elect or --shards. Default: $POD_IP and the port of
    /// --events-addr in a pod, else the address --events-addr is bound to.
    #[arg(long, value_name = "HOST:PORT", env = "WASMOP_EVENTS_ADVERTISE_ADDR", requires = "events_addr")]
    events_advertise_addr: Option<String>,
    /// Serve the plugins' admission and conversion webhooks over HTTPS on this address, e.g.
    /// 0.0.0.0:9443; off by default. Every replica serves them, leader or not.
    #[arg(long, env = "WASMOP_WEBHOOK_ADDR")]
    webhook_addr: Option<std::net::SocketAddr>,
    /// The webhook endpoint's certificate chain (PEM), read again when it changes; with
    /// --webhook-key. Default: a CA and certificate the host makes and keeps in --webhook-secret.
    #[arg(long, value_name = "FILE", requires_all = ["webhook_addr", "webhook_key"])]
    webhook_cert: Option<PathBuf>,
    /// The private key (PEM) of --webhook-cert.
    #[arg(long, value_name = "FILE", requires_all = ["webhook_addr", "webhook_cert"])]
    webhook_key: Option<PathBuf>,
    /// The CA bundle (PEM) the webhook configurations tell the API server to trust, with
    /// --webhook-cert. Default: the certificate chain.
    #[arg(long, value_name = "FILE", requires = "webhook_cert")]
    webhook_ca: Option<PathBuf>,
    /// The Secret, in the election namespace, holding the webhook certificates the host manages;
    /// shared by every replica.
    #[arg(long, value_name = "NAME", default_value = "wasmop-webhook-certs")]
    webhook_secret: String,
    /// Where the API server reaches the webhook endpoint, e.g. https://127.0.0.1:9443: the host
    /// writes each plugin's webhook configurations with this URL.
    #[arg(long, value_name = "URL", requires = "webhook_addr", conflicts_with = "webhook_service")]
    webhook_url: Option<String>,
    /// The Service through which the API server reaches the webhook endpoint: the host writes
    /// each plugin's webhook configurations with it.
    #[arg(long, value_name = "NAMESPACE/NAME[:PORT]", requires = "webhook_addr")]
    webhook_service: Option<WebhookEndpoint>,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

impl RunArgs {
    /// The threads that run the host and its plugins' calls: `--worker-threads`, else the CPUs
    /// this process may use.
    pub fn worker_threads(&self) -> usize {
        self.worker_threads.map_or_else(available_cpus, usize::from)
    }

    /// The inbound events listener's certificate and key, when both are given.
    fn events_tls(&self) -> Option<TlsFiles> {
        let (cert, key) = (self.events_tls_cert.clone()?, self.events_tls_key.clone()?);
        Some(TlsFiles { cert, key })
    }

    /// The webhook endpoint to serve, when `--webhook-addr` is given.
    fn webhooks(&self) -> anyhow::Result<Option<Webhooks>> {
        let Some(address) = self.webhook_addr else { return Ok(None) };
        let endpoint = match (&self.webhook_url, &self.webhook_service) {
            (Some(url), _) => Some(WebhookEndpoint::Url(url.clone())),
            (None, service) => service.clone(),
        };
        let source = match (&self.webhook_cert, &self.webhook_key) {
            (Some(cert), Some(key)) => {
                Source::Files(Files { cert: cert.clone(), key: key.clone(), ca: self.webhook_ca.clone() })
            }
            _ => {
                let endpoint = endpoint.as_ref().context(
                    "the webhook certificates the host makes need --webhook-url or --webhook-service, for the \
                     names they are for; or give --webhook-cert and --webhook-key",
                )?;
                Source::Managed(Managed {
                    namespace: self.leader_election_namespace.clone(),
                    name: self.webhook_secret.clone(),
                    names: endpoint.names(),
                })
            }
        };
        let target = endpoint.map(|endpoint| Target { endpoint, namespace: self.namespace.clone() });
        Ok(Some(Webhooks { address, source, target }))
    }

    /// How the inbound events listener bounds its clients.
    fn events_limits(&self) -> wasmop::listener::Limits {
        wasmop::listener::Limits {
            header_timeout: self.events_header_timeout,
            body_timeout: self.events_body_timeout,
            max_connections: self.events_max_connections,
        }
    }
}

/// How long cancelled reconciles and the controllers get to wind down after the shutdown timeout.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// `wasmop run`: runs the plugins until the process is told to stop.
pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let config = args.config.as_deref().map(HostConfig::read).transpose()?.unwrap_or_default();
    let metrics = Metrics::new();
    let dev_source = args
        .dev_source
        .as_deref()
        .map(|dir| DevSource::new(dir).with_context(|| format!("--dev-source {}", dir.display())))
        .transpose()?;
    let runtime = Arc::new(args.runtime.runtime_with_source(Some(metrics.clone()), dev_source.clone())?);
    // Bad plugin files are refused before anything connects (loads are cached on disk).
    let mut files = args.plugins.clone();
    for dir in &args.plugin_dirs {
        files.extend(wasmop::host::plugin_files(dir)?);
    }
    if !files.is_empty() || !args.reconciler_plugins {
        wasmop::host::load_all(&runtime, &files, &config)?;
    }
    let (events, advertised) = events_endpoint(&args).await?;
    let webhooks = args.webhooks()?;
    let kube_config = kube::Config::infer().await.context("cannot find a Kubernetes configuration")?;
    // No granted host name leads a plugin to the API server the host writes to.
    runtime.refuse_addresses(api_server_addresses(&kube_config.cluster_url).await);
    let mut clusters = Clusters::from_config(kube_config).context("cannot build a Kubernetes client")?;
    for spec in &args.clusters {
        clusters = clusters.with_remote(spec.name.clone(), spec.connect().await?);
    }
    let (shutdown, stopping) = on_signal();
    // The lease is released only once the controllers have stopped writing.
    let release = CancellationToken::new();
    let base = std::env::var("POD_NAME").or_else(|_| std::env::var("HOSTNAME")).unwrap_or_else(|_| "wasmop".into());
    let identity = leader::identity(&base);
    let peers = wasmop::peers::Peers::new(&identity, advertised);
    let replicas = Replicas { clusters: &clusters, identity, peers: &peers, metrics: &metrics, release: &release };
    let (fence, election) = replicas.elect(&args)?;
    let (shards, membership) = replicas.join(&args);
    // Events this replica does not run go to the one that does.
    let forwarder = match (&events, args.leader_elect || args.shards, args.events_tls()) {
        (Some(_), true, Some(tls)) => Some(wasmop::inbound::forward::Forwarder::tls(peers, &tls)?),
        (Some(_), true, None) => Some(wasmop::inbound::forward::Forwarder::plain(peers)?),
        _ => None,
    };
    let candidates = config.candidates.clone();
    let settings = HostSettings {
        shards,
        config,
        defaults: Defaults {
            namespace: args.namespace,
            max_concurrent_reconciles: args.plugin_concurrency.into(),
            record_dir: args.record,
        },
        max_concurrent_reconciles: args.max_concurrent_reconciles.into(),
        fence,
        shutdown: stopping.clone(),
        cache: args
            .cache_budget_mib
            .map(|mib| wasmop::informer::Budget { bytes: mib.saturating_mul(1024 * 1024), idle: args.cache_idle }),
    };
    let host = Arc::new(Host::new(clusters, runtime, metrics, settings));
    if let Some(events) = events {
        serve_events(events, forwarder, host.clone(), shutdown.clone());
    }
    if let Some(webhooks) = webhooks {
        webhooks.serve(host.clone(), shutdown.clone()).await?;
    }
    let sources = Sources {
        files: args.plugins,
        dirs: args.plugin_dirs,
        candidates,
        watch_files: args.watch || dev_source.is_some(),
        dev_source,
        resources: args.reconciler_plugins,
        fetch_policy: FetchPolicy::new(&args.allow_module_dirs)
            .map_err(anyhow::Error::msg)?
            .with_registries(Registries::new(args.insecure_registries.clone(), args.runtime.oci_store())),
    };
    let loader = wasmop::loader::run(host, sources, args.metrics_address, shutdown);
    let ran = until_stopped(loader, &stopping, args.shutdown_timeout).await;
    release.cancel();
    if let Some(election) = election {
        let _ = election.await;
    }
    if let Some(membership) = membership {
        let _ = membership.await;
    }
    ran?;
    Ok(())
}

/// The inbound events endpoint, bound, when `--events-addr` is given, and the address the
/// other replicas forward this one's inbound events to.
async fn events_endpoint(args: &RunArgs) -> anyhow::Result<(Option<Endpoint>, Option<String>)> {
    let events = match args.events_addr {
        Some(address) => {
            Some(Endpoint::bind(address, args.events_tls().as_ref()).await?.with_limits(args.events_limits()))
        }
        None => None,
    };
    // Where the other replicas forward this one's inbound events.
    let advertised = events.as_ref().map(|events| {
        let bound = events.local_addr();
        args.events_advertise_addr.clone().unwrap_or_else(|| match std::env::var("POD_IP") {
            Ok(ip) if !ip.is_empty() => {
                std::net::SocketAddr::new(ip.parse().unwrap_or(bound.ip()), bound.port()).to_string()
            }
            _ => bound.to_string(),
        })
    });
    Ok((events, advertised))
}

/// The process's shutdown, started by a signal (see `wasmop::shutdown` for the order things
/// stop in): the token the loader stops on, and the runs' own.
fn on_signal() -> (CancellationToken, Shutdown) {
    let shutdown = CancellationToken::new();
    let stopping = Shutdown::default();
    let (on_signal, stop_runs) = (shutdown.clone(), stopping.clone());
    tokio::spawn(async move {
        shutdown_signal().await;
        stop_runs.stop();
        tracing::info!("shutting down: no new reconciles; finishing those in flight");
        on_signal.cancel();
    });
    (shutdown, stopping)
}

/// What the replicas of a host share to elect a leader or split the shards: each holds a Lease
/// as `identity`, released once `release` fires.
struct Replicas<'a> {
    clusters: &'a Clusters,
    identity: String,
    peers: &'a wasmop::peers::Peers,
    metrics: &'a Arc<Metrics>,
    release: &'a CancellationToken,
}

impl Replicas<'_> {
    /// With `--leader-elect` or `--shards`: the leader's fence and the election's task; else a
    /// fence always open.
    fn elect(&self, args: &RunArgs) -> anyhow::Result<(Fence, Option<tokio::task::JoinHandle<()>>)> {
        if !(args.leader_elect || args.shards) {
            return Ok((Fence::unfenced(), None));
        }
        anyhow::ensure!(
            args.renew_deadline < args.lease_duration,
            "--renew-deadline must be shorter than --lease-duration"
        );
        let lease = LeaseSettings {
            namespace: args.leader_election_namespace.clone(),
            name: args.leader_election_id.clone(),
            identity: self.identity.clone(),
            lease_duration: args.lease_duration,
            renew_deadline: args.renew_deadline,
            retry_period: args.retry_period,
            peers: Some(self.peers.clone()),
        };
        let client = self.clusters.local().client().clone();
        let (fence, task) = leader::elect(client, lease, self.metrics.clone(), self.release.clone());
        Ok((fence, Some(task)))
    }

    /// With `--shards`: the replica's shards and the membership's task.
    fn join(self, args: &RunArgs) -> (Option<shards::Joined>, Option<tokio::task::JoinHandle<()>>) {
        if !args.shards {
            return (None, None);
        }
        let settings = MembershipSettings {
            namespace: args.leader_election_namespace.clone(),
            group: args.shard_group.clone(),
            identity: self.identity,
            lease_duration: args.lease_duration,
            renew_deadline: args.renew_deadline,
            retry_period: args.retry_period,
            peers: Some(self.peers.clone()),
        };
        let client = self.clusters.local().client().clone();
        let (shards, fence, task) = shards::join(client, settings, self.metrics.clone(), self.release.clone());
        let server_side = args.shard_filter == ShardFilter::Auto;
        (Some(shards::Joined { shards, fence, server_side }), Some(task))
    }
}

/// Serves the inbound events until `stop`, forwarding those another replica runs.
fn serve_events(
    mut events: Endpoint,
    forwarder: Option<wasmop::inbound::forward::Forwarder>,
    host: Arc<Host>,
    stop: CancellationToken,
) {
    if let Some(forwarder) = forwarder {
        events = events.with_forwarder(forwarder);
    }
    tokio::spawn(async move {
        if let Err(err) = events.serve(host, stop).await {
            tracing::error!(%err, "cannot serve inbound events");
        }
    });
}

/// The webhook endpoint `wasmop run` serves.
struct Webhooks {
    address: std::net::SocketAddr,
    source: Source,
    /// Where the configurations the host writes point; `None`: it writes none.
    target: Option<Target>,
}

impl Webhooks {
    /// Has the certificates, listens, and serves the webhooks of `host`'s plugins (and writes
    /// their configurations) until `stop`.
    async fn serve(self, host: Arc<Host>, stop: CancellationToken) -> anyhow::Result<()> {
        let client = host.clusters().local().client().clone();
        let certificates = Certificates::start(self.source, &client, stop.clone()).await?;
        let tls = certificates.serving.server_config().context("the webhook endpoint's TLS configuration")?;
        let endpoint = wasmop::webhook::Endpoint::bind(self.address, tls).await?;
        tokio::spawn(endpoint.serve(host.clone(), stop.clone()));
        if let Some(target) = self.target {
            tokio::spawn(wasmop::webhook::registration::run(host, client, target, certificates.bundle, stop));
        }
        Ok(())
    }
}

/// Runs `loader` until it ends; once the process is stopping, the reconciles in flight get
/// `timeout`, then are cancelled and get [`CANCEL_GRACE`] to wind down.
async fn until_stopped<E>(
    loader: impl std::future::Future<Output = Result<(), E>>,
    stopping: &Shutdown,
    timeout: Duration,
) -> Result<(), E> {
    tokio::pin!(loader);
    tokio::select! {
        ran = &mut loader => ran,
        () = async { stopping.stopped().await; tokio::time::sleep(timeout).await } => {
            tracing::warn!(timeout = ?timeout, "reconciles still running at the shutdown timeout; cancelling them");
            stopping.cancel();
            // Cancelled runs end at their next await; the lease's release below closes the
            // fence, which abandons any write still waiting, whether or not they did.
            tokio::time::timeout(CANCEL_GRACE, loader).await.unwrap_or(Ok(()))
        }
    }
}

/// Where sharded watches are filtered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ShardFilter {
    /// By the API server when it honours shard selectors, else here.
    Auto,
    /// Here, as objects are decoded.
    Client,
}

/// Resolves on Ctrl-C or SIGTERM (what Kubernetes sends a pod).
async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// The CPUs this process may use: the standard library reads the cgroup's CPU quota (v1 and
/// v2) and the affinity mask, as tokio's default does.
fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// The addresses of the API server at `url`: its IP address, or what its name resolves to
/// (none when it does not resolve now; the host's own requests will say why).
async fn api_server_addresses(url: &http::Uri) -> Vec<std::net::IpAddr> {
    let Some(host) = url.host() else { return Vec::new() };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse() {
        return vec![ip];
    }
    let port = url.port_u16().unwrap_or(443);
    match tokio::net::lookup_host((host, port)).await {
        Ok(found) => found.map(|a| a.ip()).collect(),
        Err(_) => Vec::new(),
    }
}
