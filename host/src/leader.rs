//! Leader election on a `coordination.k8s.io` Lease, as controller-runtime does it (lease
//! duration, renew deadline and retry period, 15 s / 10 s / 2 s by default), so that several
//! replicas can run and exactly one reconciles.
//!
//! - Every replica keeps its informers and compiled modules warm; only the leader's schedulers
//!   start runs ([`Fence::gate`]), so a takeover starts reconciling from warm caches.
//! - Fencing: the leader may write only until its last successful renewal plus the renew
//!   deadline; a renew deadline shorter than the lease duration means it stops before anyone
//!   else can take the lease. Every write of the host goes through [`Fence::write`], which
//!   refuses it once the fence is closed and abandons it when the answer has not come by the
//!   deadline, so no request of a fenced replica is still on its way. The host's clients do not
//!   retry by themselves ([`crate::informer::Clusters`]): a retry is a new run, which checks the
//!   fence again.
//! - The schedulers' gate ([`Fence::gate`]) closes at the deadline itself, not at the next retry.
//! - A lease counts as expired when its record (holder and renew time) has not changed for the
//!   record's own `leaseDurationSeconds` by this replica's own clock, as client-go does: clock
//!   skew between replicas does not matter, and during a rollout that changes
//!   `--lease-duration` a standby still waits as long as the leader promised to hold.
//! - Identities carry a random part ([`identity`]), as controller-runtime's do, so two live
//!   processes never share one (in the image every process is pid 1).
//! - On shutdown the leader releases the lease (no holder), so a standby takes it at its next
//!   retry instead of waiting for the lease to expire.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::fence::{Fence, Terms};
use crate::peers::ADDRESS_ANNOTATION;

/// Where and how to elect.
#[derive(Debug, Clone)]
pub struct LeaseSettings {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This replica's identity ([`identity`]: its pod name, or host name, and a random part).
    pub identity: String,
    /// How long a lease holds without renewal.
    pub lease_duration: Duration,
    /// How long the leader keeps writing after its last successful renewal.
    pub renew_deadline: Duration,
    /// How often to try to acquire or renew.
    pub retry_period: Duration,
    /// The board of the replicas' events addresses: the leader advertises its own in the Lease
    /// ([`crate::peers::ADDRESS_ANNOTATION`]), and every replica posts the leader it
    /// sees there. `None`: no events listener.
    pub peers: Option<crate::peers::Peers>,
}

/// A fresh identity for this process: `base` (the pod's name, or the host's) and a random
/// part, as controller-runtime makes them, so that two live processes never share one.
pub fn identity(base: &str) -> String {
    format!("{base}_{:016x}", fastrand::u64(..))
}

/// What to do with the lease as last observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// It is ours: renew it.
    Renew,
    /// Nobody holds it, or its holder stopped renewing: take it.
    Acquire,
    /// Someone else holds it.
    Wait,
}

/// The decision for the lease `record`, unchanged since `unchanged_since` (this replica's
/// clock), at `now`. Its holder is given the record's own `leaseDurationSeconds` (`fallback`
/// when it has none), not this replica's setting: a standby configured for less still waits as
/// long as the holder was promised.
pub fn decide(record: &LeaseSpec, me: &str, unchanged_since: Instant, now: Instant, fallback: Duration) -> Decision {
    let duration = record
        .lease_duration_seconds
        .and_then(|seconds| u64::try_from(seconds).ok())
        .map_or(fallback, Duration::from_secs);
    match record.holder_identity.as_deref() {
        Some(holder) if holder == me => Decision::Renew,
        None | Some("") => Decision::Acquire,
        Some(_) if now.duration_since(unchanged_since) >= duration => Decision::Acquire,
        Some(_) => Decision::Wait,
    }
}

/// The election's side of the fence: what it tells the writes, the schedulers and the metrics.
/// The shards' membership ([`crate::shards::membership`]) keeps its own.
pub(crate) struct Leadership {
    /// The Lease's name, for the logs.
    name: String,
    /// Told whether this replica holds its Lease, for the metrics.
    report: Box<dyn Fn(bool) + Send + Sync>,
    terms: Terms,
    leading: watch::Sender<bool>,
}

