//! Leader election between host processes (the `wasmop` binary) running the same plugin against
//! the real API server, on short lease settings (lease 3 s, renew deadline 2 s, retry 0.5 s):
//! exactly one reconciles; after `kill -9` of the leader the standby takes over and every change
//! made meanwhile converges; after SIGTERM the leader finishes the slow reconcile it is running,
//! then releases the lease, so a standby takes over before the lease could have expired. The
//! faults at the fence's edges: a leader cut off (a TCP relay) or answered 429 and stalled (an
//! HTTP proxy, `wasmop_tests::proxy`) writes nothing once its fence closed; SIGTERM with 100
//! objects queued starts no run; a lease's own duration holds against a standby's shorter one.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use wasmop_tests::proxy::{Mode, Proxy};
use wasmop_tests::{
    apply_file, client, kubeconfig, kubeconfig_for_proxy, namespace, plugin, wasmop_binary, within, workspace_root,
};

const LEASE: Duration = Duration::from_secs(3);
const RETRY: Duration = Duration::from_millis(500);
const WAIT: Duration = Duration::from_secs(60);

fn probes(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("test.wasmop.dev", "v1", "Probe");
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, "probes"))
}

/// One host process with leader election on, serving its metrics.
struct Replica {
    child: Child,
    metrics: SocketAddr,
}

