//! Sharded replicas (`wasmop run --shards`) against the real API server: three `wasmop`
//! processes and 600 labelled ConfigMaps, reconciled by `fixture-shard`, which logs
//! `shard-begin` (UID, wall-clock time, payload) and `shard-end` (UID, time) around each run.
//! A change counts as reconciled once some replica logged a finished run with its payload.
//! Short lease settings (lease 3 s, renew deadline 2 s, retry 0.5 s).
//!
//! - Every object is reconciled, each by exactly one replica, and no two runs of one object ever
//!   overlap (from all replicas' logs); each replica decodes at most 0.45 of the events when
//!   the API server filters (the test bed runs it with `ShardedListAndWatch` on), and the same
//!   holds through client-side filtering (`--shard-filter client`), where each decodes them all.
//!   (ConfigMaps: v1.36.3 filters built-in kinds only; for a custom resource its list answer
//!   has no `shardInfo`, and the host filters by itself.)
//! - `kill -9` of a replica mid-burst: the others run its objects within lease duration + retry
//!   period + 2 s; nothing is lost, nothing overlaps.
//! - A fourth replica joins during a burst: at most 1/4 + 10% of the objects change owner;
//!   SIGTERM of a replica hands its objects over within 2 s.
//! - A replica cut off from the API server starts no run after its renew deadline; the others
//!   take its objects after its Lease expired; reconnected, it joins again.
//! - A plugin that declares `sharding: none` in its own code (`fixture-shard-leader`) runs on the
//!   elected leader alone: every object on that one replica, none overlapping; killed, the next
//!   leader runs them all. A deploy-time override (`sharding: uid`) beats the declaration.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use wasmop_tests::{client, kubeconfig, namespace, plugin, wasmop_binary, within, workspace_root};

const OBJECTS: usize = 600;
const WAIT: Duration = Duration::from_secs(120);
const LEASE: Duration = Duration::from_secs(3);
const RETRY: Duration = Duration::from_millis(500);

/// Wall-clock microseconds since the epoch, as the fixture logs them.
fn now_us() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_micros()
}

/// One run of the fixture, from a replica's log.
#[derive(Debug, Clone)]
struct Run {
    uid: String,
    payload: String,
    begin: u128,
    /// `None` for a run cut short (or still running).
    end: Option<u128>,
}

/// A run on a replica: (replica, uid, payload, begin, end).
type Ran = (usize, String, String, u128, u128);

/// One sharded host process, logging JSON to a file.
struct Replica {
    child: Child,
    metrics: SocketAddr,
    log: PathBuf,
}

impl Replica {
    fn start(ns: &str, index: usize, args: &[&str]) -> anyhow::Result<Self> {
        Self::start_with(ns, index, kubeconfig(), args)
    }

    /// A replica talking to the API server as `kubeconfig` says.
    fn start_with(ns: &str, index: usize, kubeconfig: &std::path::Path, args: &[&str]) -> anyhow::Result<Self> {
        Self::start_plugin(ns, index, "fixture-shard", kubeconfig, args)
    }

    /// A replica running the plugin `name` (a build of the fixture) on the objects of `ns`.
    fn start_plugin(
        ns: &str,
        index: usize,
        name: &str,
        kubeconfig: &std::path::Path,
        args: &[&str],
    ) -> anyhow::Result<Self> {
        let fixture = plugin(name).display().to_string();
        let mut all = vec!["--namespace", ns, "--plugin", &fixture];
        all.extend(args);
        Self::spawn(ns, index, kubeconfig, &all)
    }

