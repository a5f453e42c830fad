//! The end-to-end parts: the greeting plugin in the wasmop host against `wasmop-native` (the
//! same reconcile as a kube-rs `Controller`), each its own process in a namespace of its own, on
//! one control plane, side by side (at once), each with the same number of runtime worker
//! threads ([`super::knobs::threads`]). Every figure is the controller process's own: its peak memory,
//! anonymous first, then PSS and RSS ([`super::process`]), its CPU seconds
//! (`/proc/<pid>/stat`), and the change-to-status latency from the write's start until the load
//! generator's watch shows the status for it.
//!
//! - `burst`: 1,000 Greetings created (`create 1,000`), then each changed 3 times, a round of
//!   1,000 changes at a time (`burst 1,000 x 3`);
//! - `paced`: then 100 changes a second for `BENCH_PACED_SECONDS` (default 20), round robin,
//!   each side's controller in turn ([`paced_in_turn`]), on its own Greetings;
//! - `burst-10k`: 10,000 Greetings created into a fresh controller (`create 10,000`); the
//!   bounded side (`--cache-budget-mib`, [`super::process::budget_mib`]) runs here too;
//! - `finalizer`: `burst`'s creates and changes with a finalizer on both sides (the greeting
//!   plugin built with a cleanup, `fixture-greeting-cleanup`; `wasmop-native --finalizer`):
//!   `create 1,000, finalizer` and `burst 1,000 x 3, finalizer`; the Greetings are then deleted
//!   and the controller removes its finalizer from each;
//! - `startup`: that controller stopped, one Greeting changed, a new one started: the time from
//!   its start until that Greeting shows its status, with 10,000 existing objects to list.

use std::path::Path;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DynamicObject};

use super::apiserver::{self, Counted};
use super::load::{self, Latencies, Tracker};
use super::process::{self, CacheRequests, Controller, Side};
use super::report::Run;

/// How long any one wait for statuses may take.
const SETTLE: Duration = Duration::from_secs(600);

/// Objects of the `burst` part.
const BURST: usize = 1_000;
/// Changes per object of the `burst` part.
const ROUNDS: usize = 3;
/// Objects of the `burst-10k` part.
const MANY: usize = 10_000;
/// Changes a second of the `paced` part.
const PACE: u32 = 100;

/// Samples the controller's CPU and memory around one phase.
struct Phase<'a> {
    controller: &'a Controller,
    started: Instant,
    cpu: f64,
    requests: Option<CacheRequests>,
    /// The API server, what of its count of writes is this controller's, and that count.
    counted: Option<(Client, Counted, f64)>,
}

impl<'a> Phase<'a> {
    /// A phase of `controller`; `counted` names its writes in the API server's count (none when
    /// another controller of the phase writes the same resources).
    async fn begin(controller: &'a Controller, counted: Option<(&Client, Counted)>) -> anyhow::Result<Self> {
        let counted = match counted {
            Some((client, counted)) => Some((client.clone(), counted, apiserver::writes(client, counted).await?)),
            None => None,
        };
        let (started, cpu) = (Instant::now(), controller.cpu_seconds()?);
        // Waits for a host just started to serve its metrics, inside the phase's time.
        let requests = controller.cache_requests()?;
        Ok(Self { controller, started, cpu, requests, counted })
    }

    /// The phase's run of `changes`, each one write of the load generator.
    async fn end(
        self,
        side: Side,
        scenario: &str,
        round: usize,
        changes: usize,
        latencies: Latencies,
    ) -> anyhow::Result<Run> {
        let requests = self.controller.cache_requests()?.zip(self.requests).map(|(now, then)| now - then);
        let elapsed = self.started.elapsed();
        let (cpu, memory) = (self.controller.cpu_seconds()? - self.cpu, self.controller.peak_memory()?);
        let writes = match &self.counted {
            Some((client, counted, before)) => {
                Some(apiserver::settled_writes(client, *counted).await? - before - changes as f64)
            }
            None => None,
        };
        Ok(Run::new(side, scenario, round, changes, elapsed, latencies, cpu, memory)
            .with_cache_requests(requests)
            .with_api_writes(writes))
    }
}

/// Installs the Greeting CRD (idempotent), and its copies in [`process::NATIVE_GROUP`] for
/// `wasmop-native` and in [`process::TWIN_GROUP`] for its twin; returns once all are served.
pub async fn install(client: &Client) -> anyhow::Result<()> {
    let crd = wasmop_tests::workspace_root().join("plugins/greeting/crd.yaml");
    wasmop_tests::apply_file(client, &crd, None).await?;
    for group in [process::NATIVE_GROUP, process::TWIN_GROUP] {
        let text = std::fs::read_to_string(&crd)?.replace(process::WASMOP_GROUP, group);
        let copy: serde_json::Value = serde_saphyr::from_str(&text)?;
        wasmop_tests::apply(client, copy, None).await?;
    }
    for group in [process::WASMOP_GROUP, process::NATIVE_GROUP, process::TWIN_GROUP] {
        let api = load::greetings(client, "default", group);
        wasmop_tests::until(
            &format!("Greetings of {group} to be served"),
            async || Ok(api.list(&Default::default()).await.is_ok()),
            |served| *served,
        )
        .await?;
    }
    Ok(())
}

