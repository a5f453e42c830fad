//! The end-to-end parts: the greeting plugin in the wasmop host against `wasmop-native` (the
//! same reconcile as a kube-rs `Controller`), each its own process in a namespace of its own,
//! alternating, on one control plane, each with the same number of runtime worker threads
//! ([`super::threads`]). Every figure is the controller process's own: its peak memory, anonymous
//! first, then PSS and RSS ([`super::process`]), its CPU seconds (`/proc/<pid>/stat`), and the
//! change-to-status latency from the write's start until the load generator's watch shows the
//! status for it.
//!
//! - `burst`: 1,000 Greetings created (`create 1,000`), then each changed 3 times, a round of
//!   1,000 changes at a time (`burst 1,000 x 3`);
//! - `paced`: then 100 changes a second for `BENCH_PACED_SECONDS` (default 20), round robin,
//!   every side's controller at once (side by side), each on its own Greetings;
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

use super::apiserver;
use super::load::{self, Latencies, Tracker};
use super::process::{CacheRequests, Controller, Side};
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
    /// The API server, when this controller works alone in the phase, and its write count.
    alone: Option<(Client, f64)>,
}

impl<'a> Phase<'a> {
    /// A phase of `controller`; `alone` is the API server's client when no other controller
    /// works meanwhile, so that its writes can be counted.
    async fn begin(controller: &'a Controller, alone: Option<&Client>) -> anyhow::Result<Self> {
        let alone = match alone {
            Some(client) => Some((client.clone(), apiserver::writes(client).await?)),
            None => None,
        };
        let (started, cpu) = (Instant::now(), controller.cpu_seconds()?);
        // Waits for a host just started to serve its metrics, inside the phase's time.
        let requests = controller.cache_requests()?;
        Ok(Self { controller, started, cpu, requests, alone })
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
        let writes = match &self.alone {
            Some((client, before)) => Some(apiserver::writes(client).await? - before - changes as f64),
            None => None,
        };
        Ok(Run::new(
            side,
            scenario,
            round,
            changes,
            elapsed,
            latencies,
            self.controller.cpu_seconds()? - self.cpu,
            self.controller.peak_memory()?,
        )
        .with_cache_requests(requests)
        .with_api_writes(writes))
    }
}

/// Installs the Greeting CRD (idempotent).
pub async fn install(client: &Client) -> anyhow::Result<()> {
    let crd = wasmop_tests::workspace_root().join("plugins/greeting/crd.yaml");
    wasmop_tests::apply_file(client, &crd, None).await?;
    Ok(())
}

/// A controller that ran `burst`, kept for `paced`.
pub struct Warm {
    /// Ends the names of its scenarios.
    suffix: String,
    side: Side,
    round: usize,
    api: Api<DynamicObject>,
    tracker: Tracker,
    controller: Controller,
}

impl Warm {
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
}

/// `burst` for one side: a fresh namespace and controller, left running for [`paced`]; the
/// names of its scenarios (and [`paced`]'s) end in `suffix`.
pub async fn burst(
    client: &Client,
    kubeconfig: &Path,
    side: Side,
    round: usize,
    suffix: &str,
) -> anyhow::Result<(Vec<Run>, Warm)> {
    let ns = wasmop_tests::namespace(client, &format!("bench-{}", side.label().replace(' ', "-"))).await?;
    let api = load::greetings(client, &ns);
    let tracker = Tracker::start(&api).await?;
    let controller = Controller::start(side, &ns, kubeconfig, &[])?;
    let runs = creates_and_changes(&api, &tracker, &controller, (side, round), suffix).await?;
    Ok((runs, Warm { suffix: suffix.into(), side, round, api, tracker, controller }))
}

/// [`BURST`] Greetings created (`create 1,000`), then each changed [`ROUNDS`] times, a round of
/// changes at a time (`burst 1,000 x 3`), the scenarios' names ending in `suffix`.
async fn creates_and_changes(
    api: &Api<DynamicObject>,
    tracker: &Tracker,
    controller: &Controller,
    (side, round): (Side, usize),
    suffix: &str,
) -> anyhow::Result<Vec<Run>> {
    // This controller works alone here: the others wait for the paced part.
    let client = api.clone().into_client();
    let phase = Phase::begin(controller, Some(&client)).await?;
    load::create(api, tracker, 0..BURST, "v0").await?;
    let settled = tracker.settle(SETTLE).await?;
    let created = phase.end(side, &format!("create 1,000{suffix}"), round, BURST, settled).await?;

    let phase = Phase::begin(controller, Some(&client)).await?;
    let mut latencies = Latencies::default();
    for r in 1..=ROUNDS {
        load::change_all(api, tracker, BURST, &format!("v{r}")).await?;
        latencies.extend(tracker.settle(SETTLE).await?);
    }
    let scenario = format!("burst 1,000 x 3{suffix}");
    let changed = phase.end(side, &scenario, round, BURST * ROUNDS, latencies).await?;
    Ok(vec![created, changed])
}