impl Leadership {
    /// The side of replica `identity` holding Lease `name`, telling `report` whether it holds it
    /// (the election's gauge, or the membership's: each its own).
    pub(crate) fn new(name: &str, identity: &str, report: impl Fn(bool) + Send + Sync + 'static) -> (Self, Fence) {
        let (terms, terms_rx) = Terms::new();
        let (leading, leading_rx) = watch::channel(false);
        let fence = Fence::elected(terms_rx, leading_rx, identity);
        (Self { name: name.to_string(), report: Box::new(report), terms, leading }, fence)
    }

    pub(crate) fn leading(&self) -> bool {
        *self.leading.borrow()
    }

    /// Renewed (or acquired) by a request sent before `until` minus the renew deadline: writes
    /// may go on until `until`, in the same term when the last one had not lapsed, in a new one
    /// otherwise. An answer that came after `until` opens nothing.
    pub(crate) fn renewed(&self, until: Instant) {
        if self.terms.renewed(until) {
            self.set_leading(true);
        }
    }

    /// Someone else holds the lease, or this replica stops: no more writes or runs.
    pub(crate) fn close(&self) {
        self.terms.close();
        self.set_leading(false);
    }

    fn set_leading(&self, leading: bool) {
        self.leading.send_replace(leading);
        (self.report)(leading);
    }

    /// Runs for the election's life: closes the gate at each deadline the fence reaches without
    /// a renewal, so the schedulers stop starting runs the moment writes would be refused, not
    /// at the next try.
    pub(crate) async fn close_at_deadlines(&self) {
        let mut until = self.terms.subscribe();
        loop {
            let deadline = until.borrow_and_update().map(|term| term.until);
            if let Some(deadline) = deadline {
                tokio::select! {
                    () = tokio::time::sleep_until(deadline) => {
                        if self.leading() && self.terms.until().is_some_and(|u| u <= Instant::now()) {
                            tracing::warn!(lease = self.name, "could not renew the lease in time: stopped writing");
                            self.set_leading(false);
                        }
                        if until.changed().await.is_err() { return; }
                    }
                    changed = until.changed() => if changed.is_err() { return; },
                }
            } else if until.changed().await.is_err() {
                return;
            }
        }
    }
}

/// Starts electing: returns the fence the host's schedulers and writes check, and the task,
/// which runs until `release` fires and then gives the lease up if it holds it.
pub fn elect(
    client: Client,
    settings: LeaseSettings,
    metrics: std::sync::Arc<crate::metrics::Metrics>,
    release: CancellationToken,
) -> (Fence, tokio::task::JoinHandle<()>) {
    let name = settings.name.clone();
    let (leadership, fence) =
        Leadership::new(&settings.name, &settings.identity, move |leading| metrics.leader(&name, leading));
    let task = tokio::spawn(async move {
        let api: Api<Lease> = Api::namespaced(client, &settings.namespace);
        // Whether the lease record names this replica, as far as it knows.
        let mut holds = false;
        let elect = async {
            let mut observed: Option<(Option<String>, Option<MicroTime>, Instant)> = None;
            loop {
                let started = Instant::now();
                let attempt = tokio::time::timeout(settings.renew_deadline, try_once(&api, &settings, &mut observed));
                match attempt.await {
                    Ok(Ok(true)) => {
                        if !leadership.leading() {
                            tracing::info!(lease = settings.name, identity = settings.identity, "became the leader");
                        }
                        holds = true;
                        leadership.renewed(started + settings.renew_deadline);
                    }
                    Ok(Ok(false)) => {
                        if holds {
                            tracing::warn!(lease = settings.name, "lost the lease to another replica");
                        }
                        holds = false;
                        leadership.close();
                    }
                    // Not renewed: the fence closes by itself at the renew deadline.
                    Ok(Err(err)) => tracing::warn!(lease = settings.name, %err, "cannot acquire or renew the lease"),
                    Err(_) => tracing::warn!(lease = settings.name, "acquiring or renewing the lease timed out"),
                }
                tokio::time::sleep_until(started + settings.retry_period).await;
            }
        };
        tokio::select! {
            () = elect => {}
            () = leadership.close_at_deadlines() => {}
            () = release.cancelled() => {}
        }
        leadership.close();
        if holds {
            match give_up(&api, &settings).await {
                Ok(()) => tracing::info!(lease = settings.name, "released the lease"),
                Err(err) => tracing::warn!(lease = settings.name, %err, "cannot release the lease"),
            }
        }
    });
    (fence, task)
}

pub(crate) fn now() -> MicroTime {
    MicroTime(Timestamp::now())
}