/// A controller on Greetings of its own, its load generator's watch on them: set up for
/// [`burst`], kept for [`paced`].
pub struct Warm {
    /// Ends the names of its scenarios.
    suffix: String,
    side: Side,
    round: usize,
    ns: String,
    api: Api<DynamicObject>,
    tracker: Tracker,
    controller: Controller,
    /// Its writes in the API server's count, unless another controller writes the same group.
    counted: Option<Counted>,
}

impl Warm {
    /// `side` in a fresh namespace, its controller started with `extra` arguments; `counted`
    /// when no other controller of its phases writes Greetings of its group.
    async fn start(
        client: &Client,
        kubeconfig: &Path,
        (side, round): (Side, usize),
        (prefix, suffix): (&str, &str),
        extra: &[String],
        counted: bool,
    ) -> anyhow::Result<Self> {
        let ns = wasmop_tests::namespace(client, &format!("{prefix}-{}", side.label().replace(' ', "-"))).await?;
        let api = load::greetings(client, &ns, side.group());
        let tracker = Tracker::start(&api).await?;
        let controller = Controller::start(side, &ns, kubeconfig, extra)?;
        let counted = counted.then(|| counted_alone(side));
        Ok(Self { suffix: suffix.into(), side, round, ns, api, tracker, controller, counted })
    }

    /// Which controller.
    pub fn side(&self) -> Side {
        self.side
    }

    /// The controller.
    pub fn controller(&self) -> &Controller {
        &self.controller
    }

    /// Stops the controller.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.controller.stop().await
    }

    /// A phase of its controller, counting its writes if they can be told apart.
    async fn phase(&self) -> anyhow::Result<Phase<'_>> {
        let client = self.api.clone().into_client();
        Phase::begin(&self.controller, self.counted.map(|c| (&client, c))).await
    }
}

/// What of the API server's count of writes is `side`'s alone.
fn counted_alone(side: Side) -> Counted {
    // wasmop-native records no Events; a wasmop host does (on failures).
    Counted { group: side.group(), events: !side.native() }
}

/// Whether the API server's count can tell `side`'s writes apart from those of the other
/// `sides` of its phases: none of them writes Greetings of its group, and not both record
/// Events (which have no group of their own).
fn counted(side: Side, sides: &[Side]) -> bool {
    let ours = counted_alone(side);
    sides
        .iter()
        .filter(|s| **s != side)
        .map(|s| counted_alone(*s))
        .all(|theirs| theirs.group != ours.group && !(theirs.events && ours.events))
}

/// `burst` for `sides` at once, side by side: each in a fresh namespace with a controller of
/// its own, left running for [`paced`]; the names of its scenarios (and [`paced`]'s) end in
/// `suffix`. Side by side, a slow moment of the shared control plane falls on every side alike;
/// one after the other, the same side's rounds of 1,000 changes took 3.5 to 6.9 s here, set by
/// the load generator's own writes.
pub async fn burst(
    client: &Client,
    kubeconfig: &Path,
    sides: &[Side],
    round: usize,
    suffix: &str,
) -> anyhow::Result<(Vec<Run>, Vec<Warm>)> {
    let warm =
        futures::future::try_join_all(sides.iter().map(|side| {
            Warm::start(client, kubeconfig, (*side, round), ("bench", suffix), &[], counted(*side, sides))
        }))
        .await?;
    let runs = creates_and_changes(&warm).await?;
    Ok((runs, warm))
}

/// [`BURST`] Greetings created (`create 1,000`), then each changed [`ROUNDS`] times, a round of
/// changes at a time (`burst 1,000 x 3`), on every side at once; the scenarios' names end in
/// each side's suffix. Every side starts each scenario together and runs it at its own pace.
async fn creates_and_changes(warm: &[Warm]) -> anyhow::Result<Vec<Run>> {
    let created = futures::future::try_join_all(warm.iter().map(|w| async move {
        let phase = w.phase().await?;
        load::create(&w.api, &w.tracker, 0..BURST, "v0").await?;
        let settled = w.tracker.settle(SETTLE).await?;
        phase.end(w.side, &format!("create 1,000{}", w.suffix), w.round, BURST, settled).await
    }))
    .await?;
    let changed = futures::future::try_join_all(warm.iter().map(|w| async move {
        let phase = w.phase().await?;
        let mut latencies = Latencies::default();
        for r in 1..=ROUNDS {
            load::change_all(&w.api, &w.tracker, BURST, &format!("v{r}")).await?;
            latencies.extend(w.tracker.settle(SETTLE).await?);
        }
        let scenario = format!("burst 1,000 x 3{}", w.suffix);
        phase.end(w.side, &scenario, w.round, BURST * ROUNDS, latencies).await
    }))
    .await?;
    Ok(created.into_iter().chain(changed).collect())
}

