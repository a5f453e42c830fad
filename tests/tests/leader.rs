//! Leader election between host processes (the `wasmop` binary) running the same plugin against
//! the real API server, on short lease settings (lease 3 s, renew deadline 2 s, retry 0.5 s):
//! exactly one reconciles; after `kill -9` of the leader the standby takes over and every change
//! made meanwhile converges; after SIGTERM the leader finishes the slow reconcile it is running,
//! then releases the lease, so a standby takes over before the lease could have expired.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use wasmop_tests::{apply_file, client, kubeconfig, namespace, plugin, wasmop_binary, within, workspace_root};

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

impl Replica {
    fn start(ns: &str, name: &str) -> anyhow::Result<Self> {
        Self::start_with(ns, name, kubeconfig(), &[])
    }

    /// A replica talking to the API server as `kubeconfig` says, with more `args`.
    fn start_with(ns: &str, name: &str, kubeconfig: &Path, args: &[&str]) -> anyhow::Result<Self> {
        let metrics = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        let child = Command::new(wasmop_binary()?)
            .args(["run", "--namespace", ns, "--leader-elect", "--leader-election-namespace", ns])
            .args(["--leader-election-id", "probe-leader", "--lease-duration", "3s", "--renew-deadline", "2s"])
            .args(["--retry-period", "500ms", "--metrics-address", &metrics.to_string()])
            .args(args)
            .arg("--plugin")
            .arg(plugin("fixture-probe"))
            .env("KUBECONFIG", kubeconfig)
            .env("POD_NAME", name)
            .env("WASMOP_CACHE_DIR", workspace_root().join("target/wasmop-test-cache"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        Ok(Self { child, metrics })
    }

    /// The metrics text, or `None` while the process does not answer.
    async fn scrape(&self) -> Option<String> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(self.metrics).await.ok()?;
        stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n").await.ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await.ok()?;
        Some(response)
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
    within(WAIT, "the standby to lead", async {
        while standby.leading().await != Some(true) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await?;
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
    within(WAIT, "the new standby to know it is one", async {
        while c.leading().await != Some(false) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await?;
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

/// A kubeconfig like the test's, whose server is `url`.
fn kubeconfig_via(url: &http::Uri, dir: &Path) -> anyhow::Result<PathBuf> {
    let mut config = kube::config::Kubeconfig::read_from(kubeconfig())?;
    for cluster in config.clusters.iter_mut().filter_map(|c| c.cluster.as_mut()) {
        cluster.server = Some(url.to_string().trim_end_matches('/').to_string());
    }
    std::fs::create_dir_all(dir)?;
    let path = dir.join("kubeconfig-via-relay");
    std::fs::write(&path, serde_json::to_vec(&config)?)?;
    Ok(path)
}

/// A leader cut off from the API server stops writing at its renew deadline, before its lease
/// can expire and a standby take over, and writes nothing once it can reach the API server again
/// (the standby leads by then). The leader's client goes through a relay the test cuts; a Probe
/// that always fails, retried every 100 ms, makes the leader write (an Event and an error status)
/// ten times a second until it is fenced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_from_the_api_server_stops_writing_before_its_lease_can_expire() -> anyhow::Result<()> {
    let client = client().await?;
    apply_file(&client, &workspace_root().join("plugins/fixtures/probe/crd.yaml"), None).await?;
    let ns = namespace(&client, "leader-cut").await?;
    let dir = workspace_root().join(format!("target/leader-cut-{}", std::process::id()));
    let overrides = dir.join("overrides.yaml");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        &overrides,
        "plugins:\n  fixture-probe:\n    retry: { initialIntervalMs: 100, multiplier: 1.0, maxAttempts: 100000 }\n",
    )?;
    let overrides = overrides.to_string_lossy().to_string();
    let config = wasmop_tests::config().await?;
    let api_server = config.cluster_url.authority().expect("the API server's address").as_str().parse()?;
    let relay = wasmop_tests::relay::Relay::to(api_server).await?;

    let leader = Replica::start_with(&ns, "cut", &kubeconfig_via(&relay.url(), &dir)?, &["--config", &overrides])?;
    within(WAIT, "the replica behind the relay to lead", async {
        while leader.leading().await != Some(true) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await?;
    let standby = Replica::start_with(&ns, "direct", kubeconfig(), &["--config", &overrides])?;
    within(WAIT, "the standby to know it is one", async {
        while standby.leading().await != Some(false) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await?;
    let failing = serde_json::json!({
        "apiVersion": "test.wasmop.dev/v1", "kind": "Probe", "metadata": { "name": "failing" },
        "spec": { "alwaysFail": true }
    });
    probes(&client, &ns).create(&PostParams::default(), &serde_json::from_value(failing)?).await?;
    let writing = leader.writes().await.unwrap_or(0);
    within(WAIT, "the leader to write", async {
        while leader.writes().await.unwrap_or(0) < writing + 5 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await?;

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