/// One try: creates, renews or takes over the lease; whether this replica holds it afterwards.
async fn try_once(
    api: &Api<Lease>,
    settings: &LeaseSettings,
    observed: &mut Option<(Option<String>, Option<MicroTime>, Instant)>,
) -> Result<bool, kube::Error> {
    let seconds = i32::try_from(settings.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
    let Some(mut lease) = api.get_opt(&settings.name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(settings.name.clone()),
                annotations: advertised(settings, None),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(settings.identity.clone()),
                lease_duration_seconds: Some(seconds),
                acquire_time: Some(now()),
                renew_time: Some(now()),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        let created = match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(err) => Err(err),
        };
        saw(settings, created.as_ref().ok().copied());
        return created;
    };
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    let record = (spec.holder_identity.clone(), spec.renew_time.clone());
    let since = match observed.take() {
        Some((holder, renewed, at)) if (holder.clone(), renewed.clone()) == record => at,
        _ => Instant::now(),
    };
    *observed = Some((record.0, record.1, since));
    let decision = decide(spec, &settings.identity, since, Instant::now(), settings.lease_duration);
    match decision {
        Decision::Wait => {
            if let Some(peers) = &settings.peers {
                let address = lease.metadata.annotations.as_ref().and_then(|a| a.get(ADDRESS_ANNOTATION));
                peers.saw_leader(spec.holder_identity.as_deref(), address.map(String::as_str));
            }
            return Ok(false);
        }
        Decision::Renew => spec.renew_time = Some(now()),
        Decision::Acquire => {
            spec.holder_identity = Some(settings.identity.clone());
            spec.acquire_time = Some(now());
            spec.renew_time = Some(now());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
    }
    spec.lease_duration_seconds = Some(seconds);
    lease.metadata.annotations = advertised(settings, lease.metadata.annotations.take());
    // The resourceVersion read makes this a compare-and-swap: a concurrent writer wins.
    let replaced = match api.replace(&settings.name, &PostParams::default(), &lease).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(err) => Err(err),
    };
    saw(settings, replaced.as_ref().ok().copied());
    replaced
}

/// `annotations` with this replica's events address (when it advertises one), as the leader
/// writes them.
fn advertised(
    settings: &LeaseSettings,
    annotations: Option<BTreeMap<String, String>>,
) -> Option<BTreeMap<String, String>> {
    let address = settings.peers.as_ref().and_then(|peers| peers.address());
    match (address, annotations) {
        (Some(address), annotations) => {
            let mut annotations = annotations.unwrap_or_default();
            annotations.insert(ADDRESS_ANNOTATION.to_string(), address.to_string());
            Some(annotations)
        }
        (None, Some(mut annotations)) => {
            annotations.remove(ADDRESS_ANNOTATION);
            Some(annotations)
        }
        (None, None) => None,
    }
}

/// After a write of the Lease: this replica leads when it `won`; when it lost the race, the
/// leader is not known until the next look. `None`: the write failed, nothing is learnt.
fn saw(settings: &LeaseSettings, won: Option<bool>) {
    let Some(peers) = &settings.peers else { return };
    match won {
        Some(true) => peers.saw_leader(Some(&settings.identity), peers.address()),
        Some(false) => peers.saw_leader(None, None),
        None => {}
    }
}

