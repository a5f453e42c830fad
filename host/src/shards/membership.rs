//! Membership of the shards: one `coordination.k8s.io` Lease per replica, in the election
//! namespace, labelled with the shard group.
//!
//! - Each replica renews its own Lease every retry period and may write only until its last
//!   renewal plus the renew deadline: the same fence as the leader's ([`crate::leader`]), so a
//!   replica that cannot renew stops writing before anyone counts it gone.
//! - A Lease is live while its record (holder and renew time) changed within its own
//!   `leaseDurationSeconds`, by this replica's clock (client-go's rule). The live holders are
//!   the members; they split the hash space ([`wasmop_core::shard::Assignment`]).
//! - Handover ([`wasmop_core::shard::Handover`]): on a new view a replica stops starting runs
//!   of objects it lost, waits for those in flight, then writes the view into its Lease
//!   (annotation [`VIEW_ANNOTATION`]): its acknowledgement. Once every member acknowledged the
//!   view, the view is settled and each runs all it owns; before that each runs only what it
//!   owned throughout. No object is run by two replicas at once.
//! - Leases are watched, so a change is seen within a round trip; expiries are timed. A watch
//!   can fall silent without an error (a cut connection; no read timeout), and then every
//!   other Lease would seem to expire: an expiry counts only once a list of the Leases started
//!   after it confirmed it (the Lease unchanged). Until then the member keeps its share.
//! - A replica whose own membership lapsed (its renewals failed past the renew deadline) may
//!   have missed the others' changes, acknowledgements among them: back, it lists the Leases
//!   anew and takes no share before that list.
//! - A replica adopts its first view once it has listed the Leases and half a second (at most a
//!   retry period) after its own Lease was written, so replicas started together see each
//!   other first instead of each listing and running every object as the only member.
//! - Each member writes how it runs each plugin into its Lease ([`DECLARATIONS_ANNOTATION`]:
//!   its shard key, or `none` for a plugin its leader runs whole). The declarations are part of
//!   the view the members acknowledge, and a plugin that another live member runs differently
//!   (during an upgrade from `uid` to `none`, or while an override rolls out) is disputed: no
//!   replica starts its runs until the declarations agree ([`super::Shards::agreed`]). A member
//!   of an older version declares nothing, and so disputes nothing.
//! - On shutdown (after the controllers stopped) a replica deletes its Lease: the others take
//!   its objects at once instead of after the lease duration. Leases expired for two lease
//!   durations are deleted by whoever sees them, so dead replicas leave nothing behind.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams, Preconditions, ResourceExt};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use wasmop_core::shard::{Assignment, Declarations, Handover, Ranges};

use super::share::{Publisher, Shards, Share};
use crate::fence::Fence;
use crate::leader::Leadership;
use crate::metrics::Metrics;
use crate::peers::ADDRESS_ANNOTATION;

/// The label that marks the Leases of one shard group.
pub const GROUP_LABEL: &str = "wasmop.dev/shard-group";

/// The annotation in which a member acknowledges the view it adopted and drained for.
pub const VIEW_ANNOTATION: &str = "wasmop.dev/shard-view";

/// The annotation in which a member declares how it runs each plugin (JSON: plugin name to
/// shard key, or `none`).
pub const DECLARATIONS_ANNOTATION: &str = "wasmop.dev/shard-plugins";

/// How long a replica that joined waits (besides listing the Leases) before it adopts its first
/// view.
const FIRST_VIEW_GRACE: Duration = Duration::from_millis(500);

/// Where and how replicas meet.
#[derive(Debug, Clone)]
pub struct MembershipSettings {
    /// The Leases' namespace (the election namespace).
    pub namespace: String,
    /// The shard group: the Leases' label value and name prefix.
    pub group: String,
    /// This replica's identity ([`crate::leader::identity`]).
    pub identity: String,
    /// How long a Lease holds without renewal.
    pub lease_duration: Duration,
    /// How long a replica keeps writing after its last successful renewal.
    pub renew_deadline: Duration,
    /// How often each replica renews.
    pub retry_period: Duration,
    /// The board of the replicas' events addresses: this replica advertises its own in its
    /// Lease ([`crate::peers::ADDRESS_ANNOTATION`]) and posts the members of each view
    /// with theirs. `None`: no events listener.
    pub peers: Option<crate::peers::Peers>,
}