    /// A replica of the shard group `group` (its Leases in namespace `group`) with `args`.
    fn spawn(group: &str, index: usize, kubeconfig: &std::path::Path, args: &[&str]) -> anyhow::Result<Self> {
        let metrics = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        let dir = workspace_root().join("target/tmp");
        std::fs::create_dir_all(&dir)?;
        let log = dir.join(format!("shards-{group}-{index}.log"));
        let file = std::fs::File::create(&log)?;
        let child = Command::new(wasmop_binary()?)
            .args(["--log-format", "json", "run", "--shards", "--shard-group", group])
            .args(["--leader-election-namespace", group, "--leader-election-id", &format!("{group}-leader")])
            .args(["--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "500ms"])
            .args(["--metrics-address", &metrics.to_string()])
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .env("POD_NAME", format!("replica-{index}"))
            .env("RUST_LOG", "info")
            .env("WASMOP_CACHE_DIR", workspace_root().join("target/wasmop-test-cache"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()?;
        Ok(Self { child, metrics, log })
    }

    async fn scrape(&self) -> Option<String> {
        wasmop_tests::http_get(self.metrics, "/metrics").await
    }

    /// The sum of the metric lines starting with `prefix`.
    async fn metric(&self, prefix: &str) -> f64 {
        let Some(text) = self.scrape().await else { return 0.0 };
        text.lines().filter(|l| l.starts_with(prefix)).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
    }

    async fn ready(&self) -> bool {
        let response = wasmop_tests::http_get(self.metrics, "/readyz").await.unwrap_or_default();
        response.starts_with("HTTP/1.0 200") || response.starts_with("HTTP/1.1 200")
    }

    fn signal(&self, signal: &str) -> anyhow::Result<()> {
        let status = Command::new("kill").args([signal, &self.child.id().to_string()]).status()?;
        anyhow::ensure!(status.success(), "kill {signal} failed");
        Ok(())
    }

    /// The fixture's runs in this replica's log: (uid, payload, begin, end), `end` `None` for a
    /// run cut short.
    fn runs(&self) -> anyhow::Result<Vec<Run>> {
        let text = std::fs::read_to_string(&self.log)?;
        let mut open: HashMap<String, (String, u128)> = HashMap::new();
        let mut runs = Vec::new();
        for line in text.lines() {
            let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else { continue };
            let fields = &value["fields"];
            let message = fields["message"].as_str().unwrap_or_default();
            if message != "shard-begin" && message != "shard-end" {
                continue;
            }
            let words = fields["fields"].as_str().unwrap_or_default();
            let field = |name: &str| {
                words
                    .split(' ')
                    .find_map(|w| w.strip_prefix(name).and_then(|w| w.strip_prefix('=')))
                    .map(str::to_string)
            };
            let (Some(uid), Some(us)) = (field("uid"), field("us").and_then(|us| us.parse::<u128>().ok())) else {
                continue;
            };
            if message == "shard-begin" {
                let payload = field("payload").unwrap_or_default();
                if let Some((payload, begun)) = open.insert(uid.clone(), (payload, us)) {
                    runs.push(Run { uid, payload, begin: begun, end: None });
                }
            } else if let Some((payload, begun)) = open.remove(&uid) {
                runs.push(Run { uid, payload, begin: begun, end: Some(us) });
            }
        }
        runs.extend(open.into_iter().map(|(uid, (payload, begin))| Run { uid, payload, begin, end: None }));
        Ok(runs)
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until every replica sees `members` live members and is ready.
async fn until_members(replicas: &[Replica], members: usize) -> anyhow::Result<()> {
    within(WAIT, &format!("{members} shard members"), async {
        loop {
            let mut all = true;
            for replica in replicas {
                let seen = replica.metric("wasmop_shard_members ").await as usize;
                all &= seen == members && replica.ready().await;
            }
            if all {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
}

/// Creates `OBJECTS` labelled ConfigMaps with `payload`, 16 at a time.
async fn create(api: &Api<ConfigMap>, payload: &str) -> anyhow::Result<()> {
    futures::stream::iter(0..OBJECTS)
        .map(|i| async move {
            let map = json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": { "name": format!("p{i:04}"), "labels": { "wasmop.dev/shard-test": "yes" } },
                "data": { "payload": payload, "busyMs": "2" },
            });
            api.create(&PostParams::default(), &serde_json::from_value(map)?).await?;
            anyhow::Ok(())
        })
        .buffer_unordered(16)
        .try_collect::<()>()
        .await
}

/// Changes every ConfigMap's payload, 16 at a time.
async fn change(api: &Api<ConfigMap>, payload: &str) -> anyhow::Result<()> {
    futures::stream::iter(0..OBJECTS)
        .map(|i| async move {
            let patch = Patch::Merge(json!({ "data": { "payload": payload } }));
            api.patch(&format!("p{i:04}"), &PatchParams::default(), &patch).await?;
            anyhow::Ok(())
        })
        .buffer_unordered(16)
        .try_collect::<()>()
        .await
}

/// Waits until every object has a finished run with `payload`, on any of `replicas`.
async fn until_reconciled(replicas: &[Replica], payload: &str) -> anyhow::Result<()> {
    within(WAIT, &format!("every object reconciled with {payload}"), async {
        loop {
            let mut done = HashSet::new();
            for replica in replicas {
                let runs = replica.runs().unwrap_or_default();
                done.extend(runs.into_iter().filter(|r| r.payload == payload && r.end.is_some()).map(|r| r.uid));
            }
            if done.len() == OBJECTS {
                return;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
    .await
}

/// All replicas' runs: (replica, uid, payload, begin, end), a run cut short ending at `cut`
/// (its replica's kill), else never.
fn all_runs(replicas: &[Replica], cut: &HashMap<usize, u128>) -> anyhow::Result<Vec<Ran>> {
    let mut all = Vec::new();
    for (i, replica) in replicas.iter().enumerate() {
        for run in replica.runs()? {
            let end = run.end.or_else(|| cut.get(&i).copied()).unwrap_or(u128::MAX);
            all.push((i, run.uid, run.payload, run.begin, end));
        }
    }
    Ok(all)
}

/// Which replica ran each object with `payload` (the last one that did).
fn owners(runs: &[Ran], payload: &str) -> HashMap<String, usize> {
    runs.iter().filter(|(_, _, p, _, _)| p == payload).map(|(r, uid, _, _, _)| (uid.clone(), *r)).collect()
}

/// No two runs of one object overlap, across every replica.
fn assert_no_overlap(runs: &[Ran]) {
    let mut by_uid: HashMap<&str, Vec<(u128, u128, usize)>> = HashMap::new();
    for (replica, uid, _, begin, end) in runs {
        by_uid.entry(uid.as_str()).or_default().push((*begin, *end, *replica));
    }
    for (uid, mut intervals) in by_uid {
        intervals.sort();
        for pair in intervals.windows(2) {
            assert!(pair[0].1 <= pair[1].0, "runs of {uid} overlap: {:?} and {:?}", pair[0], pair[1]);
        }
    }
}

/// Three replicas in a namespace of their own that reconciled `OBJECTS` new objects (payload
/// `one`): the objects' API, the replicas, and which replica ran each object.
async fn three_reconciled(
    test: &str,
) -> anyhow::Result<(Api<ConfigMap>, String, Vec<Replica>, HashMap<String, usize>)> {
    let (api, ns) = set_up(test).await?;
    let replicas: Vec<Replica> = (0..3).map(|i| Replica::start(&ns, i, &[])).collect::<Result<_, _>>()?;
    until_members(&replicas, 3).await?;
    create(&api, "one").await?;
    until_reconciled(&replicas, "one").await?;
    let before = owners(&all_runs(&replicas, &HashMap::new())?, "one");
    Ok((api, ns, replicas, before))
}

/// Changes every object's payload, in the background.
fn burst(api: &Api<ConfigMap>, payload: &'static str) -> tokio::task::JoinHandle<anyhow::Result<()>> {
    let api = api.clone();
    tokio::spawn(async move { change(&api, payload).await })
}

/// How long after `since` (µs) another replica first ran one of the objects `gone` ran before.
fn taken_over(runs: &[Ran], gone: usize, before: &HashMap<String, usize>, since: u128) -> Duration {
    let theirs: HashSet<&str> = before.iter().filter(|(_, r)| **r == gone).map(|(uid, _)| uid.as_str()).collect();
    let first = runs
        .iter()
        .filter(|(r, uid, _, begin, _)| *r != gone && theirs.contains(uid.as_str()) && *begin > since)
        .map(|(_, _, _, begin, _)| *begin)
        .min()
        .expect("the others ran the objects of the replica gone");
    Duration::from_micros((first - since) as u64)
}

async fn set_up(test: &str) -> anyhow::Result<(Api<ConfigMap>, String)> {
    let client = client().await?;
    let ns = namespace(&client, test).await?;
    Ok((Api::namespaced(client, &ns), ns))
}

async fn each_primary_by_exactly_one_replica(filter: &[&str], server_side: bool) -> anyhow::Result<()> {
    let (api, ns) = set_up(if server_side { "shards" } else { "shards-client" }).await?;
    let replicas: Vec<Replica> = (0..3).map(|i| Replica::start(&ns, i, filter)).collect::<Result<_, _>>()?;
    until_members(&replicas, 3).await?;
    create(&api, "one").await?;
    until_reconciled(&replicas, "one").await?;

    let runs = all_runs(&replicas, &HashMap::new())?;
    assert_no_overlap(&runs);
    let mut ran_on: HashMap<&str, HashSet<usize>> = HashMap::new();
    for (replica, uid, _, _, _) in &runs {
        ran_on.entry(uid.as_str()).or_default().insert(*replica);
    }
    assert_eq!(ran_on.len(), OBJECTS, "every object ran");
    let shared: Vec<_> = ran_on.iter().filter(|(_, r)| r.len() > 1).collect();
    assert!(shared.is_empty(), "run by more than one replica: {shared:?}");
    let mut per_replica = [0usize; 3];
    for replicas in ran_on.values() {
        per_replica[*replicas.iter().next().expect("one")] += 1;
    }
    // Each replica's metrics agree with its log.
    let mut decoded = Vec::new();
    for (i, replica) in replicas.iter().enumerate() {
        let reconciles =
            replica.metric("controller_runtime_reconcile_total{controller=\"fixture-shard\"").await as usize;
        assert!(reconciles >= per_replica[i], "replica {i}: {reconciles} reconciles, {} objects", per_replica[i]);
        let owns = async || replica.metric("wasmop_shard_objects{plugin=\"fixture-shard\"}").await as usize;
        within(Duration::from_secs(10), &format!("replica {i} to count {} owned", per_replica[i]), async {
            while owns().await != per_replica[i] {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await?;
        let kept = replica.metric("wasmop_shard_watch_objects_total{kind=\"ConfigMap\",result=\"kept\"}").await;
        let dropped = replica.metric("wasmop_shard_watch_objects_total{kind=\"ConfigMap\",result=\"dropped\"}").await;
        let bytes = replica.metric("wasmop_shard_watch_bytes_total{kind=\"ConfigMap\"}").await;
        let filtered = replica.metric("wasmop_shard_watch_server_side{kind=\"ConfigMap\"}").await;
        assert_eq!(filtered == 1.0, server_side, "replica {i}: filtered by the API server: {filtered}");
        decoded.push((kept, dropped, bytes));
    }
    let total: f64 = decoded.iter().map(|(kept, _, _)| kept).sum();
    let total_bytes: f64 = decoded.iter().map(|(_, _, bytes)| bytes).sum();
    eprintln!("per replica: objects run {per_replica:?}; (kept, dropped, bytes) decoded {decoded:?}");
    for (i, (kept, dropped, bytes)) in decoded.iter().enumerate() {
        let share = (kept + dropped) / total;
        if server_side {
            assert!(share <= 0.45, "replica {i} decoded {share:.2} of the events");
            assert!(bytes / total_bytes <= 0.45, "replica {i} received {bytes} of {total_bytes} bytes");
            assert_eq!(*dropped, 0.0, "the API server sent replica {i} only its own");
        } else {
            assert!(share >= 0.9, "replica {i} decoded {share:.2} of the events and filtered them");
            assert!(kept / (kept + dropped) <= 0.45, "replica {i} kept {kept} of {}", kept + dropped);
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_split_the_primaries_each_run_by_exactly_one_without_overlap() -> anyhow::Result<()> {
    each_primary_by_exactly_one_replica(&[], true).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_api_servers_filter_the_replicas_filter_and_still_split_the_primaries() -> anyhow::Result<()> {
    each_primary_by_exactly_one_replica(&["--shard-filter", "client"], false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replicas_objects_move_within_lease_plus_retry_plus_two_seconds() -> anyhow::Result<()> {
    let (api, _ns, mut replicas, before) = three_reconciled("shards-kill").await?;
    // A burst of changes, and replica 0 killed in its middle.
    let changes = burst(&api, "two");
    tokio::time::sleep(Duration::from_millis(300)).await;
    replicas[0].child.kill()?;
    let killed = now_us();
    replicas[0].child.wait()?;
    changes.await??;
    until_reconciled(&replicas, "two").await?;

    let runs = all_runs(&replicas, &HashMap::from([(0, killed)]))?;
    assert_no_overlap(&runs);
    let took = taken_over(&runs, 0, &before, killed);
    eprintln!("kill -9: its objects ran elsewhere {took:?} after the kill");
    assert!(took <= LEASE + RETRY + Duration::from_secs(2), "took {took:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_replica_takes_a_quarter_and_a_leaving_one_hands_over_within_two_seconds() -> anyhow::Result<()> {
    let (api, ns, mut replicas, before) = three_reconciled("shards-join").await?;
    // A fourth replica joins during a burst of changes.
    let changes = burst(&api, "two");
    tokio::time::sleep(Duration::from_millis(200)).await;
    replicas.push(Replica::start(&ns, 3, &[])?);
    changes.await??;
    until_members(&replicas, 4).await?;
    until_reconciled(&replicas, "two").await?;
    // Once more, all four settled: who owns what now.
    change(&api, "three").await?;
    until_reconciled(&replicas, "three").await?;
    let runs = all_runs(&replicas, &HashMap::new())?;
    assert_no_overlap(&runs);
    let after = owners(&runs, "three");
    assert_eq!(after.len(), OBJECTS);
    let moved = after.iter().filter(|(uid, r)| before.get(*uid) != Some(r)).count();
    let to_newcomer = after.iter().filter(|(uid, r)| **r == 3 && before.get(*uid) != Some(r)).count();
    eprintln!("a fourth replica joined: {moved} of {OBJECTS} objects changed owner, {to_newcomer} to it");
    let first_runs = replicas[3].metric("wasmop_shard_first_run_seconds_count").await;
    let first_run = replicas[3].metric("wasmop_shard_first_run_seconds_sum").await / first_runs.max(1.0);
    eprintln!("the newcomer's first runs came {first_run:.3} s after a membership change ({first_runs} views)");
    assert!(first_runs >= 1.0, "the newcomer timed its first run");
    assert!(moved as f64 <= OBJECTS as f64 * 0.35, "{moved} moved");
    // Equal shares move a few objects between the others too (`core/src/shard.rs`): most go
    // to the newcomer, which holds a quarter.
    assert!(to_newcomer as f64 >= moved as f64 * 0.75, "{to_newcomer} of {moved} went to the newcomer");
    let newcomer_holds = after.values().filter(|r| **r == 3).count();
    assert!((100..=200).contains(&newcomer_holds), "the newcomer holds {newcomer_holds} of {OBJECTS}");

    // SIGTERM of the newcomer: its objects run elsewhere within 2 s.
    replicas[3].signal("-TERM")?;
    let terminated = now_us();
    change(&api, "four").await?;
    until_reconciled(&replicas, "four").await?;
    let runs = all_runs(&replicas, &HashMap::new())?;
    assert_no_overlap(&runs);
    let took = taken_over(&runs, 3, &after, terminated);
    eprintln!("SIGTERM: its objects ran elsewhere {took:?} after the signal");
    assert!(took <= Duration::from_secs(2), "took {took:?}");
    Ok(())
}

/// A replica cut off from the API server (its client goes through a relay the test cuts) starts
/// no run after its renew deadline, before its Lease can expire; the others run its objects once
/// it has expired, no run overlapping; reconnected, it joins again and runs its share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_cut_off_stops_before_its_lease_expires_and_the_others_take_over() -> anyhow::Result<()> {
    const RENEW_DEADLINE: Duration = Duration::from_secs(2);
    let (api, ns) = set_up("shards-cut").await?;
    let config = wasmop_tests::config().await?;
    let api_server = config.cluster_url.authority().expect("the API server's address").as_str().parse()?;
    let relay = wasmop_tests::relay::Relay::to(api_server).await?;
    let dir = workspace_root().join(format!("target/shards-cut-{}", std::process::id()));
    let via_relay = wasmop_tests::kubeconfig_via(&relay.url(), &dir)?;
    let mut replicas = vec![Replica::start_with(&ns, 0, &via_relay, &[])?];
    for i in 1..3 {
        replicas.push(Replica::start(&ns, i, &[])?);
    }
    until_members(&replicas, 3).await?;
    create(&api, "one").await?;
    until_reconciled(&replicas, "one").await?;
    let before = owners(&all_runs(&replicas, &HashMap::new())?, "one");

    relay.cut();
    let cut = now_us();
    change(&api, "two").await?;
    until_reconciled(&replicas[1..], "two").await?;
    let runs = all_runs(&replicas, &HashMap::new())?;
    assert_no_overlap(&runs);
    let late = runs.iter().filter(|(r, _, _, begin, _)| *r == 0 && *begin > cut + RENEW_DEADLINE.as_micros()).count();
    assert_eq!(late, 0, "the cut-off replica started runs after its renew deadline");
    let took = taken_over(&runs, 0, &before, cut);
    eprintln!("cut off: its objects ran elsewhere {took:?} after the cut");
    assert!(took > RENEW_DEADLINE && took <= LEASE + RETRY + Duration::from_secs(2), "took {took:?}");

    // Reconnected, it joins again; every object still runs on one replica at a time.
    relay.restore();
    until_members(&replicas, 3).await?;
    change(&api, "three").await?;
    until_reconciled(&replicas, "three").await?;
    let runs = all_runs(&replicas, &HashMap::new())?;
    assert_no_overlap(&runs);
    assert!(owners(&runs, "three").values().any(|r| *r == 0), "the reconnected replica runs its share again");
    Ok(())
}

/// Sharded by namespace (`sharding: namespace`), the WebPage sample across 12 namespaces and two
/// replicas watching all namespaces: each page is reconciled (its ConfigMap applied) by the
/// replica owning its namespace, and the dependents' watches are sharded too, by the API server
/// (their kinds are built-in): each replica decodes only its namespaces' dependents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_by_namespace_a_namespace_and_its_dependents_stay_on_one_replica() -> anyhow::Result<()> {
    const NAMESPACES: usize = 12;
    let client = client().await?;
    wasmop_tests::apply_file(&client, &workspace_root().join("plugins/webpage/crd.yaml"), None).await?;
    let group = namespace(&client, "shards-by-ns").await?;
    let mut namespaces = Vec::with_capacity(NAMESPACES);
    // Names that differ first, not only last: the API server's FNV-1a moves a name's hash
    // little for a change of its last characters, so `ns-1`, `ns-2`... would share a replica.
    for i in 0..NAMESPACES {
        namespaces.push(namespace(&client, &format!("{:02x}-shards-by-ns", (i * 97 + 13) % 256)).await?);
    }
    let dir = workspace_root().join(format!("target/{group}"));
    std::fs::create_dir_all(&dir)?;
    let overrides = dir.join("overrides.yaml");
    let selector = format!("wasmop.dev/shard-test={group}");
    std::fs::write(
        &overrides,
        format!("plugins:\n  webpage:\n    labelSelector: {selector}\n    sharding: namespace\n"),
    )?;
    let webpage = plugin("webpage").display().to_string();
    let args = ["--plugin", webpage.as_str(), "--config", overrides.to_str().expect("a UTF-8 path")];
    let replicas: Vec<Replica> =
        (0..2).map(|i| Replica::spawn(&group, i, kubeconfig(), &args)).collect::<Result<_, _>>()?;
    until_members(&replicas, 2).await?;
    for ns in &namespaces {
        let page = json!({
            "apiVersion": "sample.wasmop.dev/v1", "kind": "WebPage",
            "metadata": { "name": "site", "labels": { "wasmop.dev/shard-test": group } },
            "spec": { "html": "<h1>hi</h1>", "exposed": false },
        });
        wasmop_tests::apply(&client, page, Some(ns)).await?;
    }
    within(WAIT, "every page's ConfigMap", async {
        for ns in &namespaces {
            let maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
            while maps.get_opt("site-html").await.ok().flatten().is_none() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    })
    .await?;
    // The replicas count what they own every second.
    within(Duration::from_secs(10), "the replicas to count every page", async {
        loop {
            let mut counted = 0.0;
            for replica in &replicas {
                counted += replica.metric("wasmop_shard_objects{plugin=\"webpage\"}").await;
            }
            if counted as usize == NAMESPACES {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await?;
    let mut owned = Vec::new();
    let mut decoded = Vec::new();
    for replica in &replicas {
        let pages = async || replica.metric("wasmop_shard_objects{plugin=\"webpage\"}").await as usize;
        owned.push(pages().await);
        let filtered = replica.metric("wasmop_shard_watch_server_side{kind=\"ConfigMap\"}").await;
        assert_eq!(filtered, 1.0, "the API server shards the dependents' ConfigMap watch");
        let kept = replica.metric("wasmop_shard_watch_objects_total{kind=\"ConfigMap\",result=\"kept\"}").await;
        let dropped = replica.metric("wasmop_shard_watch_objects_total{kind=\"ConfigMap\",result=\"dropped\"}").await;
        assert_eq!(dropped, 0.0);
        decoded.push(kept);
    }
    eprintln!("pages owned per replica {owned:?}; dependent ConfigMap events decoded {decoded:?}");
    assert_eq!(owned.iter().sum::<usize>(), NAMESPACES, "each page owned by one replica");
    // The ConfigMap events of one replica's namespaces do not reach the other.
    for (i, kept) in decoded.iter().enumerate() {
        assert!(*kept > 0.0 && *kept < decoded.iter().sum::<f64>(), "replica {i} decoded {kept} of {decoded:?}");
    }
    Ok(())
}

/// A replica whose Lease someone else changed (its next renewal meets a newer resourceVersion)
/// renews from the Lease as it is and stays a member: no replica sees the membership change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_lease_was_changed_by_someone_else_stays_a_member() -> anyhow::Result<()> {
    use k8s_openapi::api::coordination::v1::Lease;
    let (_api, ns) = set_up("shards-conflict").await?;
    let replicas: Vec<Replica> = (0..2).map(|i| Replica::start(&ns, i, &[])).collect::<Result<_, _>>()?;
    until_members(&replicas, 2).await?;
    let leases: Api<Lease> = Api::namespaced(client().await?, &ns);
    let selector = format!("wasmop.dev/shard-group={ns}");
    for lease in leases.list(&kube::api::ListParams::default().labels(&selector)).await?.items {
        let name = lease.metadata.name.expect("a name");
        let patch = Patch::Merge(json!({ "metadata": { "annotations": { "example.com/touched": "yes" } } }));
        leases.patch(&name, &PatchParams::default(), &patch).await?;
    }
    // Three lease durations: a replica that could not renew would have been counted gone.
    let until = std::time::Instant::now() + LEASE * 3;
    while std::time::Instant::now() < until {
        for (i, replica) in replicas.iter().enumerate() {
            let members = replica.metric("wasmop_shard_members ").await;
            assert_eq!(members, 2.0, "replica {i} sees {members} members");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (i, replica) in replicas.iter().enumerate() {
        let handovers = replica.metric("wasmop_shard_handovers_total").await;
        assert!(handovers <= 1.0, "replica {i}: {handovers} handovers (at most the second replica's join)");
    }
    Ok(())
}

/// Three replicas of the shard group `ns` running `fixture-shard-leader` (it declares
/// `sharding: none`) with `args`, once they see each other.
async fn three_of_the_leader_fixture(ns: &str, args: &[&str]) -> anyhow::Result<Vec<Replica>> {
    let replicas: Vec<Replica> = (0..3)
        .map(|i| Replica::start_plugin(ns, i, "fixture-shard-leader", kubeconfig(), args))
        .collect::<Result<_, _>>()?;
    until_members(&replicas, 3).await?;
    Ok(replicas)
}

/// Creates the objects with payload `one`, waits until they are reconciled and checks that no
/// runs overlapped and every object ran; returns which replicas ran each.
async fn created_and_ran(
    api: &Api<ConfigMap>,
    replicas: &[Replica],
) -> anyhow::Result<HashMap<String, HashSet<usize>>> {
    create(api, "one").await?;
    until_reconciled(replicas, "one").await?;
    let runs = all_runs(replicas, &HashMap::new())?;
    assert_no_overlap(&runs);
    let first = ran_on(&runs, "one");
    assert_eq!(first.len(), OBJECTS, "every object ran");
    Ok(first)
}

/// Which replicas ran each object with `payload`.
fn ran_on(runs: &[Ran], payload: &str) -> HashMap<String, HashSet<usize>> {
    let mut ran_on: HashMap<String, HashSet<usize>> = HashMap::new();
    for (replica, uid, _, _, _) in runs.iter().filter(|(_, _, p, _, _)| p == payload) {
        ran_on.entry(uid.clone()).or_default().insert(*replica);
    }
    ran_on
}

/// The replicas of the shard group `group` that lead now, of those not in `gone`: their
/// `leader_election_master_status` for the election's Lease (`<group>-leader`; each member's own
/// Lease has a gauge too) is 1.
async fn leaders(replicas: &[Replica], group: &str, gone: &[usize]) -> Vec<usize> {
    let gauge = format!("leader_election_master_status{{name=\"{group}-leader\"}}");
    let mut leading = Vec::new();
    for (i, replica) in replicas.iter().enumerate() {
        if !gone.contains(&i) && replica.metric(&gauge).await == 1.0 {
            leading.push(i);
        }
    }
    leading
}

/// `fixture-shard-leader` declares `sharding: none` in its own config, and no deploy-time
/// setting says otherwise: of three sharded replicas the elected leader alone runs it. Every
/// object is reconciled, all on one replica, the leader; no run overlaps. Killed, the leader's
/// successor runs every object, alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_declaring_no_sharding_runs_on_the_leader_alone() -> anyhow::Result<()> {
    let (api, ns) = set_up("shards-leader").await?;
    let mut replicas = three_of_the_leader_fixture(&ns, &[]).await?;
    let first = created_and_ran(&api, &replicas).await?;
    let ran: HashSet<usize> = first.values().flatten().copied().collect();
    assert_eq!(ran.len(), 1, "the objects ran on replicas {ran:?}, not on one");
    let runner = *ran.iter().next().expect("one");
    assert_eq!(leaders(&replicas, &ns, &[]).await, [runner], "the replica that ran them leads");
    for (i, replica) in replicas.iter().enumerate() {
        let owned = replica.metric("wasmop_shard_objects{plugin=\"fixture-shard-leader\"}").await;
        assert_eq!(owned, 0.0, "replica {i} counts {owned} objects of an unsharded plugin as its shard");
        // The election gauge is the election's alone: one series, for its Lease; membership
        // has a gauge of its own.
        let scraped = replica.scrape().await.unwrap_or_default();
        let elections: Vec<&str> =
            scraped.lines().filter(|l| l.starts_with("leader_election_master_status{")).collect();
        assert_eq!(elections.len(), 1, "replica {i}'s election gauges: {elections:?}");
        assert!(elections[0].contains(&format!("name=\"{ns}-leader\"")), "{elections:?}");
        assert_eq!(replica.metric("wasmop_shard_member ").await, 1.0, "replica {i} is a member");
    }

    // The leader killed, the next one runs every object, alone.
    replicas[runner].child.kill()?;
    let killed = now_us();
    replicas[runner].child.wait()?;
    change(&api, "two").await?;
    until_reconciled(&replicas, "two").await?;
    let runs = all_runs(&replicas, &HashMap::from([(runner, killed)]))?;
    assert_no_overlap(&runs);
    let ran: HashSet<usize> = ran_on(&runs, "two").values().flatten().copied().collect();
    assert_eq!(ran.len(), 1, "after the kill the objects ran on replicas {ran:?}");
    let successor = *ran.iter().next().expect("one");
    assert_ne!(successor, runner);
    assert_eq!(leaders(&replicas, &ns, &[runner]).await, [successor], "the replica that ran them leads now");
    Ok(())
}

/// A deploy-time override beats the plugin's own declaration: `fixture-shard-leader` declares
/// `sharding: none`, the host's configuration file says `sharding: uid`, and the three replicas
/// split its objects again, each run by exactly one replica, none overlapping.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deploy_override_beats_the_sharding_a_plugin_declares() -> anyhow::Result<()> {
    let (api, ns) = set_up("shards-leader-over").await?;
    let dir = workspace_root().join(format!("target/{ns}"));
    std::fs::create_dir_all(&dir)?;
    let overrides = dir.join("overrides.yaml");
    std::fs::write(&overrides, "plugins:\n  fixture-shard-leader:\n    sharding: uid\n")?;
    let replicas = three_of_the_leader_fixture(&ns, &["--config", overrides.to_str().expect("a UTF-8 path")]).await?;
    let first = created_and_ran(&api, &replicas).await?;
    let shared: Vec<_> = first.iter().filter(|(_, r)| r.len() > 1).collect();
    assert!(shared.is_empty(), "run by more than one replica: {shared:?}");
    let mut per_replica = [0usize; 3];
    for ran in first.values() {
        per_replica[*ran.iter().next().expect("one")] += 1;
    }
    eprintln!("sharded by the override: objects run per replica {per_replica:?}");
    assert!(per_replica.iter().all(|n| *n > 0), "every replica runs a share: {per_replica:?}");
    Ok(())
}
