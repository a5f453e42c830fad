//! The `wasmop` command line: `run` plugins against a cluster, `inspect` a plugin, `test` one
//! against fixtures without a cluster.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use tokio_util::sync::CancellationToken;
use wasmop::fence::Fence;
use wasmop::host::{Host, HostSettings};
use wasmop::inbound::Endpoint;
use wasmop::inbound::tls::TlsFiles;
use wasmop::informer::{ClusterSpec, Clusters};
use wasmop::leader::{self, LeaseSettings};
use wasmop::loader::Sources;
use wasmop::loader::fetch::FetchPolicy;
use wasmop::loader::oci::{Credentials, Registries};
use wasmop::metrics::Metrics;
use wasmop::runtime::{Limits, MemoryMib, Runtime, RuntimeConfig};
use wasmop::scaffold::Lang;
use wasmop::settings::{Defaults, HostConfig};
use wasmop::shards::{self, MembershipSettings};
use wasmop::shutdown::Shutdown;

/// Runs Kubernetes controllers as sandboxed WebAssembly plugins.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "WASMOP_LOG_FORMAT")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run plugins against the cluster of the current kubeconfig (KUBECONFIG, ~/.kube/config or
    /// in-cluster). Log verbosity follows RUST_LOG (default: info).
    Run(Box<RunArgs>),
    /// Print a CustomResourceDefinition as YAML, to `kubectl apply -f -`: with `--plugin`, the
    /// one the plugin generates from its spec and status types (`Reconciler::crd`); without,
    /// the host's own ReconcilerPlugin CRD.
    Crd {
        /// The plugin file whose primary's CRD to print.
        #[arg(long, value_name = "FILE.wasm")]
        plugin: Option<PathBuf>,
        #[command(flatten)]
        runtime: RuntimeArgs,
    },
    /// Scaffold a plugin: in Rust (default) a crate, Cargo.toml and src/lib.rs (a reconciler
    /// and its unit test); in Python app.py and test_app.py; in TypeScript plugin.ts and its
    /// test; each with the CRD, an example object and how to build it. It builds and passes its
    /// tests as generated.
    New {
        /// The plugin's name, also its crate's and directory's, e.g. hello-op.
        name: String,
        /// The primary's API group, e.g. demo.example.com.
        #[arg(long)]
        group: String,
        /// The primary's kind, e.g. Hello.
        #[arg(long)]
        kind: String,
        /// Where to create the crate's directory.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        /// The SDK to depend on by path (guest-sdk, guest-sdk/python or guest-sdk/js); default:
        /// the one this binary was built from, if it is still there, else the published package.
        #[arg(long, value_name = "DIR")]
        sdk: Option<PathBuf>,
        /// The plugin's language.
        #[arg(long, value_enum, default_value_t = Lang::Rust)]
        lang: Lang,
    },
    /// Run a plugin through the host's rules without a cluster: each fixture's primary and
    /// objects (a file, or a directory of *.yaml; the conformance scenarios' format) reconciled
    /// until nothing changes, printing the writes, events and requeues the host would make, then
    /// `ok` or `FAILED` with the unmet expectations. A fixture may be a record `wasmop run
    /// --record` wrote (*.json): `ok` when the plugin ends as the recorded reconcile did (as
    /// `wasmop replay --plugin` compares), else `FAILED` with the diff. Exits 1 when a fixture
    /// fails, 2 when the plugin or a fixture cannot be loaded.
    Test {
        /// The plugin file.
        plugin: PathBuf,
        /// Fixture files and records, or directories of them.
        #[arg(required = true, value_name = "FIXTURES")]
        fixtures: Vec<PathBuf>,
        /// The namespace of the fixtures' primaries and objects (`$NS` in a fixture).
        #[arg(long, short, default_value = "default")]
        namespace: String,
        /// A second namespace (`$OTHER` in a fixture).
        #[arg(long, default_value = "other")]
        other_namespace: String,
        #[command(flatten)]
        runtime: RuntimeArgs,
    },
    /// Replay a record `wasmop run --record DIR` wrote, without a cluster, every import the
    /// plugin makes answered from the record. With the module it was made with (`--module`,
    /// checked against the record's digest): prints `bit-exact` and exits 0, or names the first
    /// import call (or ending) that differs and exits 1. With another version (`--plugin`):
    /// prints a diff of the status, labels, desired objects and events between the recorded
    /// reconcile and the new version's (`no difference` when there is none) and exits 0, or 1
    /// when the new version made a call the record cannot answer. Exits 2 when the record or
    /// the module cannot be loaded.
    Replay {
        /// The record file.
        record: PathBuf,
        /// The module the record was made with (its digest is checked).
        #[arg(long, value_name = "FILE.wasm", required_unless_present = "plugin")]
        module: Option<PathBuf>,
        /// Another version of the plugin, to compare with the record.
        #[arg(long, value_name = "FILE.wasm", conflicts_with = "module")]
        plugin: Option<PathBuf>,
        #[command(flatten)]
        runtime: RuntimeArgs,
    },
    /// Print what a plugin's describe() says, in the words of the overrides file: its settings
    /// (the block `--config` and a ReconcilerPlugin's overrides take), watches and dependents.
    Inspect {
        /// The plugin file.
        file: PathBuf,
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = Output::Yaml)]
        output: Output,
        /// Also check that the cluster of the current kubeconfig serves every kind the plugin
        /// declares; fails naming each one it does not, and the closest kind it does.
        #[arg(long)]
        check_cluster: bool,
        #[command(flatten)]
        runtime: RuntimeArgs,
    },
    /// Publish a built plugin to an OCI registry as a Wasm OCI artifact (config
    /// application/vnd.wasm.config.v0+json, one application/wasm layer), the layout a
    /// ReconcilerPlugin's `spec.module.oci` pulls, and print its reference with the manifest's
    /// digest (REF@sha256:...), to paste there. Credentials: --username with the password on
    /// stdin (--password-stdin), else the registry's entry in the docker config file
    /// (REGISTRY_AUTH_FILE, else ~/.docker/config.json; `auth` or `username`/`password` fields,
    /// not credential helpers), else none.
    Push {
        /// The plugin file.
        file: PathBuf,
        /// Where to push: REGISTRY/REPOSITORY:TAG.
        reference: String,
        /// Speak plain http to this registry (HOST:PORT); repeat for more. Every other is https.
        #[arg(long = "insecure-registry", value_name = "HOST:PORT")]
        insecure_registries: Vec<String>,
        /// The registry user; the password is read from stdin (--password-stdin).
        #[arg(long, requires = "password_stdin")]
        username: Option<String>,
        /// Read the password of --username from stdin (one line).
        #[arg(long, requires = "username")]
        password_stdin: bool,
    },
}