/// Another member's Lease, as last observed.
#[derive(Debug)]
struct Observed {
    holder: Option<String>,
    renewed: Option<MicroTime>,
    duration: Duration,
    ack: Option<String>,
    /// Where the member takes inbound events.
    address: Option<String>,
    /// How the member runs each plugin; empty for a member that declares nothing.
    declared: Declarations,
    resource_version: Option<String>,
    /// When this replica saw the record (holder, renew time) change.
    changed_at: Instant,
}

impl Observed {
    fn expiry(&self) -> Instant {
        self.changed_at + self.duration
    }

    /// Whether the Lease names a holder.
    fn held(&self) -> bool {
        self.holder.as_deref().is_some_and(|h| !h.is_empty())
    }

    fn live(&self, now: Instant) -> bool {
        self.held() && now < self.expiry()
    }
}

/// Starts this replica's membership: returns its shard state, the fence its sharded
/// controllers write through, and the task, which runs until `release` fires and then deletes
/// the replica's Lease.
pub fn join(
    client: Client,
    settings: MembershipSettings,
    metrics: Arc<Metrics>,
    release: CancellationToken,
) -> (Shards, Fence, tokio::task::JoinHandle<()>) {
    let name = format!("{}-{:016x}", settings.group, fastrand::u64(..));
    let member = metrics.clone();
    let (leadership, fence) = Leadership::new(&name, &settings.identity, move |held| member.shards().member(held));
    let (share, shards) = Shards::new(Some(metrics.clone()));
    let api: Api<Lease> = Api::namespaced(client, &settings.namespace);
    let gate = fence.gate().expect("a membership's fence has a gate");
    let member = Member {
        api,
        name,
        settings,
        metrics,
        leadership: Arc::new(leadership),
        gate,
        share,
        shards: shards.clone(),
        lease: None,
        acked: None,
        observed: HashMap::new(),
        view: None,
        declared: shards.declarations(),
        handover: Handover::new(),
        first: true,
        assigned: false,
        listing: None,
        listed_at: None,
        relist: false,
        joined: None,
    };
    let task = tokio::spawn(member.run(release));
    (shards, fence, task)
}

/// The membership's state.
struct Member {
    api: Api<Lease>,
    /// This replica's Lease's name.
    name: String,
    settings: MembershipSettings,
    metrics: Arc<Metrics>,
    leadership: Arc<Leadership>,
    /// Open while this replica's own Lease is renewed in time.
    gate: crate::fence::Gate,
    share: Publisher,
    shards: Shards,
    /// This replica's Lease as last written.
    lease: Option<Lease>,
    /// The view this replica acknowledged in its Lease.
    acked: Option<String>,
    /// The other members' Leases, by name.
    observed: HashMap<String, Observed>,
    /// The current view (its assignment and the view with every member's declarations), and
    /// when the membership changed to it.
    view: Option<(Assignment, String, Instant)>,
    /// How this replica runs each plugin.
    declared: tokio::sync::watch::Receiver<Declarations>,
    handover: Handover,
    /// No view adopted yet.
    first: bool,
    /// A view has settled since this replica joined.
    assigned: bool,
    /// A list of the Leases in progress: when it started, and the names it showed so far.
    listing: Option<(Instant, HashSet<String>)>,
    /// When the last complete list of the Leases started; `None` before the first, and again
    /// after this replica's membership lapsed, until it listed them anew.
    listed_at: Option<Instant>,
    /// Start the Lease watch over (and so list the Leases) at the end of this turn.
    relist: bool,
    /// When this replica first renewed its Lease.
    joined: Option<Instant>,
}

impl Member {
    async fn run(mut self, release: CancellationToken) {
        // The deadlines are watched beside the loop, not as one of its branches: the loop waits
        // on its own renewals, and one that hangs must not keep the gate open past the deadline.
        let leadership = self.leadership.clone();
        tokio::select! {
            () = self.serve(&release) => {}
            () = leadership.close_at_deadlines() => {}
        }
        self.leave().await;
    }