/// `finalizer` for `sides` at once: [`burst`]'s creates and changes, every side holding a
/// finalizer.
pub async fn finalizer(client: &Client, kubeconfig: &Path, sides: &[Side], round: usize) -> anyhow::Result<Vec<Run>> {
    let warm = futures::future::try_join_all(sides.iter().map(|side| {
        let extra = match side {
            Side::Native | Side::NativeTwin => vec!["--finalizer".to_string()],
            _ => vec!["--plugin".to_string(), wasmop_tests::plugin("fixture-greeting-cleanup").display().to_string()],
        };
        async move {
            let counted = counted(*side, sides);
            Warm::start(client, kubeconfig, (*side, round), ("bench-fin", ", finalizer"), &extra, counted).await
        }
    }))
    .await?;
    let runs = creates_and_changes(&warm).await?;
    // Gone only once the controller removed its finalizer: the namespaces are left clean.
    futures::future::try_join_all(warm.iter().map(|w| load::delete_all(&w.api, SETTLE))).await?;
    for w in warm {
        w.stop().await?;
    }
    Ok(runs)
}

/// `paced` for every side in turn, each on its own Greetings, then stops the controllers.
pub async fn paced(warm: Vec<Warm>) -> anyhow::Result<Vec<Run>> {
    let runs = paced_in_turn(&warm).await?;
    for w in warm {
        w.stop().await?;
    }
    Ok(runs)
}

/// [`paced`], leaving the controllers running: one side after the other, in `warm`'s order
/// (which the bench alternates by round). A steady load is what this scenario measures: alone,
/// either side keeps up with 100 changes a second here (p99 0.1-0.9 s). Side by side, the two
/// loads and their statuses (about 400 writes a second) outran this 2-core control plane: the
/// load's own writes took up to 2.7 s, every controller's queue grew for the whole 20 s, and the
/// figures measured how each side's queue order (kube-rs's scheduler takes the waiting changes
/// in a hash set's order and folds those that wait long, wasmop's serves the oldest first) fares
/// in an overload.
pub async fn paced_in_turn(warm: &[Warm]) -> anyhow::Result<Vec<Run>> {
    let seconds = super::knobs::env_number("BENCH_PACED_SECONDS", 20) as u64;
    let mut runs = Vec::with_capacity(warm.len());
    for w in warm {
        let phase = w.phase().await?;
        let changes = load::paced(&w.api, &w.tracker, BURST, PACE, Duration::from_secs(seconds)).await?;
        let scenario = format!("paced 100/s{}", w.suffix);
        runs.push(phase.end(w.side, &scenario, w.round, changes, w.tracker.settle(SETTLE).await?).await?);
    }
    Ok(runs)
}

/// `burst-10k` and `startup` for `sides` at once, side by side.
pub async fn many(client: &Client, kubeconfig: &Path, sides: &[Side], round: usize) -> anyhow::Result<Vec<Run>> {
    let warm =
        futures::future::try_join_all(sides.iter().map(|side| {
            Warm::start(client, kubeconfig, (*side, round), ("bench-10k", ""), &[], counted(*side, sides))
        }))
        .await?;
    let created = futures::future::try_join_all(warm.iter().map(|w| async move {
        let phase = w.phase().await?;
        load::create(&w.api, &w.tracker, 0..MANY, "v0").await?;
        phase.end(w.side, "create 10,000", round, MANY, w.tracker.settle(SETTLE).await?).await
    }))
    .await?;
    let restarted = futures::future::try_join_all(warm.into_iter().map(|w| async move {
        let Warm { side, ns, api, tracker, controller, .. } = w;
        controller.stop().await?;
        // One object needs work when the next controller starts; 9,999 only need listing.
        let changed = Instant::now();
        load::change(&api, &tracker, &load::name(MANY / 2), "restarted").await?;
        let controller = Controller::start(side, &ns, kubeconfig, &[])?;
        let phase = Phase {
            controller: &controller,
            started: controller.started,
            cpu: 0.0,
            requests: Some(CacheRequests::default()).filter(|_| !side.native()),
            counted: None,
        };
        let latencies = tracker.settle(SETTLE).await?;
        // From the start of the process, not from the change.
        let seen = changed + latencies.to_status.first().copied().unwrap_or_default();
        let startup = seen.saturating_duration_since(controller.started);
        let latencies = Latencies { to_status: vec![startup], writes: latencies.writes };
        let run = phase.end(side, "start with 10,000", round, 1, latencies).await?;
        controller.stop().await?;
        anyhow::Ok(run)
    }))
    .await?;
    Ok(created.into_iter().chain(restarted).collect())
}