/// `finalizer` for one side: [`burst`]'s creates and changes, both sides holding a finalizer.
pub async fn finalizer(client: &Client, kubeconfig: &Path, side: Side, round: usize) -> anyhow::Result<Vec<Run>> {
    let ns = wasmop_tests::namespace(client, &format!("bench-fin-{}", side.label().replace(' ', "-"))).await?;
    let api = load::greetings(client, &ns);
    let tracker = Tracker::start(&api).await?;
    let extra = match side {
        Side::Native => vec!["--finalizer".to_string()],
        _ => vec!["--plugin".to_string(), wasmop_tests::plugin("fixture-greeting-cleanup").display().to_string()],
    };
    let controller = Controller::start(side, &ns, kubeconfig, &extra)?;
    let runs = creates_and_changes(&api, &tracker, &controller, (side, round), ", finalizer").await?;
    // Gone only once the controller removed its finalizer: the namespace is left clean.
    load::delete_all(&api, SETTLE).await?;
    controller.stop().await?;
    Ok(runs)
}

/// `paced` for every side at once, each on its own Greetings, then stops the controllers. Side by
/// side, a slow moment of the control plane (the API server's answers have their own tail) falls
/// on every side alike, instead of on whichever side ran then.
pub async fn paced(warm: Vec<Warm>) -> anyhow::Result<Vec<Run>> {
    let runs = paced_side_by_side(&warm).await?;
    for w in warm {
        w.stop().await?;
    }
    Ok(runs)
}

/// [`paced`], leaving the controllers running.
pub async fn paced_side_by_side(warm: &[Warm]) -> anyhow::Result<Vec<Run>> {
    let seconds = super::env_number("BENCH_PACED_SECONDS", 20) as u64;
    // Side by side: the API server's count cannot tell the controllers apart.
    let phases = futures::future::try_join_all(warm.iter().map(|w| Phase::begin(&w.controller, None))).await?;
    let loads = warm.iter().map(|w| load::paced(&w.api, &w.tracker, BURST, PACE, Duration::from_secs(seconds)));
    let changes = futures::future::try_join_all(loads).await?;
    let mut runs = Vec::new();
    for ((w, phase), changes) in warm.iter().zip(phases).zip(changes) {
        let scenario = format!("paced 100/s{}", w.suffix);
        runs.push(phase.end(w.side, &scenario, w.round, changes, w.tracker.settle(SETTLE).await?).await?);
    }
    Ok(runs)
}

/// `burst-10k` and `startup` for one side.
pub async fn many(client: &Client, kubeconfig: &Path, side: Side, round: usize) -> anyhow::Result<Vec<Run>> {
    let ns = wasmop_tests::namespace(client, &format!("bench-10k-{}", side.label().replace(' ', "-"))).await?;
    let api = load::greetings(client, &ns);
    let tracker = Tracker::start(&api).await?;
    let controller = Controller::start(side, &ns, kubeconfig, &[])?;
    let mut runs = Vec::new();
    let phase = Phase::begin(&controller, Some(client)).await?;
    load::create(&api, &tracker, 0..MANY, "v0").await?;
    runs.push(phase.end(side, "create 10,000", round, MANY, tracker.settle(SETTLE).await?).await?);
    controller.stop().await?;

    // One object needs work when the next controller starts; 9,999 only need listing.
    let changed = Instant::now();
    load::change(&api, &tracker, &load::name(MANY / 2), "restarted").await?;
    let controller = Controller::start(side, &ns, kubeconfig, &[])?;
    let phase = Phase {
        controller: &controller,
        started: controller.started,
        cpu: 0.0,
        requests: Some(CacheRequests::default()).filter(|_| side != Side::Native),
        alone: None,
    };
    let latencies = tracker.settle(SETTLE).await?;
    // From the start of the process, not from the change.
    let seen = changed + latencies.to_status.first().copied().unwrap_or_default();
    let startup = seen.saturating_duration_since(controller.started);
    let latencies = Latencies { to_status: vec![startup], writes: latencies.writes };
    runs.push(phase.end(side, "start with 10,000", round, 1, latencies).await?);
    controller.stop().await?;
    Ok(runs)
}