    /// Watches the Leases, renews this replica's, and decides the view, until `release` fires.
    async fn serve(&mut self, release: &CancellationToken) {
        let mut leases = self.watch_leases();
        let mut next_renew = Instant::now();
        let mut gate = self.gate.clone();
        let mut declared = self.declared.clone();
        loop {
            let expiry = self.next_expiry();
            let pending = self.pending_ack();
            let shards = self.shards.clone();
            tokio::select! {
                biased;
                () = release.cancelled() => break,
                // Fenced or back: the view changes.
                changed = gate.changed() => if changed.is_err() { break },
                // A plugin started, stopped or changed its sharding: the others are told now.
                changed = declared.changed() => {
                    if changed.is_err() { break }
                    self.write().await;
                }
                event = leases.next() => match event {
                    Some(Ok(event)) => self.observe(event),
                    Some(Err(err)) => tracing::warn!(%err, "watching the shards' leases failed; retrying"),
                    None => break,
                },
                () = tokio::time::sleep_until(next_renew) => {
                    let started = Instant::now();
                    self.write().await;
                    next_renew = started + self.settings.retry_period;
                }
                () = sleep_until(expiry) => {}
                // The runs of what this replica lost have finished: acknowledge the view.
                view = async move {
                    let (view, owned) = pending.expect("guarded by the branch condition");
                    shards.drained(&owned).await;
                    view
                }, if pending.is_some() => {
                    self.acked = Some(view);
                    self.write().await;
                }
            }
            self.decide();
            self.post_members();
            if std::mem::take(&mut self.relist) {
                self.listing = Some((Instant::now(), HashSet::new()));
                leases = self.watch_leases();
            }
        }
    }