#[derive(Debug, clap::Args)]
struct RunArgs {
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
    #[command(flatten)]
    runtime: RuntimeArgs,
}

#[derive(Debug, clap::Args)]
struct RuntimeArgs {
    /// Running-time limit of one call into a plugin, e.g. 5s or 500ms: the time its code runs,
    /// not the time it waits for a thread; by the wall clock a call may take 10x this.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    deadline: Duration,
    /// Memory limit of one plugin instance, in MiB (1 to 4096).
    #[arg(long, default_value = "64", value_name = "MIB")]
    memory_limit_mib: MemoryMib,
    /// Fuel budget of one call (instructions, roughly); unset runs plugins unmetered, which is
    /// faster. A plugin's own `limits.fuel` override beats it.
    #[arg(long)]
    fuel: Option<u64>,
    /// Directory for compiled plugins (default: `$WASMOP_CACHE/modules` when WASMOP_CACHE is
    /// set, else `modules` in the user cache directory, e.g. ~/.cache/wasmop/modules).
    #[arg(long, env = "WASMOP_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// Compile plugins every time instead of using the on-disk cache.
    #[arg(long)]
    no_cache: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Output {
    Json,
    Yaml,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

impl RunArgs {
    /// The inbound events listener's certificate and key, when both are given.
    fn events_tls(&self) -> Option<TlsFiles> {
        let (cert, key) = (self.events_tls_cert.clone()?, self.events_tls_key.clone()?);
        Some(TlsFiles { cert, key })
    }

    /// How the inbound events listener bounds its clients.
    fn events_limits(&self) -> wasmop::inbound::Limits {
        wasmop::inbound::Limits {
            header_timeout: self.events_header_timeout,
            body_timeout: self.events_body_timeout,
            max_connections: self.events_max_connections,
        }
    }
}

impl RuntimeArgs {
    /// The directory of compiled plugins, unless `--no-cache`.
    fn cache_dir(&self) -> Option<PathBuf> {
        if self.no_cache {
            return None;
        }
        self.cache_dir
            .clone()
            .or_else(|| std::env::var_os("WASMOP_CACHE").map(|dir| PathBuf::from(dir).join("modules")))
            .or_else(|| {
                directories::ProjectDirs::from("dev", "wasmop", "wasmop").map(|d| d.cache_dir().join("modules"))
            })
    }

    /// Where modules pulled from OCI registries are stored by digest: `oci/` in the cache
    /// directory (none with `--no-cache`: every new digest is pulled again).
    fn oci_store(&self) -> Option<PathBuf> {
        self.cache_dir().map(|dir| dir.join("oci"))
    }

    fn runtime(&self, observer: Option<Arc<Metrics>>) -> anyhow::Result<Runtime> {
        let cache_dir = self.cache_dir();
        let limits = Limits { deadline: self.deadline, memory_bytes: self.memory_limit_mib.bytes(), fuel: self.fuel };
        let observer = observer.map(|m| m as Arc<dyn wasmop::runtime::CallObserver>);
        Ok(Runtime::new(RuntimeConfig { cache_dir, limits, observer })?)
    }
}

/// How long cancelled reconciles and the controllers get to wind down after the shutdown timeout.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// Blocking threads: file reads of the loaders, compiling plugins, DNS. Calls into plugins run
/// on the runtime's own threads (tokio's default allows 512 blocking threads, each with its
/// own stack and malloc arena).
const BLOCKING_THREADS: usize = 4;

/// The allocator: jemalloc, with the settings of [`JEMALLOC_CONF`]. glibc's malloc (and musl's,
/// in the image) kept what the host freed in free lists between the long-lived cached objects:
/// at 10,000 objects its heap peaked at 56 MiB (heaptrack) while 69 MiB of its arenas were
/// resident, against 66 MiB in all with jemalloc (`make bench`, part `burst-10k`).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings, read when it starts; `_RJEM_MALLOC_CONF` in the environment adds to and
/// overrides them (`_RJEM_MALLOC_CONF=confirm_conf:true` prints what it uses):
/// - one arena (`narenas:1`; jemalloc's default is four per CPU, each holding freed pages of its
///   own): the host waits on the API server far more than it allocates, and every thread keeps
///   a cache of small blocks (`tcache_max:4096`: blocks up to 4 KiB, a cached object's parts);
/// - freed pages go back to the system after a second (`dirty_decay_ms:1000`,
///   `muzzy_decay_ms:0`), purged by jemalloc's own thread (`background_thread:true`), not by the
///   thread that frees;
/// - blocks over 1 MiB (`oversize_threshold:1048576`, 8 MiB by default) come from jemalloc's
///   arena for large blocks, which returns them as soon as they are freed: the arrays of the
///   tables with an entry per object, whose old array a table frees each time it doubles. Kept
///   for a second, those were most of what a sharded host of part `scale` held beyond its share
///   (100,000 objects: 70.3-73.4 MiB anonymous at 8 MiB in two rounds, 66.8-68.6 at 1 MiB in one;
///   the single host 193.2-197.1 and 188.9; CPU within the spread).
///
/// `make bench` (one round each, wasmop only): at 10,000 objects 66.2 MiB anonymous against
/// 72.4-73.1 with glibc's malloc; at 1,000 11.3-11.7 against 11.1-12.5; CPU within the spread.
/// Four arenas per CPU: 68.0 and 12.8-13.6 MiB; no thread caches: 66.0 and 10.9-11.2 MiB, but
/// 10% more CPU.
#[allow(unsafe_code, reason = "the name jemalloc reads its settings from; a constant C string")]
#[unsafe(export_name = "_rjem_malloc_conf")]
static JEMALLOC_CONF: &[u8; 113] =
    b"narenas:1,tcache_max:4096,dirty_decay_ms:1000,muzzy_decay_ms:0,background_thread:true,oversize_threshold:1048576\0";

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_tracing(cli.log_format);
    if let Command::Test { plugin, fixtures, namespace, other_namespace, runtime } = &cli.command {
        // The harness calls the plugin on a runtime of its own, blocking this thread.
        std::process::exit(test(plugin, fixtures, namespace, other_namespace, runtime));
    }
    let workers = match &cli.command {
        Command::Run(args) => args.worker_threads.map_or_else(available_cpus, usize::from),
        _ => 1,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .max_blocking_threads(BLOCKING_THREADS)
        .build()?;
    runtime.block_on(serve(cli))
}

/// `wasmop replay`: the exit code (0 bit-exact or compared, 1 diverged, 2 nothing could be
/// replayed).
async fn replay(
    record: &std::path::Path,
    module: Option<&std::path::Path>,
    plugin: Option<&std::path::Path>,
    runtime: &RuntimeArgs,
) -> i32 {
    let loaded = (|| -> anyhow::Result<_> {
        let bytes = std::fs::read(record).with_context(|| format!("cannot read {}", record.display()))?;
        let record = wasmop_core::record::Record::from_slice(&bytes)
            .map_err(|e| anyhow::anyhow!("{}: {e}", record.display()))?;
        // The record lives as long as this process, which replays it once.
        let record: &'static wasmop_core::record::Record = Box::leak(Box::new(record));
        let path = plugin.or(module).context("give the recorded module with --module, or another with --plugin")?;
        let wasm = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        if plugin.is_none() {
            wasmop::replay::check_digest(record, &wasm).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        }
        let module = runtime.runtime(None)?.load_bytes(path, &wasm)?;
        Ok((record, module))
    })();
    let (record, module) = match loaded {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("error: {e:#}");
            return 2;
        }
    };
    if plugin.is_none() {
        return match wasmop::replay::exact(&module, record).await {
            Ok(()) => i32::from(print_out("bit-exact\n").is_err()),
            Err(divergence) => {
                eprintln!("{divergence}");
                1
            }
        };
    }
    let against = wasmop::replay::against(&module, record).await;
    // An empty diff says "no differences: ...".
    if print_out(&against.diff.to_string()).is_err() {
        return 2;
    }
    match against.unanswered {
        None => 0,
        Some(error) => {
            eprintln!("the new version made a call the record cannot answer (it saw an error instead): {error}");
            1
        }
    }
}

/// `wasmop test`: the exit code (0 every fixture held, 1 one failed, 2 nothing could be run).
fn test(plugin: &std::path::Path, fixtures: &[PathBuf], namespace: &str, other: &str, runtime: &RuntimeArgs) -> i32 {
    let module = match runtime
        .runtime(None)
        .map_err(|e| format!("{e:#}"))
        .and_then(|r| r.load(plugin).map_err(|e| format!("{e:#}")))
    {
        Ok(module) => module,
        Err(e) => {
            // One line: a parser's message may spread its detail over several.
            eprintln!("error: {}", e.split_whitespace().collect::<Vec<_>>().join(" "));
            return 2;
        }
    };
    let ran = wasmop::harness::fixture_files(fixtures)
        .and_then(|files| wasmop::harness::run(&module, &files, namespace, other));
    let ran = match ran {
        Ok(ran) => ran,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    for fixture in &ran {
        let text = serde_saphyr::to_string(&fixture.shown()).unwrap_or_else(|e| format!("# not printable: {e}\n"));
        if print_out(&format!("---\n{text}")).is_err() {
            return 2;
        }
    }
    let failed: Vec<&str> = ran.iter().filter(|f| !f.held()).map(|f| f.name()).collect();
    let summary = match failed.as_slice() {
        [] => format!("# {} fixtures, all held\n", ran.len()),
        names => format!("# {} fixtures, {} FAILED: {}\n", ran.len(), names.len(), names.join(", ")),
    };
    if print_out(&summary).is_err() {
        return 2;
    }
    if failed.is_empty() { 0 } else { 1 }
}

/// The CPUs this process may use: the standard library reads the cgroup's CPU quota (v1 and
/// v2) and the affinity mask, as tokio's default does.
fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

async fn serve(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Inspect { file, output, check_cluster, runtime } => {
            let module = runtime.runtime(None)?.load(&file)?;
            let described = wasmop::inspect::describe(module.config());
            let text = match output {
                Output::Json => serde_json::to_string_pretty(&described)?,
                Output::Yaml => serde_saphyr::to_string(&described)?,
            };
            print_out(&format!("{text}\n"))?;
            if check_cluster {
                check_kinds(module.config()).await?;
            }
            Ok(())
        }
        Command::New { name, group, kind, dir, sdk, lang } => {
            let sdk = sdk.or_else(|| wasmop::scaffold::local_sdk(lang));
            let files = wasmop::scaffold::Scaffold { name: name.clone(), group, kind, sdk, lang }.files()?;
            let root = dir.join(&name);
            anyhow::ensure!(!root.exists(), "{} exists already", root.display());
            for (path, text) in files {
                let path = root.join(path);
                std::fs::create_dir_all(path.parent().expect("files are in the crate"))?;
                std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
            }
            print_out(&format!("created {}: {}\n", root.display(), lang.next_steps()))
        }
        Command::Crd { plugin: None, .. } => print_out(&wasmop::loader::resource::crd_yaml()),
        Command::Crd { plugin: Some(file), runtime } => {
            let module = runtime.runtime(None)?.load(&file)?;
            print_out(&wasmop::inspect::crd_yaml(&module).await?)
        }
        Command::Run(args) => run(*args).await,
        Command::Replay { record, module, plugin, runtime } => {
            std::process::exit(replay(&record, module.as_deref(), plugin.as_deref(), &runtime).await)
        }
        Command::Test { .. } => unreachable!("`wasmop test` runs before the runtime starts"),
        Command::Push { file, reference, insecure_registries, username, password_stdin: _ } => {
            let module = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
            anyhow::ensure!(module.starts_with(b"\0asm"), "{} is not a WebAssembly file", file.display());
            let most = wasmop::loader::fetch::MAX_MODULE_BYTES;
            anyhow::ensure!(module.len() <= most, "{} is larger than the {most} bytes hosts pull", file.display());
            let mut credentials = Credentials::default();
            let registry =
                reference.parse::<oci_client::Reference>().map(|r| r.registry().to_string()).unwrap_or_default();
            if let Some(username) = username {
                let mut password = String::new();
                std::io::stdin().read_line(&mut password).context("cannot read the password from stdin")?;
                credentials.insert(&registry, username, password.trim_end_matches(['\r', '\n']).to_string());
            } else if let Some(path) = docker_config_path()
                && let Ok(text) = std::fs::read(&path)
            {
                credentials.add_docker_config(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            }
            let registries = Registries::new(insecure_registries, None);
            let digest = registries.push(&reference, module, &credentials).await.map_err(|e| anyhow::anyhow!(e))?;
            print_out(&format!("{reference}@{digest}\n"))
        }
    }
}

/// The docker config file `wasmop push` reads credentials from: `REGISTRY_AUTH_FILE` (as podman
/// and skopeo), else `~/.docker/config.json`.
fn docker_config_path() -> Option<PathBuf> {
    std::env::var_os("REGISTRY_AUTH_FILE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".docker/config.json")))
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let config = args.config.as_deref().map(HostConfig::read).transpose()?.unwrap_or_default();
    let metrics = Metrics::new();
    let runtime = Arc::new(args.runtime.runtime(Some(metrics.clone()))?);
    // Bad plugin files are refused before anything connects (loads are cached on disk).
    let mut files = args.plugins.clone();
    for dir in &args.plugin_dirs {
        files.extend(wasmop::host::plugin_files(dir)?);
    }
    if !files.is_empty() || !args.reconciler_plugins {
        wasmop::host::load_all(&runtime, &files, &config)?;
    }
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
    let kube_config = kube::Config::infer().await.context("cannot find a Kubernetes configuration")?;
    // No granted host name leads a plugin to the API server the host writes to.
    runtime.refuse_addresses(api_server_addresses(&kube_config.cluster_url).await);
    let mut clusters = Clusters::from_config(kube_config).context("cannot build a Kubernetes client")?;
    for spec in &args.clusters {
        clusters = clusters.with_remote(spec.name.clone(), spec.connect().await?);
    }
    // See `wasmop::shutdown` for the order things stop in.
    let shutdown = CancellationToken::new();
    let stopping = Shutdown::default();
    let (on_signal, stop_runs) = (shutdown.clone(), stopping.clone());
    tokio::spawn(async move {
        shutdown_signal().await;
        stop_runs.stop();
        tracing::info!("shutting down: no new reconciles; finishing those in flight");
        on_signal.cancel();
    });
    // The lease is released only once the controllers have stopped writing.
    let release = CancellationToken::new();
    let base = std::env::var("POD_NAME").or_else(|_| std::env::var("HOSTNAME")).unwrap_or_else(|_| "wasmop".into());
    let identity = leader::identity(&base);
    let peers = wasmop::peers::Peers::new(&identity, advertised);
    let (fence, election) = if args.leader_elect || args.shards {
        anyhow::ensure!(
            args.renew_deadline < args.lease_duration,
            "--renew-deadline must be shorter than --lease-duration"
        );
        let lease = LeaseSettings {
            namespace: args.leader_election_namespace.clone(),
            name: args.leader_election_id.clone(),
            identity: identity.clone(),
            lease_duration: args.lease_duration,
            renew_deadline: args.renew_deadline,
            retry_period: args.retry_period,
            peers: Some(peers.clone()),
        };
        let (fence, task) = leader::elect(clusters.local().client().clone(), lease, metrics.clone(), release.clone());
        (fence, Some(task))
    } else {
        (Fence::unfenced(), None)
    };
    let (shards, membership) = if args.shards {
        let settings = MembershipSettings {
            namespace: args.leader_election_namespace.clone(),
            group: args.shard_group.clone(),
            identity,
            lease_duration: args.lease_duration,
            renew_deadline: args.renew_deadline,
            retry_period: args.retry_period,
            peers: Some(peers.clone()),
        };
        let (shards, fence, task) =
            shards::join(clusters.local().client().clone(), settings, metrics.clone(), release.clone());
        let server_side = args.shard_filter == ShardFilter::Auto;
        (Some(shards::Joined { shards, fence, server_side }), Some(task))
    } else {
        (None, None)
    };
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
    if let Some(mut events) = events {
        if let Some(forwarder) = forwarder {
            events = events.with_forwarder(forwarder);
        }
        let (host, stop) = (host.clone(), shutdown.clone());
        tokio::spawn(async move {
            if let Err(err) = events.serve(host, stop).await {
                tracing::error!(%err, "cannot serve inbound events");
            }
        });
    }
    let sources = Sources {
        files: args.plugins,
        dirs: args.plugin_dirs,
        candidates,
        watch_files: args.watch,
        resources: args.reconciler_plugins,
        fetch_policy: FetchPolicy::new(&args.allow_module_dirs)
            .map_err(anyhow::Error::msg)?
            .with_registries(Registries::new(args.insecure_registries.clone(), args.runtime.oci_store())),
    };
    let loader = wasmop::loader::run(host, sources, args.metrics_address, shutdown);
    tokio::pin!(loader);
    let ran = tokio::select! {
        ran = &mut loader => ran,
        () = async { stopping.stopped().await; tokio::time::sleep(args.shutdown_timeout).await } => {
            tracing::warn!(timeout = ?args.shutdown_timeout, "reconciles still running at the shutdown timeout; cancelling them");
            stopping.cancel();
            // Cancelled runs end at their next await; the lease's release below closes the
            // fence, which abandons any write still waiting, whether or not they did.
            tokio::time::timeout(CANCEL_GRACE, loader).await.unwrap_or(Ok(()))
        }
    };
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

/// Fails naming every kind `config` declares that the current kubeconfig's cluster does not
/// serve, as the host reports it when the plugin runs.
async fn check_kinds(config: &wasmop::runtime::bindings::wasmop::plugin::types::PluginConfig) -> anyhow::Result<()> {
    let kube_config = kube::Config::infer().await.context("cannot find a Kubernetes configuration")?;
    let client = kube::Client::try_from(kube_config)?;
    let mut unserved = Vec::new();
    for kind in wasmop::inspect::declared_kinds(config) {
        match wasmop::informer::resolve(&client, kind).await {
            Ok(_) => {}
            Err(err) if err.unreachable() => return Err(err.into()),
            Err(_) => unserved.push(wasmop::informer::not_served(&client, kind).await),
        }
    }
    anyhow::ensure!(unserved.is_empty(), "{}", unserved.join("; "));
    Ok(())
}

/// Writes `text` to stdout. A reader that went away (`wasmop inspect ... | head`) ends the output
/// quietly, as Unix tools do; Rust ignores SIGPIPE, so the write fails with `BrokenPipe`.
fn print_out(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => Err(err.into()),
        _ => Ok(()),
    }
}

/// Whether log lines carry colour codes: only on a terminal, and not when `NO_COLOR` is set to
/// anything but the empty string (https://no-color.org).
fn colours(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

fn init_tracing(format: LogFormat) {
    use std::io::IsTerminal as _;
    let given = std::env::var(tracing_subscriber::EnvFilter::DEFAULT_ENV).ok();
    let filter = tracing_subscriber::EnvFilter::try_new(wasmop::api_error::log_filter(given.as_deref()))
        .unwrap_or_else(|_| wasmop::api_error::log_filter(None).into());
    let ansi = colours(std::io::stderr().is_terminal(), std::env::var_os("NO_COLOR").as_deref());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_only_on_a_terminal_without_no_color() {
        assert!(colours(true, None));
        assert!(colours(true, Some("".as_ref())), "an empty NO_COLOR is unset");
        assert!(!colours(true, Some("1".as_ref())));
        assert!(!colours(false, None));
    }

    #[test]
    fn the_command_line_is_well_formed_and_test_takes_a_plugin_and_fixtures() {
        use clap::CommandFactory as _;
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from(["wasmop", "test", "p.wasm", "a.yaml", "dir", "-n", "ns"]).unwrap();
        let Command::Test { plugin, fixtures, namespace, other_namespace, .. } = cli.command else { panic!("test") };
        assert_eq!((plugin, fixtures), (PathBuf::from("p.wasm"), vec![PathBuf::from("a.yaml"), PathBuf::from("dir")]));
        assert_eq!((namespace.as_str(), other_namespace.as_str()), ("ns", "other"));
        assert!(Cli::try_parse_from(["wasmop", "test", "p.wasm"]).is_err(), "fixtures are required");
    }
}
