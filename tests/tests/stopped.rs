//! Replicas stopped (SIGSTOP) mid-burst for longer than their lease, then continued (SIGCONT),
//! against the real API server, as `wasmop run` child processes: what a process that was frozen
//! (a paused container, a VM migrated, a long GC-like stall of the whole machine) may still send
//! once it runs again. A run carries the ticket of the term it was admitted in, and nothing it
//! writes goes out once that term ended, even after a later renewal (`host/src/fence.rs`).
//!
//! - Three sharded replicas: the one stopped sends no write for any object from the moment it
//!   continues until the new view (with it back) settled, while the other two ran its objects
//!   meanwhile; every object converges.
//! - A leader and a standby running the `dnsrecord` sample against the records service: no
//!   request of the old leader reaches the service after the standby took over.
//! - A healthy leader whose external write takes longer than its renew deadline finishes it:
//!   one record created, not two.
//!
//! Each test stops only the processes it started: a replica is continued, then killed, when it
//! is dropped.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use wasmop::shards::membership::{GROUP_LABEL, VIEW_ANNOTATION};
use wasmop_tests::proxy::Proxy;
use wasmop_tests::records::{self, Records};
use wasmop_tests::{
    apply_file, client, kubeconfig, kubeconfig_for_proxy, namespace, plugin, wasmop_binary, within, workspace_root,
};

/// How long any one wait may take.
const WAIT: Duration = Duration::from_secs(60);
/// The short lease settings of the stopped replicas: lease 5 s, renew deadline 4 s, retry 0.5 s.
const SHORT_LEASE: [&str; 6] = ["--lease-duration", "5s", "--renew-deadline", "4s", "--retry-period", "500ms"];
/// Their lease duration.
const LEASE: Duration = Duration::from_secs(5);
/// The records service's token, in each test's Secret `dns-api-token`.
const TOKEN: &str = "stopped-records-token";

/// Wall-clock milliseconds since the epoch, as the probe fixture records its runs.
fn now_ms() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

/// One `wasmop run` process, serving its metrics, logging to `NAME.log` in its test's
/// directory (kept when the test fails). Dropped, it is continued (it may be stopped) and killed.
struct Replica {
    child: Child,
    metrics: SocketAddr,
}