/// Gives the lease up: no holder, so a standby takes it at its next retry.
async fn give_up(api: &Api<Lease>, settings: &LeaseSettings) -> Result<(), kube::Error> {
    let mut lease = api.get(&settings.name).await?;
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    if spec.holder_identity.as_deref() != Some(settings.identity.as_str()) {
        return Ok(());
    }
    spec.holder_identity = None;
    spec.renew_time = Some(now());
    api.replace(&settings.name, &PostParams::default(), &lease).await.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fence::{REQUEST_TIMEOUT, Unanswered};

    fn record(holder: Option<&str>, seconds: Option<i32>) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_string),
            lease_duration_seconds: seconds,
            ..LeaseSpec::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_is_taken_once_free_or_unchanged_for_a_lease_duration() {
        let lease = Duration::from_secs(15);
        let seen = Instant::now();
        let other = record(Some("other"), Some(15));
        assert_eq!(decide(&record(Some("me"), Some(15)), "me", seen, seen, lease), Decision::Renew);
        assert_eq!(decide(&record(None, None), "me", seen, seen, lease), Decision::Acquire);
        assert_eq!(decide(&record(Some(""), None), "me", seen, seen, lease), Decision::Acquire);
        assert_eq!(decide(&other, "me", seen, seen + Duration::from_secs(14), lease), Decision::Wait);
        assert_eq!(decide(&other, "me", seen, seen + lease, lease), Decision::Acquire);
    }

    #[tokio::test(start_paused = true)]
    async fn expiry_follows_the_records_duration_not_the_readers() {
        let mine = Duration::from_secs(15);
        let seen = Instant::now();
        let long = record(Some("other"), Some(40));
        assert_eq!(decide(&long, "me", seen, seen + Duration::from_secs(39), mine), Decision::Wait);
        assert_eq!(decide(&long, "me", seen, seen + Duration::from_secs(40), mine), Decision::Acquire);
        let short = record(Some("other"), Some(5));
        assert_eq!(decide(&short, "me", seen, seen + Duration::from_secs(5), mine), Decision::Acquire);
        let unsaid = record(Some("other"), None);
        assert_eq!(decide(&unsaid, "me", seen, seen + Duration::from_secs(14), mine), Decision::Wait);
    }

    #[test]
    fn identities_of_the_same_pod_differ() {
        let (a, b) = (identity("wasmop-0"), identity("wasmop-0"));
        assert!(a.starts_with("wasmop-0_") && b.starts_with("wasmop-0_"), "{a} {b}");
        assert_ne!(a, b);
    }

    fn leadership() -> (Leadership, Fence) {
        let metrics = crate::metrics::Metrics::new();
        Leadership::new("test", "me", move |leading| metrics.leader("test", leading))
    }

    #[tokio::test(start_paused = true)]
    async fn writes_are_refused_once_the_fence_closes() {
        let (leadership, fence) = leadership();
        assert_eq!(fence.write(async { 1 }).await, Err(Unanswered::Fenced), "never led");
        leadership.renewed(Instant::now() + Duration::from_secs(10));
        assert_eq!(fence.write(async { 1 }).await, Ok(1));
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(fence.write(async { 1 }).await, Err(Unanswered::Fenced), "not renewed by the deadline");
        leadership.close();
        assert_eq!(fence.write(async { 1 }).await, Err(Unanswered::Fenced));
        assert_eq!(Fence::unfenced().write(async { 1 }).await, Ok(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_unanswered_for_the_request_timeout_is_abandoned_fenced_or_not() {
        let started = Instant::now();
        let stalled = Fence::unfenced().write(std::future::pending::<()>()).await;
        assert_eq!((stalled, started.elapsed()), (Err(Unanswered::TimedOut), REQUEST_TIMEOUT));
        let (leadership, fence) = leadership();
        leadership.renewed(Instant::now() + REQUEST_TIMEOUT * 2);
        let started = Instant::now();
        let stalled = fence.write(std::future::pending::<()>()).await;
        assert_eq!((stalled, started.elapsed()), (Err(Unanswered::TimedOut), REQUEST_TIMEOUT));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_in_flight_when_the_fence_closes_is_abandoned_at_once() {
        let (leadership, fence) = leadership();
        leadership.renewed(Instant::now() + Duration::from_secs(10));
        let started = Instant::now();
        let close = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            leadership.close();
            std::future::pending::<()>().await
        };
        tokio::select! {
            written = fence.write(std::future::pending::<()>()) => assert_eq!(written, Err(Unanswered::Fenced)),
            () = close => unreachable!(),
        }
        assert_eq!(started.elapsed(), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn the_gate_closes_at_the_deadline_not_at_the_next_try() {
        let (leadership, fence) = leadership();
        let gate = fence.gate().unwrap();
        let started = Instant::now();
        leadership.renewed(started + Duration::from_secs(2));
        assert!(gate.is_open());
        let mut leading = leadership.leading.subscribe();
        tokio::select! {
            () = leadership.close_at_deadlines() => unreachable!("runs while the election does"),
            closed = leading.wait_for(|open| !open) => { closed.unwrap(); }
        }
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        // A renewal before the deadline moves it.
        leadership.renewed(Instant::now() + Duration::from_secs(2));
        let renew = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            leadership.renewed(Instant::now() + Duration::from_secs(2));
            std::future::pending::<()>().await
        };
        let mut leading = leadership.leading.subscribe();
        let at = Instant::now();
        tokio::select! {
            () = leadership.close_at_deadlines() => unreachable!(),
            () = renew => unreachable!(),
            closed = leading.wait_for(|open| !open) => { closed.unwrap(); }
        }
        assert_eq!(at.elapsed(), Duration::from_secs(3));
    }
}