    /// A watch of the group's Leases, which starts with a list of them.
    fn watch_leases(&self) -> BoxStream<'static, Result<watcher::Event<Lease>, watcher::Error>> {
        let selector = format!("{GROUP_LABEL}={}", self.settings.group);
        // A consistent list: it confirms expiries, so it must not come from a lagging cache.
        let config = watcher::Config::default().labels(&selector).list_semantic(watcher::ListSemantic::MostRecent);
        watcher(self.api.clone(), config).backoff(crate::informer::watch_backoff()).boxed()
    }

    /// The view adopted but not yet acknowledged, and what this replica owns in it.
    fn pending_ack(&self) -> Option<(String, Ranges)> {
        let (_, view, _) = self.view.as_ref()?;
        (self.acked.as_deref() != Some(view.as_str())).then(|| (view.clone(), self.handover.owned().clone()))
    }

    /// The next moment a live Lease expires, or one expired long enough to be deleted.
    fn next_expiry(&self) -> Option<Instant> {
        let now = Instant::now();
        let first = self.first_view_at().filter(|at| *at > now);
        self.observed
            .values()
            .map(|o| if o.live(now) { o.expiry() } else { o.expiry() + o.duration })
            .filter(|at| *at > now)
            .chain(first)
            .min()
    }

    /// When this replica may adopt its first view: [`FIRST_VIEW_GRACE`] (at most a retry
    /// period) after it joined, so that replicas started together see each other before any
    /// of them lists and runs all the objects as the only member. `None` before it joined.
    fn first_view_at(&self) -> Option<Instant> {
        self.joined.map(|joined| joined + FIRST_VIEW_GRACE.min(self.settings.retry_period))
    }

    /// Takes in a Lease event.
    fn observe(&mut self, event: watcher::Event<Lease>) {
        match event {
            watcher::Event::Init => self.listing = Some((Instant::now(), HashSet::new())),
            watcher::Event::InitApply(lease) => {
                if let Some((_, listing)) = &mut self.listing {
                    listing.insert(lease.name_any());
                }
                self.apply(&lease);
            }
            watcher::Event::InitDone => {
                // Leases gone while the watch was down are gone.
                if let Some((started, listed)) = self.listing.take() {
                    self.observed.retain(|name, _| listed.contains(name));
                    self.listed_at = Some(started);
                }
            }
            watcher::Event::Apply(lease) => self.apply(&lease),
            watcher::Event::Delete(lease) => {
                self.observed.remove(&lease.name_any());
            }
        }
    }

    fn apply(&mut self, lease: &Lease) {
        let name = lease.name_any();
        if name == self.name {
            return;
        }
        let spec = lease.spec.clone().unwrap_or_default();
        let duration = spec
            .lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map_or(self.settings.lease_duration, Duration::from_secs);
        let ack = lease.annotations().get(VIEW_ANNOTATION).cloned();
        let address = lease.annotations().get(ADDRESS_ANNOTATION).cloned();
        let declared = lease
            .annotations()
            .get(DECLARATIONS_ANNOTATION)
            .and_then(|json| serde_json::from_str(json).ok())
            .unwrap_or_default();
        let changed_at = match self.observed.get(&name) {
            Some(o) if o.holder == spec.holder_identity && o.renewed == spec.renew_time => o.changed_at,
            _ => Instant::now(),
        };
        let observed = Observed {
            holder: spec.holder_identity,
            renewed: spec.renew_time,
            duration,
            ack,
            address,
            declared,
            resource_version: lease.resource_version(),
            changed_at,
        };
        self.observed.insert(name, observed);
    }

    /// Renews this replica's Lease with its acknowledgement, creating it if it is missing.
    async fn write(&mut self) {
        let started = Instant::now();
        let attempt = tokio::time::timeout(self.settings.renew_deadline, self.try_write()).await;
        match attempt {
            Ok(Ok(lease)) => {
                self.lease = Some(lease);
                // Lapsed by the clock, not only by the flag a timer clears: a process continued
                // after a stop renews before that timer ran.
                if !self.gate.is_open() {
                    tracing::info!(lease = self.name, identity = self.settings.identity, "joined the shards");
                    if self.joined.is_some() {
                        // Back after a lapse: what this replica observed of the others while it
                        // could not renew (their records, their acknowledgements) may be stale,
                        // its Lease watch cut with the rest. It takes a share again only once
                        // it listed them anew, and gives up the old one before the new term
                        // opens, so no run of the old view starts under it.
                        self.listed_at = None;
                        self.relist = true;
                        self.decide();
                    }
                }
                self.joined.get_or_insert(started);
                self.leadership.renewed(started + self.settings.renew_deadline);
            }
            Ok(Err(err)) => tracing::warn!(lease = self.name, %err, "cannot renew the shard membership lease"),
            Err(_) => tracing::warn!(lease = self.name, "renewing the shard membership lease timed out"),
        }
    }

    /// Writes the Lease from the one last written; when that is stale (changed by someone else,
    /// deleted by a replica that counted it expired, or written by a request whose answer was
    /// lost), once more from the Lease as it is now.
    async fn try_write(&self) -> Result<Lease, kube::Error> {
        match self.send(self.lease.clone()).await {
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
                let current = self.api.get_opt(&self.name).await?;
                self.send(current).await
            }
            written => written,
        }
    }

    /// Renews `base` (a new Lease when `None`) with this replica's record and acknowledgement.
    async fn send(&self, base: Option<Lease>) -> Result<Lease, kube::Error> {
        let seconds = i32::try_from(self.settings.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
        let mut lease = base.unwrap_or_else(|| Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                labels: Some(BTreeMap::from([(GROUP_LABEL.to_string(), self.settings.group.clone())])),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec { acquire_time: Some(crate::leader::now()), ..LeaseSpec::default() }),
        });
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = Some(self.settings.identity.clone());
        spec.renew_time = Some(crate::leader::now());
        spec.lease_duration_seconds = Some(seconds);
        let annotations = lease.metadata.annotations.get_or_insert_with(BTreeMap::new);
        match self.settings.peers.as_ref().and_then(|peers| peers.address()) {
            Some(address) => annotations.insert(ADDRESS_ANNOTATION.to_string(), address.to_string()),
            None => annotations.remove(ADDRESS_ANNOTATION),
        };
        match &self.acked {
            Some(view) => annotations.insert(VIEW_ANNOTATION.to_string(), view.clone()),
            None => annotations.remove(VIEW_ANNOTATION),
        };
        let declared = serde_json::to_string(&*self.declared.borrow()).expect("a map of strings");
        annotations.insert(DECLARATIONS_ANNOTATION.to_string(), declared);
        if lease.metadata.resource_version.is_some() {
            self.api.replace(&self.name, &PostParams::default(), &lease).await
        } else {
            self.api.create(&PostParams::default(), &lease).await
        }
    }

    /// Decides the view from the live Leases, adopts it if new, settles it once every member
    /// acknowledged it, and publishes this replica's share.
    fn decide(&mut self) {
        let now = Instant::now();
        if self.first && !(self.listed_at.is_some() && self.first_view_at().is_some_and(|at| now >= at)) {
            return;
        }
        self.confirm_expiries(now);
        let me = self.settings.identity.as_str();
        let member = self.leadership.leading() && self.listed_at.is_some();
        let counted: Vec<&Observed> = self.observed.values().filter(|o| self.counts(o, now)).collect();
        let mut members: Vec<&str> = counted.iter().filter_map(|o| o.holder.as_deref()).collect();
        if member {
            members.push(me);
        }
        let assignment = Assignment::new(members);
        let mine = self.declared.borrow().clone();
        let declared = counted.iter().filter_map(|o| Some((o.holder.as_deref()?, &o.declared)));
        let full = wasmop_core::shard::view(&assignment, declared.chain(member.then_some((me, &mine))));
        let disputed = wasmop_core::shard::disputed(&mine, counted.iter().map(|o| &o.declared));
        let changed = self
            .view
            .as_ref()
            .is_none_or(|(current, view, _)| current.members() != assignment.members() || *view != full);
        if changed {
            let owned = if member { assignment.ranges(me) } else { Ranges::default() };
            tracing::info!(
                members = assignment.members().len(),
                share = owned.share(),
                view = full,
                ?disputed,
                "shard membership changed"
            );
            self.metrics.shards().view(owned.share(), assignment.members().len(), !self.first);
            self.first = false;
            self.handover.adopt(owned);
            self.view = Some((assignment, full, now));
        }
        let (assignment, view, since) = self.view.as_ref().expect("set above");
        let view = view.clone();
        if member && !self.handover.settled() {
            let acked = |holder: &str| {
                holder == me && self.acked.as_deref() == Some(view.as_str())
                    || self.observed.values().any(|o| {
                        o.live(now) && o.holder.as_deref() == Some(holder) && o.ack.as_deref() == Some(view.as_str())
                    })
            };
            if assignment.members().iter().all(|m| acked(m)) {
                self.handover.settle();
                self.assigned = true;
                self.metrics.shards().settled(since.elapsed().as_secs_f64());
                tracing::info!(view, took = ?since.elapsed(), "every member stopped what it lost: running all owned");
            }
        }
        let share = Share {
            view,
            owned: self.handover.owned().clone(),
            runnable: self.handover.runnable().clone(),
            since: *since,
            assigned: self.assigned,
            disputed,
        };
        self.share.publish(share);
        self.collect(now);
    }

    /// Whether another member's Lease counts in the view: live, or expired by this replica's
    /// clock but not yet confirmed gone. A watch can fall silent without an error (a cut
    /// connection, no read timeout), and then every other Lease would seem to expire.
    fn counts(&self, o: &Observed, now: Instant) -> bool {
        o.live(now) || o.held() && !self.confirmed_gone(o)
    }

    /// Whether a list started after `o` expired showed it unchanged.
    fn confirmed_gone(&self, o: &Observed) -> bool {
        self.listed_at.is_some_and(|at| at >= o.expiry())
    }

    /// Lists the Leases anew when one expired since the last list and no list started since.
    fn confirm_expiries(&mut self, now: Instant) {
        let since = self.listing.as_ref().map(|(started, _)| *started).or(self.listed_at);
        let unconfirmed = self.observed.values().any(|o| {
            o.held() && o.expiry() <= now && !self.confirmed_gone(o) && since.is_none_or(|at| at < o.expiry())
        });
        if unconfirmed && !self.relist {
            tracing::info!("a shard member's lease expired by this replica's clock: listing the leases to confirm it");
            self.relist = true;
        }
    }

    /// Deletes the Leases that expired two lease durations ago and were confirmed gone (their
    /// replicas are gone).
    fn collect(&mut self, now: Instant) {
        let dead: Vec<(String, Option<String>)> = self
            .observed
            .iter()
            .filter(|(_, o)| now >= o.expiry() + o.duration && self.confirmed_gone(o))
            .map(|(name, o)| (name.clone(), o.resource_version.clone()))
            .collect();
        for (name, resource_version) in dead {
            self.observed.remove(&name);
            let api = self.api.clone();
            tokio::spawn(async move {
                let params = DeleteParams {
                    preconditions: Some(Preconditions { resource_version, uid: None }),
                    ..DeleteParams::default()
                };
                match api.delete(&name, &params).await {
                    Ok(_) => tracing::info!(lease = name, "deleted the lease of a shard member gone for good"),
                    Err(err) => tracing::debug!(lease = name, %err, "cannot delete an expired shard lease"),
                }
            });
        }
    }

    /// Posts the members of the current view, with their events addresses, on the peers' board.
    fn post_members(&self) {
        let (Some(peers), Some(view)) = (&self.settings.peers, &self.view) else { return };
        let now = Instant::now();
        let assignment = view.0.clone();
        let mut addresses: BTreeMap<String, String> = self
            .observed
            .values()
            .filter(|o| self.counts(o, now))
            .filter_map(|o| Some((o.holder.clone()?, o.address.clone()?)))
            .collect();
        if let Some(address) = peers.address() {
            addresses.insert(self.settings.identity.clone(), address.to_string());
        }
        let member = self.leadership.leading() && self.listed_at.is_some() && self.gate.is_open();
        peers.saw_members(crate::peers::Members { member, assignment, addresses });
    }

    /// Stops: nothing is owned any more, and the Lease is deleted, so the others take over at
    /// once.
    async fn leave(mut self) {
        self.leadership.close();
        self.handover.adopt(Ranges::default());
        self.share.leave();
        self.post_members();
        if self.lease.is_some() {
            match self.api.delete(&self.name, &DeleteParams::default()).await {
                Ok(_) => tracing::info!(lease = self.name, "left the shards"),
                Err(err) => tracing::warn!(lease = self.name, %err, "cannot delete the shard membership lease"),
            }
        }
    }
}

