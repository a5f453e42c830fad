//! Leader election on a `coordination.k8s.io` Lease, as controller-runtime does it (lease
//! duration, renew deadline and retry period, 15 s / 10 s / 2 s by default), so that several
//! replicas can run and exactly one reconciles.
//!
//! - Every replica keeps its informers and compiled modules warm; only the leader's schedulers
//!   start runs ([`Fence::gate`]), so a takeover starts reconciling from warm caches.
//! - Fencing: the leader may write only until its last successful renewal plus the renew
//!   deadline ([`Fence::may_write`]); a renew deadline shorter than the lease duration means it
//!   stops before anyone else can take the lease. Every write of the host checks the fence.
//! - A lease counts as expired when its record (holder and renew time) has not changed for a
//!   lease duration by this replica's own clock, as client-go does, so clock skew between
//!   replicas does not matter.
//! - On shutdown the leader releases the lease (no holder), so a standby takes it at its next
//!   retry instead of waiting for the lease to expire.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Where and how to elect.
#[derive(Debug, Clone)]
pub struct LeaseSettings {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This replica's identity (its pod name, or host name and process id).
    pub identity: String,
    /// How long a lease holds without renewal.
    pub lease_duration: Duration,
    /// How long the leader keeps writing after its last successful renewal.
    pub renew_deadline: Duration,
    /// How often to try to acquire or renew.
    pub retry_period: Duration,
}

/// Whether this replica may reconcile and write now; cheap to clone.
#[derive(Debug, Clone)]
pub struct Fence {
    /// `Some(until)` while leading: writes are allowed until then. `None` for a host without
    /// leader election.
    until: Option<watch::Receiver<Option<Instant>>>,
    leading: Option<watch::Receiver<bool>>,
}

impl Fence {
    /// No leader election: always allowed.
    pub fn unfenced() -> Self {
        Self { until: None, leading: None }
    }

    /// Whether a write may be sent now.
    pub fn may_write(&self) -> bool {
        match &self.until {
            None => true,
            Some(until) => until.borrow().is_some_and(|until| Instant::now() < until),
        }
    }

    /// Open while this replica leads: schedulers start runs only then. `None` without leader
    /// election.
    pub fn gate(&self) -> Option<watch::Receiver<bool>> {
        self.leading.clone()
    }
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

/// The decision for a lease held by `holder`, whose record has not changed since `unchanged_since`
/// (this replica's clock), at `now`.
pub fn decide(
    holder: Option<&str>,
    me: &str,
    unchanged_since: Instant,
    now: Instant,
    lease_duration: Duration,
) -> Decision {
    match holder {
        Some(holder) if holder == me => Decision::Renew,
        None | Some("") => Decision::Acquire,
        Some(_) if now.duration_since(unchanged_since) >= lease_duration => Decision::Acquire,
        Some(_) => Decision::Wait,
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
    let (until_tx, until_rx) = watch::channel(None);
    let (leading_tx, leading_rx) = watch::channel(false);
    let fence = Fence { until: Some(until_rx), leading: Some(leading_rx) };
    let task = tokio::spawn(async move {
        let api: Api<Lease> = Api::namespaced(client, &settings.namespace);
        let mut observed: Option<(Option<String>, Option<MicroTime>, Instant)> = None;
        let mut leading = false;
        loop {
            let started = Instant::now();
            let attempt = tokio::time::timeout(settings.renew_deadline, try_once(&api, &settings, &mut observed));
            let held = match attempt.await {
                Ok(Ok(held)) => Some(held),
                Ok(Err(err)) => {
                    tracing::warn!(lease = settings.name, %err, "cannot acquire or renew the lease");
                    None
                }
                Err(_) => {
                    tracing::warn!(lease = settings.name, "acquiring or renewing the lease timed out");
                    None
                }
            };
            match held {
                Some(true) => {
                    until_tx.send_replace(Some(started + settings.renew_deadline));
                    if !leading {
                        tracing::info!(lease = settings.name, identity = settings.identity, "became the leader");
                    }
                    leading = true;
                }
                Some(false) => {
                    if leading {
                        tracing::warn!(lease = settings.name, "lost the lease to another replica");
                    }
                    until_tx.send_replace(None);
                    leading = false;
                }
                // Not renewed: the fence closes by itself at the renew deadline.
                None => {
                    let expired = until_tx.borrow().is_none_or(|until| Instant::now() >= until);
                    if leading && expired {
                        tracing::warn!(lease = settings.name, "could not renew the lease in time: stopped writing");
                        leading = false;
                    }
                }
            }
            leading_tx.send_replace(leading);
            metrics.leader(&settings.name, leading);
            tokio::select! {
                _ = tokio::time::sleep(settings.retry_period) => {}
                _ = release.cancelled() => break,
            }
        }
        until_tx.send_replace(None);
        leading_tx.send_replace(false);
        metrics.leader(&settings.name, false);
        if leading {
            match give_up(&api, &settings).await {
                Ok(()) => tracing::info!(lease = settings.name, "released the lease"),
                Err(err) => tracing::warn!(lease = settings.name, %err, "cannot release the lease"),
            }
        }
    });
    (fence, task)
}

fn now() -> MicroTime {
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
            metadata: ObjectMeta { name: Some(settings.name.clone()), ..ObjectMeta::default() },
            spec: Some(LeaseSpec {
                holder_identity: Some(settings.identity.clone()),
                lease_duration_seconds: Some(seconds),
                acquire_time: Some(now()),
                renew_time: Some(now()),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(err) => Err(err),
        };
    };
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    let record = (spec.holder_identity.clone(), spec.renew_time.clone());
    let since = match observed.take() {
        Some((holder, renewed, at)) if (holder.clone(), renewed.clone()) == record => at,
        _ => Instant::now(),
    };
    *observed = Some((record.0, record.1, since));
    let decision =
        decide(spec.holder_identity.as_deref(), &settings.identity, since, Instant::now(), settings.lease_duration);
    match decision {
        Decision::Wait => return Ok(false),
        Decision::Renew => spec.renew_time = Some(now()),
        Decision::Acquire => {
            spec.holder_identity = Some(settings.identity.clone());
            spec.acquire_time = Some(now());
            spec.renew_time = Some(now());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
    }
    spec.lease_duration_seconds = Some(seconds);
    // The resourceVersion read makes this a compare-and-swap: a concurrent writer wins.
    match api.replace(&settings.name, &PostParams::default(), &lease).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(err) => Err(err),
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

    #[tokio::test(start_paused = true)]
    async fn a_lease_is_taken_once_free_or_unchanged_for_a_lease_duration() {
        let lease = Duration::from_secs(15);
        let seen = Instant::now();
        assert_eq!(decide(Some("me"), "me", seen, seen, lease), Decision::Renew);
        assert_eq!(decide(None, "me", seen, seen, lease), Decision::Acquire);
        assert_eq!(decide(Some(""), "me", seen, seen, lease), Decision::Acquire);
        assert_eq!(decide(Some("other"), "me", seen, seen + Duration::from_secs(14), lease), Decision::Wait);
        assert_eq!(decide(Some("other"), "me", seen, seen + lease, lease), Decision::Acquire);
    }

    #[tokio::test(start_paused = true)]
    async fn the_fence_closes_at_the_renew_deadline() {
        let (tx, rx) = watch::channel(Some(Instant::now() + Duration::from_secs(10)));
        let fence = Fence { until: Some(rx), leading: None };
        assert!(fence.may_write());
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(!fence.may_write(), "not renewed by the deadline: no more writes");
        tx.send_replace(None);
        assert!(!fence.may_write());
        assert!(Fence::unfenced().may_write());
    }
}