/// The short lease settings most tests use: lease 3 s, renew deadline 2 s, retry 0.5 s.
const SHORT_LEASE: [&str; 6] = ["--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "500ms"];

impl Replica {
    fn start(ns: &str, name: &str) -> anyhow::Result<Self> {
        Self::start_with(ns, name, kubeconfig(), &[])
    }

    /// A replica talking to the API server as `kubeconfig` says, with more `args`.
    fn start_with(ns: &str, name: &str, kubeconfig: &Path, args: &[&str]) -> anyhow::Result<Self> {
        let mut command = Self::command(ns, name, kubeconfig, &SHORT_LEASE)?;
        let child = command.0.args(args).stderr(Stdio::null()).spawn()?;
        Ok(Self { child, metrics: command.1 })
    }

    /// The command of a replica with the `lease` settings, and the address of its metrics.
    fn command(ns: &str, name: &str, kubeconfig: &Path, lease: &[&str]) -> anyhow::Result<(Command, SocketAddr)> {
        let metrics = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        let mut command = Command::new(wasmop_binary()?);
        command
            .args(["run", "--namespace", ns, "--leader-elect", "--leader-election-namespace", ns])
            .args(["--leader-election-id", "probe-leader"])
            .args(lease)
            .args(["--metrics-address", &metrics.to_string()])
            .arg("--plugin")
            .arg(plugin("fixture-probe"))
            .env("KUBECONFIG", kubeconfig)
            .env("POD_NAME", name)
            .env("WASMOP_CACHE_DIR", workspace_root().join("target/wasmop-test-cache"))
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        Ok((command, metrics))
    }

    /// The metrics text, or `None` while the process does not answer.
    async fn scrape(&self) -> Option<String> {
        wasmop_tests::http_get(self.metrics, "/metrics").await
    }

    /// Whether it leads, by its `leader_election_master_status`; `None` while unknown.
    async fn leading(&self) -> Option<bool> {
        let text = self.scrape().await?;
        let line = text.lines().find(|l| l.starts_with("leader_election_master_status{name=\"probe-leader\"}"))?;
        Some(line.ends_with(" 1"))
    }

    /// Its reconciles of the probe plugin, all results.
    async fn reconciles(&self) -> u64 {
        let Some(text) = self.scrape().await else { return 0 };
        text.lines()
            .filter(|l| l.starts_with("controller_runtime_reconcile_total{controller=\"fixture-probe\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    }

    /// Its write requests (attempted, whether or not they succeeded).
    async fn writes(&self) -> Option<u64> {
        let text = self.scrape().await?;
        let lines = text.lines().filter(|l| l.starts_with("wasmop_writes_total{plugin=\"fixture-probe\""));
        Some(lines.filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum::<f64>() as u64)
    }

    /// Its reconciles in flight.
    async fn active_workers(&self) -> u64 {
        let Some(text) = self.scrape().await else { return 0 };
        let line =
            text.lines().find(|l| l.starts_with("controller_runtime_active_workers{controller=\"fixture-probe\"}"));
        line.and_then(|l| l.rsplit(' ').next()?.parse().ok()).unwrap_or(0)
    }

    /// Waits until it reports that it leads (`true`), or that it knows it is a standby.
    async fn until_leading(&self, leading: bool) -> anyhow::Result<()> {
        let what = if leading { "a replica to lead" } else { "a replica to know it is a standby" };
        within(WAIT, what, async {
            while self.leading().await != Some(leading) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
    }

    /// Creates a Probe that always fails (retried every 100 ms by the tests' overrides) and waits
    /// until this replica, the leader, wrote for it (an Event and an error status) five times.
    async fn writing_a_failing_probe(&self, client: &Client, ns: &str) -> anyhow::Result<()> {
        let failing = serde_json::json!({
            "apiVersion": "test.wasmop.dev/v1", "kind": "Probe", "metadata": { "name": "failing" },
            "spec": { "alwaysFail": true }
        });
        probes(client, ns).create(&PostParams::default(), &serde_json::from_value(failing)?).await?;
        let writing = self.writes().await.unwrap_or(0);
        within(WAIT, "the leader to write", async {
            while self.writes().await.unwrap_or(0) < writing + 5 {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
    }

    fn terminate(&self) -> anyhow::Result<()> {
        let status = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status()?;
        anyhow::ensure!(status.success(), "kill -TERM failed");
        Ok(())
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until exactly one of `replicas` leads; its index.
async fn leader_of(replicas: &[&Replica]) -> anyhow::Result<usize> {
    within(WAIT, "one leader", async {
        loop {
            let mut states = Vec::new();
            for replica in replicas {
                states.push(replica.leading().await);
            }
            if states.iter().all(Option::is_some) && states.iter().filter(|s| **s == Some(true)).count() == 1 {
                return states.iter().position(|s| *s == Some(true)).expect("counted one");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
}

/// Changes the probe `name` and waits until its current generation is reconciled.
async fn change_and_converge(api: &Api<DynamicObject>, name: &str, payload: &str) -> anyhow::Result<()> {
    let patch = serde_json::json!({ "spec": { "payload": payload } });
    let generation = api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await?.metadata.generation;
    within(WAIT, &format!("{name} reconciled at its new generation"), async {
        loop {
            let probe = api.get(name).await?;
            if probe.data["status"]["observedGeneration"].as_i64() == generation {
                return anyhow::Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await?
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_reconciles_and_a_standby_takes_over_after_a_kill_and_after_a_release() -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/fixtures/probe/crd.yaml"), None).await?;
    let ns = namespace(&client, "leader").await?;
    let api = probes(&client, &ns);
    let probe = |name: &str| -> anyhow::Result<DynamicObject> {
        Ok(serde_json::from_value(serde_json::json!({
            "apiVersion": "test.wasmop.dev/v1", "kind": "Probe", "metadata": { "name": name }, "spec": {}
        }))?)
    };
    api.create(&PostParams::default(), &probe("one")?).await?;

    // Two replicas: exactly one leads and reconciles; the standby writes nothing.
    let a = Replica::start(&ns, "a")?;
    let b = Replica::start(&ns, "b")?;
    let first = leader_of(&[&a, &b]).await?;
    change_and_converge(&api, "one", "1").await?;
    let (leader, standby) = if first == 0 { (a, b) } else { (b, a) };
    assert!(leader.reconciles().await >= 1, "the leader reconciled");
    assert_eq!(standby.reconciles().await, 0, "the standby reconciled nothing");
    assert_eq!(standby.leading().await, Some(false));

    // kill -9 the leader, change the probe meanwhile: the standby takes over and converges.
    drop(leader);
    let killed = Instant::now();
    let patch = serde_json::json!({ "spec": { "payload": "while-nobody-leads" } });
    api.patch("one", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    api.create(&PostParams::default(), &probe("two")?).await?;
    standby.until_leading(true).await?;
    let takeover = killed.elapsed();
    change_and_converge(&api, "one", "2").await?;
    change_and_converge(&api, "two", "1").await?;
    eprintln!("takeover after kill -9: {takeover:?} (lease {LEASE:?}, retry {RETRY:?})");
    // The standby can only notice the lease went stale a lease duration after it last saw it
    // renewed, and tries once per retry period.
    assert!(takeover <= LEASE + RETRY * 2 + Duration::from_secs(2), "took over after {takeover:?}");

    // SIGTERM: the leader finishes, releases the lease, and a new standby takes over before the
    // lease could have expired.
    let c = Replica::start(&ns, "c")?;
    c.until_leading(false).await?;
    // A slow reconcile (the probe busy-waits 1.5 s) is running when SIGTERM comes.
    let patch = serde_json::json!({ "spec": { "payload": "slow", "busyMs": 1500 } });
    let generation = api.patch("two", &PatchParams::default(), &Patch::Merge(&patch)).await?.metadata.generation;
    within(WAIT, "the slow reconcile to start", async {
        while standby.active_workers().await < 1 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await?;
    standby.terminate()?;
    let terminated = Instant::now();
    // The leader finishes its run and writes its status, then releases; the new leader's own
    // run of `two` busy-waits 1.5 s too, so a status seen before the new leader leads is the old
    // leader's.
    let (mut finished, mut took_over) = (None, None);
    within(WAIT, "the slow reconcile's status and the new leader", async {
        while finished.is_none() || took_over.is_none() {
            if finished.is_none() && api.get("two").await?.data["status"]["observedGeneration"].as_i64() == generation {
                finished = Some(terminated.elapsed());
            }
            if took_over.is_none() && c.leading().await == Some(true) {
                took_over = Some(terminated.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        anyhow::Ok(())
    })
    .await??;
    let (finished, took_over) = (finished.expect("seen"), took_over.expect("seen"));
    eprintln!("after SIGTERM: the slow reconcile finished at {finished:?}, the standby led at {took_over:?}");
    assert!(finished < took_over, "the run in flight finished before the lease was released");
    assert!(took_over - finished < LEASE, "released, so no wait for the lease to expire");
    change_and_converge(&api, "two", "2").await?;
    Ok(())
}

/// A namespace for test `name`, its directory, and the overrides file (its path) that retry a
/// failing Probe every 100 ms, so that a leader writes ten times a second.
async fn failing_fast(client: &Client, name: &str) -> anyhow::Result<(String, PathBuf, String)> {
    apply_file(client, &workspace_root().join("plugins/fixtures/probe/crd.yaml"), None).await?;
    let ns = namespace(client, name).await?;
    let dir = workspace_root().join(format!("target/{name}-{}", std::process::id()));
    let overrides = dir.join("overrides.yaml");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        &overrides,
        "plugins:\n  fixture-probe:\n    retry: { initialIntervalMs: 100, multiplier: 1.0, maxAttempts: 100000 }\n",
    )?;
    Ok((ns, dir, overrides.to_string_lossy().to_string()))
}

/// A leader cut off from the API server stops writing at its renew deadline, before its lease
/// can expire and a standby take over, and writes nothing once it can reach the API server again
/// (the standby leads by then). The leader's client goes through a relay the test cuts; a Probe
/// that always fails, retried every 100 ms, makes the leader write (an Event and an error status)
/// ten times a second until it is fenced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_from_the_api_server_stops_writing_before_its_lease_can_expire() -> anyhow::Result<()> {
    let client = client().await?;
    let (ns, dir, overrides) = failing_fast(&client, "leader-cut").await?;
    let config = wasmop_tests::config().await?;
    let api_server = config.cluster_url.authority().expect("the API server's address").as_str().parse()?;
    let relay = wasmop_tests::relay::Relay::to(api_server).await?;

    let leader =
        Replica::start_with(&ns, "cut", &wasmop_tests::kubeconfig_via(&relay.url(), &dir)?, &["--config", &overrides])?;
    leader.until_leading(true).await?;
    let standby = Replica::start_with(&ns, "direct", kubeconfig(), &["--config", &overrides])?;
    standby.until_leading(false).await?;
    leader.writing_a_failing_probe(&client, &ns).await?;

    relay.cut();
    let cut = Instant::now();
    // Until the leader reports it stopped leading, the time its write count last moved; from
    // then on, the count read just after (every write before the fence is in it), which must
    // not move again.
    let (mut writes, mut last_write) = (leader.writes().await.unwrap_or(0), Duration::ZERO);
    let (mut fenced, mut at_fence, mut took_over) = (None, 0, None);
    within(WAIT, "the leader fenced and the standby leading", async {
        while took_over.is_none() {
            if fenced.is_none() {
                let now = leader.writes().await.unwrap_or(writes);
                if now != writes {
                    (writes, last_write) = (now, cut.elapsed());
                }
                if leader.leading().await == Some(false) {
                    fenced = Some(cut.elapsed());
                    at_fence = leader.writes().await.unwrap_or(writes);
                }
            } else {
                let now = leader.writes().await.unwrap_or(at_fence);
                anyhow::ensure!(now == at_fence, "the fenced leader wrote ({at_fence} writes, then {now})");
            }
            if standby.leading().await == Some(true) {
                took_over = Some(cut.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        anyhow::Ok(())
    })
    .await??;
    let took_over = took_over.expect("seen");
    eprintln!(
        "cut off at 0: last write attempt seen at {last_write:?}, fenced at {fenced:?}, the standby led at {took_over:?}"
    );
    let fenced = fenced.expect("the cut-off leader stopped leading before the standby took over");
    assert!(fenced < took_over, "fenced before the lease could expire and the standby take over");

    // Reconnected, the old leader finds the lease taken: it stays a standby and writes nothing.
    relay.restore();
    let before = leader.writes().await.unwrap_or(at_fence);
    assert_eq!(before, at_fence, "no write while cut off after the fence closed");
    within(WAIT, "the new leader writing", async {
        let from = standby.writes().await.unwrap_or(0);
        while standby.writes().await.unwrap_or(0) < from + 5 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await?;
    // An absence is only seen over time: a lease duration more, reconnected.
    tokio::time::sleep(LEASE).await;
    assert_eq!(leader.leading().await, Some(false), "the old leader stays a standby");
    assert_eq!(leader.writes().await, Some(before), "a lease lost is never followed by another write");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The Lease the replicas of namespace `ns` elect on.
async fn lease(client: &Client, ns: &str) -> anyhow::Result<Lease> {
    Ok(Api::<Lease>::namespaced(client.clone(), ns).get("probe-leader").await?)
}

/// A leader whose connection to the API server starts answering 429 Too Many Requests to every
/// other request and stalling the rest, while a standby takes over, writes nothing after its
/// fence closed: no retry below the host sends a write later (kube-client's own retry of 429s
/// did), and a stalled write is abandoned at the fence's deadline instead of reaching the API
/// server once the connection heals. Checked twice: on the requests the proxy forwarded to the
/// API server, and on the API server's Events, whose server-set write times must all come before
/// the standby acquired the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_api_server_answers_429_and_stalls_writes_nothing_after_its_fence_closed() -> anyhow::Result<()>
{
    let client = client().await?;
    let (ns, dir, overrides) = failing_fast(&client, "leader-429").await?;
    let proxy = Proxy::to(client.clone()).await?;
    let leader =
        Replica::start_with(&ns, "faulted", &kubeconfig_for_proxy(&proxy.url(), &dir)?, &["--config", &overrides])?;
    leader.until_leading(true).await?;
    let identity = lease(&client, &ns).await?.spec.and_then(|s| s.holder_identity).expect("a holder");
    let standby = Replica::start_with(&ns, "direct", kubeconfig(), &["--config", &overrides])?;
    standby.until_leading(false).await?;
    leader.writing_a_failing_probe(&client, &ns).await?;

    proxy.set(Mode::Faulty);
    let faulted = Instant::now();
    standby.until_leading(true).await?;
    let took_over = faulted.elapsed();
    let taken = lease(&client, &ns).await?.spec.expect("a lease spec");
    anyhow::ensure!(taken.holder_identity.as_deref() != Some(identity.as_str()), "the standby holds the lease");
    let acquired = taken.acquire_time.expect("an acquire time").0;
    anyhow::ensure!(proxy.stalled() > 0, "the proxy stalled requests");

    // The connection heals: whatever the old leader still had on its way would get through now.
    proxy.set(Mode::Pass);
    let healed = Instant::now();
    within(WAIT, "the new leader writing", async {
        let from = standby.writes().await.unwrap_or(0);
        while standby.writes().await.unwrap_or(0) < from + 5 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await?;
    // An absence is only seen over time: kube-client's retries back off for seconds.
    tokio::time::sleep(Duration::from_secs(5)).await;

    // While faulted nothing passes: a write that reached the API server past the fence is one
    // that was stalled and released, or one sent (a retry) once the connection healed, when the
    // standby led already.
    let late: Vec<_> = proxy
        .forwarded()
        .into_iter()
        .filter(|f| f.is_write() && !f.path.contains("/leases/") && (f.held || f.at > healed))
        .map(|f| format!("{} {} at {:?} (held: {})", f.method, f.path, f.at - faulted, f.held))
        .collect();
    eprintln!(
        "faulted at 0: the standby led at {took_over:?}; {} requests stalled, {} abandoned by the host",
        proxy.stalled(),
        proxy.abandoned()
    );
    anyhow::ensure!(late.is_empty(), "the fenced leader's writes reached the API server: {late:?}");
    // The API server's own record: the old leader's Events were all last written before the
    // standby acquired the lease (managedFields times are the API server's, in whole seconds).
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), &ns);
    let theirs: Vec<_> = events
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.reporting_instance.as_deref() == Some(identity.as_str()))
        .collect();
    anyhow::ensure!(!theirs.is_empty(), "the old leader recorded Events while it led");
    for event in &theirs {
        let written = event.metadata.managed_fields.iter().flatten().filter_map(|f| f.time.as_ref()).map(|t| t.0).max();
        let written = written.expect("the API server records when it wrote an Event");
        anyhow::ensure!(
            written < acquired,
            "Event {:?} of the old leader was written at {written}, after the standby acquired the lease at {acquired}",
            event.metadata.name
        );
    }
    assert_eq!(leader.leading().await, Some(false), "the old leader stays a standby");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// After SIGTERM the leader starts no new run (100 busy Probes are queued when the signal
/// comes), finishes the runs in flight, and releases the lease: the standby leads within 5 s and
/// reconciles the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_sigterm_no_run_starts_and_a_standby_leads_within_5_s() -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/fixtures/probe/crd.yaml"), None).await?;
    let ns = namespace(&client, "leader-term").await?;
    let dir = workspace_root().join(format!("target/leader-term-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let log_path = dir.join("leader.log");
    let (mut command, metrics) = Replica::command(&ns, "terminated", kubeconfig(), &SHORT_LEASE)?;
    let child = command
        .env("RUST_LOG", "info,wasmop::scheduler=debug")
        .env("NO_COLOR", "1")
        .stderr(std::fs::File::create(&log_path)?)
        .spawn()?;
    let mut leader = Replica { child, metrics };
    leader.until_leading(true).await?;
    let standby = Replica::start(&ns, "next")?;
    standby.until_leading(false).await?;
    let api = probes(&client, &ns);
    let mut generations = Vec::new();
    for i in 0..100 {
        let probe = serde_json::json!({
            "apiVersion": "test.wasmop.dev/v1", "kind": "Probe", "metadata": { "name": format!("busy-{i}") },
            "spec": { "payload": "busy", "busyMs": 200 }
        });
        let created = api.create(&PostParams::default(), &serde_json::from_value(probe)?).await?;
        generations.push((created.metadata.name.expect("named"), created.metadata.generation));
    }
    within(WAIT, "the leader to be busy", async {
        while leader.reconciles().await < 3 || leader.active_workers().await < 1 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await?;
    leader.terminate()?;
    let terminated = Instant::now();
    standby.until_leading(true).await?;
    let took_over = terminated.elapsed();
    let exited = tokio::task::block_in_place(|| leader.child.wait())?;
    let log = std::fs::read_to_string(&log_path)?;
    // The scheduler logs each run it starts, and once that it stopped taking work: its own
    // order, exact. (A run's own "reconcile started" comes when it is first polled, which may
    // be after the signal for a run started before it.)
    anyhow::ensure!(log.contains("shutting down"), "the leader logged the signal");
    let (before, after) = log.split_once("stopped taking work").expect("the scheduler logged its stop");
    // Every run logs its end in one of these words.
    let ends = |text: &str| -> usize {
        ["reconcile: reconciled", "reconcile failed", "reconciling again soon"]
            .iter()
            .map(|end| text.matches(end).count())
            .sum()
    };
    let (started, started_after) = (before.matches("run started").count(), after.matches("run started").count());
    let (in_flight, finished_after) = (started - ends(before), ends(after));
    eprintln!(
        "after SIGTERM: {started_after} runs started ({started} before), {finished_after} of the {in_flight} in flight \
         finished, the standby led at {took_over:?}, exit {exited}"
    );
    let done = before.matches("verdict=Done").count();
    anyhow::ensure!(started > 0 && done < 100, "the signal came while runs were queued ({done} of 100 done)");
    anyhow::ensure!(started_after == 0, "{started_after} runs started after the stop:\n{after}");
    anyhow::ensure!(finished_after <= in_flight, "{finished_after} runs finished after the stop:\n{after}");
    anyhow::ensure!(took_over <= Duration::from_secs(5), "handed over after {took_over:?}");
    within(WAIT, "every probe reconciled", async {
        for (name, generation) in &generations {
            while api.get(name).await?.data["status"]["observedGeneration"].as_i64() != *generation {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        anyhow::Ok(())
    })
    .await??;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// A lease whose record promises its holder 40 s is not taken over before 40 s by a standby
/// configured for 15 s (during a rollout that shortens `--lease-duration`, the old leader still
/// writes for as long as its own, longer setting allows).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_waits_out_the_lease_duration_in_the_record_not_its_own() -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/fixtures/probe/crd.yaml"), None).await?;
    let ns = namespace(&client, "leader-record").await?;
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(k8s_openapi::jiff::Timestamp::now());
    let held: Lease = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "probe-leader" },
        "spec": { "holderIdentity": "an-old-replica", "leaseDurationSeconds": 40, "acquireTime": now, "renewTime": now }
    }))?;
    Api::<Lease>::namespaced(client.clone(), &ns).create(&PostParams::default(), &held).await?;
    let written = Instant::now();
    let lease = ["--lease-duration", "15s", "--renew-deadline", "10s", "--retry-period", "1s"];
    let (mut command, metrics) = Replica::command(&ns, "new", kubeconfig(), &lease)?;
    let replica = Replica { child: command.stderr(Stdio::null()).spawn()?, metrics };
    // It elects once its plugins are loaded (a cold compile can take a while in a debug build),
    // and counts the record's duration from when it first reads it.
    within(WAIT, "the replica to run", async {
        while replica.leading().await.is_none() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await?;
    let running = written.elapsed();
    within(Duration::from_secs(60), "the replica to lead", async {
        while replica.leading().await != Some(true) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await?;
    let took_over = written.elapsed();
    eprintln!(
        "a 40 s lease left by its holder: taken over after {took_over:?} by a replica configured for 15 s (running \
         after {running:?})"
    );
    anyhow::ensure!(took_over >= Duration::from_secs(40), "taken over after {took_over:?}, before the record's 40 s");
    let limit = running + Duration::from_secs(45);
    anyhow::ensure!(took_over <= limit, "taken over only after {took_over:?}");
    Ok(())
}