/// Sleeps until `at`, or forever.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::task::{Context, Poll};

    use bytes::Bytes;
    use futures::future::BoxFuture;
    use http::{Request, Response};
    use http_body_util::{BodyExt, Full};
    use tokio::sync::{mpsc, oneshot, watch};

    use super::*;

    /// A request to the API server, and the means to answer it (dropped: never answered).
    type Sent = (http::Method, String, Bytes, oneshot::Sender<Response<Full<Bytes>>>);

    /// An API server inside the test: every request goes to the test, which answers it when it
    /// likes, or never. No socket, so a test on paused time runs the same way every time.
    #[derive(Clone)]
    struct InTest(mpsc::UnboundedSender<Sent>);

    impl tower::Service<Request<kube::client::Body>> for InTest {
        type Response = Response<Full<Bytes>>;
        type Error = std::convert::Infallible;
        type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: Request<kube::client::Body>) -> Self::Future {
            let sent = self.0.clone();
            Box::pin(async move {
                let (head, body) = request.into_parts();
                let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                let (answer, answered) = oneshot::channel();
                let target = head.uri.path_and_query().map(ToString::to_string).unwrap_or_default();
                drop(sent.send((head.method, target, body, answer)));
                match answered.await {
                    Ok(response) => Ok(response),
                    Err(_) => std::future::pending().await,
                }
            })
        }
    }

    /// Replica "me"'s settings in group "g": client-go's lease duration, renew deadline and
    /// retry period.
    fn settings() -> MembershipSettings {
        MembershipSettings {
            namespace: "default".into(),
            group: "g".into(),
            identity: "me".into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            peers: None,
        }
    }

    fn json(body: &serde_json::Value) -> Response<Full<Bytes>> {
        Response::builder()
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .expect("a valid response")
    }

    /// A replica whose renewal hangs (the API server unreachable, the request unanswered) stops
    /// starting runs at its renew deadline, not when the hanging renewal times out: the fence's
    /// gate closes while the membership waits on that renewal.
    #[tokio::test(start_paused = true)]
    async fn the_gate_closes_at_the_renew_deadline_while_a_renewal_hangs() {
        let (sent, mut received) = mpsc::unbounded_channel();
        let client = Client::new(InTest(sent), "default");
        let settings = settings();
        let (_shards, fence, _task) = join(client, settings.clone(), Metrics::new(), CancellationToken::new());
        let mut gate = fence.gate().expect("a gate");
        // The Leases are listed (none), their watch never answers, the Lease is created, and
        // every renewal after that hangs.
        let (created, mut created_at) = watch::channel(None);
        tokio::spawn(async move {
            while let Some((method, target, body, answer)) = received.recv().await {
                if method == http::Method::GET && !target.contains("watch=true") {
                    let list = serde_json::json!({
                        "apiVersion": "coordination.k8s.io/v1", "kind": "LeaseList",
                        "metadata": {"resourceVersion": "1"}, "items": [],
                    });
                    drop(answer.send(json(&list)));
                } else if method == http::Method::POST {
                    let mut lease: serde_json::Value = serde_json::from_slice(&body).expect("a Lease");
                    lease["metadata"]["resourceVersion"] = "2".into();
                    created.send_replace(Some(Instant::now()));
                    drop(answer.send(json(&lease)));
                }
                // Anything else is dropped unanswered: its caller waits for ever.
            }
        });
        gate.opened().await.expect("the membership runs");
        let renewed = created_at.wait_for(Option::is_some).await.expect("created").expect("a time");
        gate.closed().await.expect("the membership runs");
        let closed = renewed.elapsed();
        let deadline = settings.renew_deadline;
        assert!(
            (deadline - Duration::from_millis(100)..=deadline).contains(&closed),
            "the gate closed {closed:?} after the last renewal, not at the renew deadline ({deadline:?})"
        );
    }

    /// An API server's answer that it cannot serve the request.
    fn unavailable() -> Response<Full<Bytes>> {
        let status = serde_json::json!({
            "apiVersion": "v1", "kind": "Status", "status": "Failure",
            "message": "cut off", "reason": "InternalError", "code": 500,
        });
        let mut response = json(&status);
        *response.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
        response
    }

    /// The Lease of another member, `holder`, renewed at `second` past a minute, which
    /// acknowledged `view`.
    fn other_lease(holder: &str, second: u32, view: &str) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": format!("g-{holder}"), "resourceVersion": format!("{second}"),
                         "labels": {GROUP_LABEL: "g"}, "annotations": {VIEW_ANNOTATION: view}},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                     "renewTime": format!("2026-11-28T00:00:{second:02}.000000Z")},
        })
    }

    /// Replica "me" joined beside two other members, "a" and "b", through an API server that
    /// answers every list of the Leases (in 300 ms) with both, renewed since the last list, and
    /// never answers a watch (it fell silent, or was cut with the rest). The first list shows
    /// both having acknowledged the view of all three, later ones a view without "me" (as the
    /// others do once "me" was cut off long enough). It answers renewals; while `cut`, it
    /// fails lists and renewals at once. Returns the replica's shards and fence, and the count
    /// of lists.
    fn beside_two_others(cut: Arc<std::sync::atomic::AtomicBool>) -> (Shards, Fence, watch::Receiver<u32>) {
        let (sent, mut received) = mpsc::unbounded_channel();
        let client = Client::new(InTest(sent), "default");
        let settings = settings();
        let (shards, fence, _task) = join(client, settings, Metrics::new(), CancellationToken::new());
        let (lists, listed) = watch::channel(0_u32);
        let all_three = Assignment::new(["a", "b", "me"]);
        let without_me = Assignment::new(["a", "b"]);
        tokio::spawn(async move {
            let mut version = 10;
            while let Some((method, target, body, answer)) = received.recv().await {
                let answered = !cut.load(std::sync::atomic::Ordering::SeqCst);
                if method == http::Method::GET && !target.contains("watch=true") && answered {
                    lists.send_modify(|n| *n += 1);
                    let second = *lists.borrow();
                    let view = if second == 1 { all_three.view() } else { without_me.view() };
                    let list = serde_json::json!({
                        "apiVersion": "coordination.k8s.io/v1", "kind": "LeaseList",
                        "metadata": {"resourceVersion": "1"},
                        "items": [other_lease("a", second, &view), other_lease("b", second, &view)],
                    });
                    // A list takes a while: what the replica decides meanwhile shows.
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        drop(answer.send(json(&list)));
                    });
                } else if (method == http::Method::POST || method == http::Method::PUT) && answered {
                    let mut lease: serde_json::Value = serde_json::from_slice(&body).expect("a Lease");
                    version += 1;
                    lease["metadata"]["resourceVersion"] = version.to_string().into();
                    drop(answer.send(json(&lease)));
                } else if !answered {
                    drop(answer.send(unavailable()));
                }
                // A watch is never answered: its caller waits for ever.
            }
        });
        (shards, fence, listed)
    }

    /// A replica beside two members that declare `theirs` for plugin "web", itself declaring
    /// `mine`; the others acknowledge the view with everyone's declarations.
    async fn declaring_beside_two_others(mine: &str, theirs: &str) -> Shards {
        let (sent, mut received) = mpsc::unbounded_channel();
        let client = Client::new(InTest(sent), "default");
        let (shards, _fence, _task) = join(client, settings(), Metrics::new(), CancellationToken::new());
        shards.declare("web", Some(mine));
        let declared = |how: &str| -> Declarations { [("web".to_string(), how.to_string())].into() };
        let (mine, theirs) = (declared(mine), declared(theirs));
        let all_three = Assignment::new(["a", "b", "me"]);
        let view = wasmop_core::shard::view(&all_three, [("a", &theirs), ("b", &theirs), ("me", &mine)]);
        let annotation = serde_json::to_string(&theirs).unwrap();
        tokio::spawn(async move {
            let mut version = 10;
            while let Some((method, target, body, answer)) = received.recv().await {
                if method == http::Method::GET && !target.contains("watch=true") {
                    let mut items = [other_lease("a", 1, &view), other_lease("b", 1, &view)];
                    for item in &mut items {
                        item["metadata"]["annotations"][DECLARATIONS_ANNOTATION] = annotation.clone().into();
                    }
                    let list = serde_json::json!({
                        "apiVersion": "coordination.k8s.io/v1", "kind": "LeaseList",
                        "metadata": {"resourceVersion": "1"}, "items": items,
                    });
                    drop(answer.send(json(&list)));
                } else if method == http::Method::POST || method == http::Method::PUT {
                    let mut lease: serde_json::Value = serde_json::from_slice(&body).expect("a Lease");
                    version += 1;
                    lease["metadata"]["resourceVersion"] = version.to_string().into();
                    drop(answer.send(json(&lease)));
                }
            }
        });
        shards.subscribe().wait_for(|share| share.assigned).await.expect("the membership runs");
        shards
    }

    /// During an upgrade from `uid` to `none`, the upgraded replica (the leader runs the plugin
    /// whole there) must not run it while the others still run their shares: the plugin is
    /// disputed. Replicas that declare the same run it.
    #[tokio::test(start_paused = true)]
    async fn a_plugin_another_member_runs_differently_is_run_by_no_one() {
        let upgraded = declaring_beside_two_others(wasmop_core::shard::UNSHARDED, "uid").await;
        assert!(upgraded.share().disputed.contains("web"));
        assert!(!upgraded.agreed("web"), "the upgraded replica runs the plugin while others run their shares");
        assert!(a_third(&upgraded.share()), "its other plugins' shares are unchanged");
        let agreeing = declaring_beside_two_others("uid", "uid").await;
        assert!(agreeing.agreed("web"));
    }

    /// Whether `share` is a third of the hash space, as it is beside two other members.
    fn a_third(share: &Share) -> bool {
        (share.owned.share() - 1.0 / 3.0).abs() < 0.05
    }

    /// Asserts that the replica owns less than half the hash space for `long`, then a third.
    async fn keeps_a_third(shards: &Shards, long: Duration) {
        let until = Instant::now() + long;
        while Instant::now() < until {
            let owned = shards.share().owned.share();
            assert!(owned < 0.5, "it took {owned} of the hash space: it counted the others gone");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(a_third(&shards.share()), "it owns {} of the hash space, not a third", shards.share().owned.share());
    }

    /// A replica whose Lease watch fell silent, its renewals answered, sees the other members'
    /// Leases expire by its clock. It must not count them gone on that alone, and run what
    /// they still own and run: it lists the Leases to confirm it, and finds them renewed.
    #[tokio::test(start_paused = true)]
    async fn an_expiry_seen_through_a_silent_watch_is_confirmed_by_a_list_first() {
        let (shards, _fence, listed) = beside_two_others(Arc::default());
        shards.subscribe().wait_for(|share| a_third(share)).await.expect("the membership runs");
        let lists = *listed.borrow();
        // Three lease durations: their Leases expire by its clock again and again.
        keeps_a_third(&shards, Duration::from_secs(45)).await;
        assert!(*listed.borrow() > lists, "it listed the Leases to confirm their expiry");
    }

    /// A replica cut off from the API server, renewals and Lease watch alike, lapses; the
    /// others count it gone and acknowledge a view without it. Reconnected before their Leases
    /// expire by its clock, its renewal can succeed before its Lease watch has listed again: it
    /// must not take the acknowledgements it saw before the cut for the others' (and run its
    /// share while they still run it), but list the Leases anew and wait for theirs.
    #[tokio::test(start_paused = true)]
    async fn a_replica_back_from_a_cut_runs_nothing_until_the_others_acknowledge_it_again() {
        let cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (shards, fence, listed) = beside_two_others(cut.clone());
        let mut gate = fence.gate().expect("a gate");
        let mut shares = shards.subscribe();
        shares.wait_for(|share| a_third(share)).await.expect("the membership runs");

        cut.store(true, std::sync::atomic::Ordering::SeqCst);
        gate.closed().await.expect("the membership runs");
        shares.wait_for(|share| share.owned.is_empty()).await.expect("fenced, it gives up what it owned");
        let lists = *listed.borrow();
        cut.store(false, std::sync::atomic::Ordering::SeqCst);
        gate.opened().await.expect("the membership runs");
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            let runnable = shards.share().runnable.share();
            assert!(runnable == 0.0, "back, it runs {runnable} of the hash space the others have not handed over");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(a_third(&shards.share()), "back, it owns a third again");
        assert!(*listed.borrow() > lists, "it listed the Leases again");
    }
}