impl Replica {
    /// `wasmop run` with `args`, as pod `name`, talking to the API server as `kubeconfig` says,
    /// logging into `dir`.
    fn spawn(dir: &Path, name: &str, kubeconfig: &Path, args: &[&str]) -> anyhow::Result<Self> {
        let metrics = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        let log = dir.join(format!("{name}.log"));
        let child = Command::new(wasmop_binary()?)
            .arg("run")
            .args(args)
            .args(["--metrics-address", &metrics.to_string()])
            .env("KUBECONFIG", kubeconfig)
            .env("POD_NAME", name)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .env("WASMOP_CACHE_DIR", workspace_root().join("target/wasmop-test-cache"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()?;
        Ok(Self { child, metrics })
    }

    /// Its process ID.
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends it `signal` (`-STOP`, `-CONT`) with `kill`.
    fn signal(&self, signal: &str) -> anyhow::Result<()> {
        let status = Command::new("kill").args([signal, &self.pid().to_string()]).status()?;
        anyhow::ensure!(status.success(), "kill {signal} {} failed", self.pid());
        Ok(())
    }

    /// The sum of its metric lines starting with `prefix`; `None` while it does not answer.
    async fn metric(&self, prefix: &str) -> Option<f64> {
        let text = wasmop_tests::http_get(self.metrics, "/metrics").await?;
        Some(
            text.lines()
                .filter(|l| l.starts_with(prefix))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum(),
        )
    }

    /// Whether it leads the election on Lease `lease`; `None` while unknown.
    async fn leading(&self, lease: &str) -> Option<bool> {
        let text = wasmop_tests::http_get(self.metrics, "/metrics").await?;
        let gauge = format!("leader_election_master_status{{name=\"{lease}\"}}");
        let line = text.lines().find(|l| l.starts_with(&gauge))?;
        Some(line.ends_with(" 1"))
    }

    /// Waits until it reports that it leads on `lease` (`true`), or that it is a standby.
    async fn until_leading(&self, lease: &str, leading: bool) -> anyhow::Result<()> {
        let what = if leading { "a replica to lead" } else { "a replica to know it is a standby" };
        within(WAIT, what, async {
            while self.leading(lease).await != Some(leading) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        // A stopped process is continued first, so that nothing of it stays frozen.
        let _ = self.signal("-CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A directory of its own for test namespace `ns`, under `target/tmp`.
fn test_dir(ns: &str) -> anyhow::Result<PathBuf> {
    let dir = workspace_root().join("target/tmp").join(ns);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

// ---------------------------------------------------------------------------------------------
// Sharded replicas.

/// Probes in the sharded test.
const PROBES: usize = 60;
/// How long each run of a probe busy-waits (wall clock), but the long one's.
const BUSY_MS: u64 = 20;
/// How long the runs of the long probe busy-wait: longer than the stop, so that the stopped
/// replica's run of it goes on after it continues, and the other replicas' run of it (started
/// once they took over, seconds after the stopped one's) is still going when that one ends.
const LONG_MS: u64 = 12_000;
/// The replicas' configuration: a call may run as long as the long probe's.
const LONG_CALLS: &str = "plugins:\n  fixture-probe:\n    limits: { deadlineMs: 60000 }\n";

/// The Probes (`plugins/fixtures/probe`) of namespace `ns`.
fn probes(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("test.wasmop.dev", "v1", "Probe");
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, "probes"))
}

/// The probes' names.
fn probe_names() -> Vec<String> {
    (0..PROBES).map(|i| format!("p{i:03}")).collect()
}

/// Creates the probes with payload `one`, 16 at a time.
async fn create_probes(api: &Api<DynamicObject>) -> anyhow::Result<()> {
    futures::stream::iter(probe_names())
        .map(|name| async move {
            let probe = json!({
                "apiVersion": "test.wasmop.dev/v1", "kind": "Probe", "metadata": { "name": name },
                "spec": { "payload": "one", "busyMs": BUSY_MS },
            });
            api.create(&PostParams::default(), &serde_json::from_value(probe)?).await?;
            anyhow::Ok(())
        })
        .buffer_unordered(16)
        .try_collect::<()>()
        .await
}

/// Merges `spec` into the spec of each probe of `names`, 16 at a time.
async fn change(api: &Api<DynamicObject>, names: &[String], spec: serde_json::Value) -> anyhow::Result<()> {
    let patch = Patch::Merge(json!({ "spec": spec }));
    let patch = &patch;
    futures::stream::iter(names.to_vec())
        .map(|name| async move { api.patch(&name, &PatchParams::default(), patch).await })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(())
}

/// Waits until every probe but those of `except` is reconciled at its current generation.
async fn until_converged(api: &Api<DynamicObject>, except: &[String], what: &str) -> anyhow::Result<()> {
    within(WAIT, what, async {
        loop {
            let list = api.list(&ListParams::default()).await?.items;
            let done = list
                .iter()
                .filter(|p| {
                    except.contains(&p.name_any())
                        || p.data["status"]["observedGeneration"].as_i64() == p.metadata.generation
                })
                .count();
            if list.len() == PROBES && done == PROBES {
                return anyhow::Ok(());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await?
}

/// Waits until every replica sees `members` members and is ready.
async fn until_members(replicas: &[&Replica], members: usize) -> anyhow::Result<()> {
    within(WAIT, &format!("{members} shard members"), async {
        loop {
            let mut all = true;
            for replica in replicas {
                let ready = wasmop_tests::http_get(replica.metrics, "/readyz").await.unwrap_or_default();
                all &= replica.metric("wasmop_shard_members ").await == Some(members as f64)
                    && (ready.starts_with("HTTP/1.0 200") || ready.starts_with("HTTP/1.1 200"));
            }
            if all {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
}

/// The view each member of the shard group `group` acknowledged in its Lease (annotation
/// `wasmop.dev/shard-view`), by holder.
async fn acknowledged(leases: &Api<Lease>, group: &str) -> anyhow::Result<BTreeMap<String, Option<String>>> {
    let selector = ListParams::default().labels(&format!("{GROUP_LABEL}={group}"));
    let list = leases.list(&selector).await?.items;
    Ok(list
        .into_iter()
        .filter_map(|l| {
            let ack = l.annotations().get(VIEW_ANNOTATION).cloned();
            Some((l.spec?.holder_identity.filter(|h| !h.is_empty())?, ack))
        })
        .collect())
}

/// The holder in `acks` whose identity starts with `pod` (a pod's identity is its name and a
/// random part), and its acknowledged view.
fn ack_of<'a>(acks: &'a BTreeMap<String, Option<String>>, pod: &str) -> Option<&'a Option<String>> {
    acks.iter().find(|(holder, _)| holder.starts_with(&format!("{pod}_"))).map(|(_, ack)| ack)
}

/// Waits until the view with the replica `back` settled: the members `others`, which
/// acknowledged `without` (the view without it) while it was stopped, and `back` acknowledge
/// one view again. Returns when the last look that found `others` not yet past `without` was
/// sent (`since` if none did): `back` cannot have settled the view before then, for it settles
/// only on the others' acknowledgements of a view with it.
async fn until_settled(
    leases: &Api<Lease>,
    group: &str,
    others: &[&str],
    back: &str,
    without: &str,
    since: Instant,
) -> anyhow::Result<Instant> {
    let mut unsettled = since;
    within(WAIT, "the view with the stopped replica back to settle", async {
        loop {
            let asked = Instant::now();
            let acks = acknowledged(leases, group).await?;
            let theirs: BTreeSet<Option<&str>> =
                others.iter().map(|pod| ack_of(&acks, pod).and_then(|a| a.as_deref())).collect();
            let moved = theirs.len() == 1 && theirs.iter().all(|ack| ack.is_some_and(|ack| ack != without));
            if !moved {
                unsettled = asked;
            } else if theirs.contains(&ack_of(&acks, back).and_then(|a| a.as_deref())) {
                return anyhow::Ok(unsettled);
            }
            // Looks close together: the window ends at the last one before the others moved.
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await?
}

/// The probe a forwarded request writes (`.../probes/{name}` or `.../probes/{name}/status`).
fn probe_written(path: &str) -> Option<&str> {
    let path = path.split('?').next()?;
    let (_, rest) = path.split_once("/probes/")?;
    rest.split('/').next()
}

/// Three sharded replicas run 60 probes; the first (the one to be stopped) talks to the API
/// server through a proxy that records every request it forwards, with when: what reached the
/// API server from it, told apart by the connection, not by timing. One of its probes is
/// changed to runs busy 12 s; once it runs it, the rest change (busy 20 ms) and it is stopped
/// (SIGSTOP) mid-burst, until the other two acknowledge a view without it (its Lease expired)
/// and ran every other probe at its new generation, and at least a lease duration and a second
/// passed; then it is continued (SIGCONT). Its long run goes on for seconds after that, and its
/// queue holds its share of the burst.
///
/// What it must not do: write for any object from the moment it continues until the view with
/// it back settled. Its runs admitted before the stop belong to a term that ended; its renewal
/// after the stop opens a new term, but those runs stay fenced, and a replica back from a lapse
/// takes no share before it listed the Leases again and the new view settled. A write it sends
/// in that window is stale: the other replicas ran its objects meanwhile (the objects' status
/// records their runs, with times when the stopped replica could run nothing), and one of them
/// is running the long probe when it continues, so they acknowledge the view with it back only
/// once that run ends, seconds after its own long run wrote or was refused. The window ends
/// at the last look at the Leases that found them still acknowledging the view without it: it
/// cannot have settled before then, so no write in the window is a legitimate one.
///
/// A failure lists the writes (method, path, time after SIGCONT) the proxy forwarded in that
/// window, marking those to objects the others ran or were running meanwhile. The pre-change
/// host (writes fenced by the lease's deadline, reopened by any renewal) sent the long run's
/// status write 5.7 s after SIGCONT, after its renewal. Then every probe converges after
/// one more change, some of them run by the replica that was stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_replica_stopped_past_its_lease_writes_nothing_after_it_continues_until_a_new_view_settled()
-> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/fixtures/probe/crd.yaml"), None).await?;
    let ns = namespace(&client, "stopped-shards").await?;
    let dir = test_dir(&ns)?;
    let api = probes(&client, &ns);
    let proxy = Proxy::to(client.clone()).await?;
    let via_proxy = kubeconfig_for_proxy(&proxy.url(), &dir)?;
    let fixture = plugin("fixture-probe").display().to_string();
    let election = format!("{ns}-leader");
    let config = dir.join("config.yaml");
    std::fs::write(&config, LONG_CALLS)?;
    let config = config.display().to_string();
    let mut args = vec!["--namespace", &ns, "--plugin", &fixture, "--plugin-concurrency", "4", "--config", &config];
    args.extend(["--shards", "--shard-group", &ns, "--leader-election-namespace", &ns]);
    args.extend(["--leader-election-id", &election]);
    args.extend(SHORT_LEASE);

    let (pod_a, pod_b, pod_stopped) = (format!("{ns}-a"), format!("{ns}-b"), format!("{ns}-stopped"));
    let stopped = Replica::spawn(&dir, &pod_stopped, &via_proxy, &args)?;
    let a = Replica::spawn(&dir, &pod_a, kubeconfig(), &args)?;
    let b = Replica::spawn(&dir, &pod_b, kubeconfig(), &args)?;
    until_members(&[&stopped, &a, &b], 3).await?;
    create_probes(&api).await?;
    until_converged(&api, &[], "every probe reconciled").await?;
    // The view all three acknowledge, and the probes the one to be stopped runs in it.
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
    let acks = acknowledged(&leases, &ns).await?;
    let with_it = ack_of(&acks, &pod_a).cloned().flatten().unwrap_or_default();
    anyhow::ensure!(
        !with_it.is_empty() && [&pod_b, &pod_stopped].iter().all(|p| ack_of(&acks, p) == Some(&Some(with_it.clone()))),
        "the three acknowledge one view: {acks:?}"
    );
    let its: BTreeSet<String> = proxy
        .forwarded()
        .iter()
        .filter(|f| f.is_write())
        .filter_map(|f| probe_written(&f.path))
        .map(String::from)
        .collect();
    let long: Vec<String> = its.iter().take(1).cloned().collect();
    anyhow::ensure!(!long.is_empty(), "the replica to be stopped runs a probe");

    // Its long run, then a burst of changes to the rest, and the stop.
    change(&api, &long, json!({ "payload": "two", "busyMs": LONG_MS })).await?;
    within(WAIT, "the replica to run the long probe", async {
        while stopped.metric("controller_runtime_active_workers{controller=\"fixture-probe\"}").await < Some(1.0) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await?;
    let rest: Vec<String> = probe_names().into_iter().filter(|name| !long.contains(name)).collect();
    let changes = tokio::spawn({
        let (api, rest) = (api.clone(), rest.clone());
        async move { change(&api, &rest, json!({ "payload": "two" })).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    stopped.signal("-STOP")?;
    let (stopped_at, stopped_ms) = (Instant::now(), now_ms());
    changes.await??;
    // Once its Lease expired, the other two acknowledge a view without it, and run every probe.
    let without = within(WAIT, "the other two to take over", async {
        loop {
            let acks = acknowledged(&leases, &ns).await?;
            let (a, b) = (ack_of(&acks, &pod_a).cloned().flatten(), ack_of(&acks, &pod_b).cloned().flatten());
            if a.is_some() && a == b && a.as_ref() != Some(&with_it) {
                return anyhow::Ok(a.unwrap_or_default());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await??;
    until_converged(&api, &long, "every other probe reconciled by the others").await?;
    tokio::time::sleep((LEASE + Duration::from_secs(1)).saturating_sub(stopped_at.elapsed())).await;
    let stop = stopped_at.elapsed();
    anyhow::ensure!(
        stop < Duration::from_millis(LONG_MS) - Duration::from_secs(2),
        "the others took {stop:?} to take over: the long run would have ended during the stop"
    );
    let (continued, continued_ms) = (Instant::now(), now_ms());
    stopped.signal("-CONT")?;
    let settled = until_settled(&leases, &ns, &[&pod_a, &pod_b], &pod_stopped, &without, continued).await?;
    eprintln!(
        "stopped for {stop:?} (lease {LEASE:?}); the view with it back settled {:?} after SIGCONT",
        settled.saturating_duration_since(continued)
    );

    // The objects the others ran while it was stopped: their status records runs finished in
    // that time, when it could run nothing; and the long one, which one of them was running.
    let mut meanwhile: BTreeSet<String> = long.iter().cloned().collect();
    for probe in api.list(&ListParams::default()).await?.items {
        let runs = probe.data["status"]["runs"].as_array().cloned().unwrap_or_default();
        let at = |run: &serde_json::Value| run["atMs"].as_u64().unwrap_or(0);
        if runs.iter().any(|run| at(run) > stopped_ms && at(run) < continued_ms) {
            meanwhile.insert(probe.name_any());
        }
    }
    let taken = its.iter().filter(|name| meanwhile.contains(*name)).count();
    anyhow::ensure!(taken > long.len(), "the others ran none of the stopped replica's objects while it was stopped");
    let late: Vec<String> = proxy
        .forwarded()
        .iter()
        .filter(|f| f.is_write() && !f.path.contains("/leases/") && f.at >= continued && f.at < settled)
        .map(|f| {
            let theirs = probe_written(&f.path).is_some_and(|name| meanwhile.contains(name));
            let mark = if theirs { " (an object the others ran meanwhile)" } else { "" };
            format!("{} {} at {:?} after SIGCONT{mark}", f.method, f.path, f.at - continued)
        })
        .collect();
    eprintln!("the others ran {} probes while it was stopped, {taken} of its own", meanwhile.len());
    anyhow::ensure!(late.is_empty(), "the replica wrote after it continued, before the new view settled: {late:#?}");

    // Back in the view, it runs its share again and every probe converges.
    change(&api, &probe_names(), json!({ "payload": "three", "busyMs": BUSY_MS })).await?;
    until_converged(&api, &[], "every probe reconciled after the stopped replica came back").await?;
    let forwarded = proxy.forwarded();
    let its_after = forwarded.iter().filter(|f| f.at > settled && f.is_write()).filter_map(|f| probe_written(&f.path));
    anyhow::ensure!(its_after.count() > 0, "the replica that was stopped runs none of its share again");
    drop((stopped, a, b));
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// A leader and an external service.

/// The DnsRecords (`plugins/dnsrecord`) of namespace `ns`.
fn dns_records(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("sample.wasmop.dev", "v1", "DnsRecord");
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, "dnsrecords"))
}

/// A namespace of its own for `test`, with the records service's token in Secret
/// `dns-api-token`, and the service.
async fn with_records(client: &Client, test: &str) -> anyhow::Result<(String, Records)> {
    let ns = namespace(client, test).await?;
    let token: Secret =
        serde_json::from_value(json!({ "metadata": { "name": "dns-api-token" }, "stringData": { "token": TOKEN } }))?;
    Api::<Secret>::namespaced(client.clone(), &ns).create(&PostParams::default(), &token).await?;
    Ok((ns, Records::shared(TOKEN)?))
}

/// Whether `object`'s Ready condition is True.
fn ready(object: &DynamicObject) -> bool {
    wasmop_tests::condition(object, "Ready").is_some_and(|c| c["status"] == "True")
}

/// DnsRecords in the leader test.
const RECORDS: usize = 16;
/// The sample's polling period.
const PERIOD: Duration = Duration::from_secs(2);
/// The sample's HTTP timeout.
const HTTP_TIMEOUT: Duration = Duration::from_secs(2);

/// A leader and a standby run the `dnsrecord` sample against the records service, which answers
/// every request about the test's zone after 1 s. Sixteen DnsRecords are created; once the
/// service received two creates from the leader (its fetches of the others answered a second
/// later, more creates on their way) the leader is stopped (SIGSTOP) until the standby leads,
/// then continued (SIGCONT). Its calls in flight find their answers waiting and would go on
/// with their next request; sends queued below the plugin, its queue and its poller would
/// send more.
///
/// How senders are told apart: the service logs every request on arrival with the process that
/// holds the client's end of its connection (`/proc/net/tcp` and the replicas' descriptors), so
/// the old leader's requests are known by its process ID, not by timing. None of them may arrive
/// after the standby took over (seen on its metrics; the old leader was stopped from before its
/// lease expired until after that); every request after that must come from the new leader.
/// The absence is watched until the old leader reports itself a standby and two polling periods
/// and the sample's HTTP timeout passed after SIGCONT. A failure lists the old leader's late
/// requests (method, path, time after SIGCONT): the pre-change host, whose outgoing HTTP was
/// not fenced, sent five polls 30 to 150 ms after SIGCONT.
///
/// Then: every DnsRecord is served and the zone holds exactly one record per name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_stopped_mid_burst_sends_nothing_to_the_external_service_after_the_standby_took_over()
-> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/dnsrecord/crd.yaml"), None).await?;
    let (ns, service) = with_records(&client, "stopped-leader").await?;
    service.set_delay(&ns, Duration::from_secs(1));
    let dir = test_dir(&ns)?;
    let api = dns_records(&client, &ns);
    let sample = plugin("dnsrecord").display().to_string();
    // The operator's allowances of the sample (its Secrets, its token over plain HTTP).
    let config = workspace_root().join("plugins/dnsrecord/wasmop.yaml").display().to_string();
    let mut args = vec!["--namespace", &ns, "--plugin", &sample, "--config", &config];
    args.extend(["--leader-elect", "--leader-election-namespace", &ns, "--leader-election-id", "dns-leader"]);
    args.extend(SHORT_LEASE);

    let old = Replica::spawn(&dir, &format!("{ns}-old"), kubeconfig(), &args)?;
    old.until_leading("dns-leader", true).await?;
    let new = Replica::spawn(&dir, &format!("{ns}-new"), kubeconfig(), &args)?;
    new.until_leading("dns-leader", false).await?;
    for i in 0..RECORDS {
        let record = json!({
            "apiVersion": "sample.wasmop.dev/v1", "kind": "DnsRecord", "metadata": { "name": format!("r{i:02}") },
            "spec": { "zone": ns, "name": format!("r{i:02}"), "type": "A", "value": format!("10.0.0.{i}") },
        });
        api.create(&PostParams::default(), &serde_json::from_value(record)?).await?;
    }
    let from = |pid: u32| move |r: &records::Received| r.sender == Some(pid);
    within(WAIT, "the leader to send two creates", async {
        let creates = || {
            let received = service.received(&ns);
            received.iter().filter(|r| from(old.pid())(r) && r.method == http::Method::POST).count()
        };
        while creates() < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await?;
    old.signal("-STOP")?;
    let stopped = Instant::now();
    new.until_leading("dns-leader", true).await?;
    let took_over = Instant::now();
    let lease = Api::<Lease>::namespaced(client.clone(), &ns).get("dns-leader").await?.spec.unwrap_or_default();
    let continued = Instant::now();
    old.signal("-CONT")?;

    within(WAIT, "every record served, and the old leader a standby", async {
        loop {
            let list = api.list(&ListParams::default()).await?.items;
            let served = list.len() == RECORDS && list.iter().all(|r| ready(r) && r.data["status"]["id"].is_string());
            if served && old.leading("dns-leader").await == Some(false) {
                return anyhow::Ok(());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await??;
    // An absence is only seen over time: two polling periods and a request's timeout.
    let watched = PERIOD * 2 + HTTP_TIMEOUT;
    tokio::time::sleep(watched.saturating_sub(continued.elapsed())).await;

    let received = service.received(&ns);
    let before = received.iter().filter(|r| r.at < stopped && from(old.pid())(r)).count();
    let after: Vec<&records::Received> = received.iter().filter(|r| r.at > took_over).collect();
    let late: Vec<String> = after
        .iter()
        .filter(|r| r.sender != Some(new.pid()))
        .map(|r| {
            let who = if r.sender == Some(old.pid()) { "the old leader" } else { "an unknown sender" };
            let at = r.at.saturating_duration_since(continued);
            format!("{} {} from {who} at {at:?} after SIGCONT", r.method, r.path)
        })
        .collect();
    eprintln!(
        "the old leader sent {before} requests before it was stopped; the standby led {:?} after the stop (acquired \
         at {:?}); {} requests after that, all from the new leader unless listed",
        took_over - stopped,
        lease.acquire_time.map(|t| t.0),
        after.len()
    );
    anyhow::ensure!(before > 0, "the old leader's requests were told apart before it was stopped");
    anyhow::ensure!(late.is_empty(), "requests reached the service after the standby took over: {late:#?}");
    anyhow::ensure!(after.iter().any(|r| r.at > continued), "the new leader kept polling after SIGCONT");

    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    for record in service.zone(&ns) {
        *names.entry(record.name).or_default() += 1;
    }
    let expected: BTreeMap<String, usize> = (0..RECORDS).map(|i| (format!("r{i:02}"), 1)).collect();
    // On a failure, every create in the order the service gave IDs (`rec-N`), and who sent it.
    let creates: Vec<String> = received
        .iter()
        .filter(|r| r.method == http::Method::POST)
        .map(|r| {
            let who = match r.sender {
                Some(pid) if pid == old.pid() => "old",
                Some(pid) if pid == new.pid() => "new",
                _ => "unknown",
            };
            format!("{who} at {:?} after the stop", r.at.saturating_duration_since(stopped))
        })
        .collect();
    let records: Vec<(String, String)> = service.zone(&ns).into_iter().map(|r| (r.id, r.name)).collect();
    anyhow::ensure!(
        names == expected,
        "one record per DnsRecord in the service, found {names:?}; creates {creates:#?}; records {records:?}"
    );
    anyhow::ensure!(new.leading("dns-leader").await == Some(true), "the new leader still leads");
    drop((old, new));
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// A leader with the default lease settings (lease 15 s, renew deadline 10 s, retry 2 s) runs
/// `fixture-conform` (an external dependent in the records service, the plugin's default 30 s
/// HTTP timeout), and the service takes 12 s to answer each write: one Scenario's record is
/// created by one request, whose answer comes after the renew deadline the call started under.
/// Its renewals extend the term the call belongs to, so the call is not abandoned and retried:
/// exactly one create request reaches the service, exactly one record exists, the Scenario is
/// ready, and the leader led throughout. A failure: the create abandoned at the renew deadline
/// and sent again (two create requests, two records), or never finished (not ready in 60 s, as
/// on the pre-change host, which abandoned every attempt at the deadline it started under).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_leader_finishes_an_external_write_longer_than_its_renew_deadline() -> anyhow::Result<()> {
    const WRITE: Duration = Duration::from_secs(12);
    const RENEW_DEADLINE: Duration = Duration::from_secs(10);
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/fixtures/conform/crd.yaml"), None).await?;
    let (ns, service) = with_records(&client, "stopped-long").await?;
    service.set_write_delay(&ns, WRITE);
    let dir = test_dir(&ns)?;
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "plugins:\n  conform:\n    allowedSecrets: [{{ name: dns-api-token }}]\n    allowPlainHttpSecrets: [\"{}\"]\n",
            records::ORIGIN
        ),
    )?;
    let fixture = plugin("fixture-conform").display().to_string();
    let config = config.display().to_string();
    let mut args = vec!["--namespace", &ns, "--plugin", &fixture, "--config", &config];
    args.extend(["--leader-elect", "--leader-election-namespace", &ns, "--leader-election-id", "conform-leader"]);
    let leader = Replica::spawn(&dir, &format!("{ns}-leader"), kubeconfig(), &args)?;
    leader.until_leading("conform-leader", true).await?;
    let holder = Api::<Lease>::namespaced(client.clone(), &ns).get("conform-leader").await?.spec.unwrap_or_default();

    let gvk = GroupVersionKind::gvk("example.wasmop.dev", "v1", "Scenario");
    let scenarios: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &ApiResource::from_gvk_with_plural(&gvk, "scenarios"));
    let scenario = json!({
        "apiVersion": "example.wasmop.dev/v1", "kind": "Scenario", "metadata": { "name": "long" },
        "spec": { "external": { "www": "v1" } },
    });
    scenarios.create(&PostParams::default(), &serde_json::from_value(scenario)?).await?;
    let created = Instant::now();
    within(WAIT, "the Scenario ready, its record created", async {
        loop {
            anyhow::ensure!(leader.leading("conform-leader").await != Some(false), "the leader stopped leading");
            if ready(&scenarios.get("long").await?) {
                return anyhow::Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await??;
    let took = created.elapsed();
    // An absence is only seen over time: a second create would follow within a few polls.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let creates: Vec<records::Received> =
        service.received(&ns).into_iter().filter(|r| r.method == http::Method::POST).collect();
    let zone = service.zone(&ns);
    let lease = Api::<Lease>::namespaced(client.clone(), &ns).get("conform-leader").await?.spec.unwrap_or_default();
    eprintln!(
        "a {WRITE:?} external write: ready {took:?} after the Scenario was created; {} create requests",
        creates.len()
    );
    anyhow::ensure!(creates.len() == 1, "one create request, not {}: {creates:#?}", creates.len());
    anyhow::ensure!(creates[0].sender == Some(leader.pid()), "the leader sent it");
    anyhow::ensure!(zone.len() == 1 && zone[0].value == "v1", "one record in the service: {zone:?}");
    anyhow::ensure!(took > RENEW_DEADLINE, "the write outlasted the renew deadline ({took:?})");
    anyhow::ensure!(leader.leading("conform-leader").await == Some(true), "the leader still leads");
    anyhow::ensure!(
        lease.holder_identity == holder.holder_identity && lease.lease_transitions == holder.lease_transitions,
        "the lease stayed with the leader: {holder:?}, then {lease:?}"
    );
    drop(leader);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
