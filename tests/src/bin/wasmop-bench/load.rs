//! The load generator of the end-to-end parts: Greetings created and changed at a given
//! concurrency, and the change-to-status latency of each write, taken from a watch the load
//! generator opens before its first write (never from polling).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::Notify;

/// The field manager of the load's writes, as a user's client has its own (`kubectl` and
/// friends). Without one, the API server names it `unknown`, which is also the name of a kube-rs
/// controller's writes without one: both would share one managedFields entry, and the native
/// controller's objects would be smaller than any real cluster's.
pub const LOAD_MANAGER: &str = "bench-load";

/// Writes in flight when creating or changing many Greetings at once.
pub const WRITES_IN_FLIGHT: usize = 16;

/// The Greetings of API group `group` in one namespace.
pub fn greetings(client: &Client, ns: &str, group: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(group, "v1", "Greeting");
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, "greetings"))
}

/// The `apiVersion` of the Greetings at `url`, the resource URL of one of [`greetings`]
/// (`/apis/GROUP/v1/namespaces/NS/greetings`).
fn api_version(url: &str) -> String {
    format!("{}/v1", url.split('/').nth(2).unwrap_or_default())
}

/// The name of the `i`th Greeting.
pub fn name(i: usize) -> String {
    format!("greeting-{i}")
}

/// What the greeting plugin writes for `spec.name` = `value`.
fn message(value: &str) -> String {
    format!("Hello, {value}!")
}

/// A Greeting awaiting its status: its writes in flight, and of those answered, the highest
/// generation one of them produced and when that write began.
///
/// Writes of one Greeting in flight at once may be applied out of order (kube's client retries
/// a write the API server throttled, after a later one succeeded), so the Greeting settles on
/// the generation of the write applied last, not on the value written last.
#[derive(Debug, Default)]
struct Awaited {
    in_flight: usize,
    written: Option<Written>,
}

/// What an answered write produced: the object (its UID) and its generation, and when the write
/// began.
#[derive(Debug)]
struct Written {
    uid: String,
    generation: i64,
    since: Instant,
}

#[derive(Default)]
struct Ledger {
    awaited: HashMap<String, Awaited>,
    /// Per Greeting (by UID: one deleted and created again starts over), the highest generation
    /// a watch event showed reconciled: a status of that generation, with the message of its
    /// `spec.name`.
    reconciled: HashMap<String, i64>,
    latencies: Latencies,
}

impl Ledger {
    /// A write of the Greeting `name` begins now; returns when.
    fn expect(&mut self, name: &str) -> Instant {
        self.awaited.entry(name.to_string()).or_default().in_flight += 1;
        Instant::now()
    }

    /// The write of `name` begun at `since` was answered with the object `written`; returns
    /// whether no Greeting awaits its status any more.
    fn answered(&mut self, name: &str, since: Instant, written: &DynamicObject) -> bool {
        self.latencies.writes.push(since.elapsed());
        if let Some(awaited) = self.awaited.get_mut(name) {
            awaited.in_flight = awaited.in_flight.saturating_sub(1);
            if let (Some(uid), Some(generation)) = (written.uid(), written.metadata.generation)
                && awaited.written.as_ref().is_none_or(|known| known.uid != uid || generation > known.generation)
            {
                awaited.written = Some(Written { uid, generation, since });
            }
        }
        self.settle(name)
    }

    /// A watch event showed `object`; returns whether no Greeting awaits its status any more.
    fn observed(&mut self, object: &DynamicObject) -> bool {
        let (Some(generation), status) = (object.metadata.generation, &object.data["status"]) else {
            return false;
        };
        let value = object.data["spec"]["name"].as_str().unwrap_or_default();
        if status["observedGeneration"].as_i64() != Some(generation) || status["message"] != message(value) {
            return false;
        }
        let Some(uid) = object.uid() else { return false };
        let reconciled = self.reconciled.entry(uid).or_insert(generation);
        *reconciled = (*reconciled).max(generation);
        self.settle(&object.name_any())
    }

    /// Takes `name` off the awaited once its writes are answered and a status of their highest
    /// generation (or a later one) showed; returns whether none is awaited any more.
    fn settle(&mut self, name: &str) -> bool {
        let Some(awaited) = self.awaited.get(name) else { return false };
        let Some(written) = &awaited.written else { return false };
        if awaited.in_flight > 0 || self.reconciled.get(&written.uid).is_none_or(|seen| *seen < written.generation) {
            return false;
        }
        let since = written.since;
        self.awaited.remove(name);
        self.latencies.to_status.push(since.elapsed());
        self.awaited.is_empty()
    }
}

/// What a phase measured per write.
#[derive(Debug, Default)]
pub struct Latencies {
    /// From a write's start until the watch showed its status.
    pub to_status: Vec<Duration>,
    /// From a write's start until the API server answered it: the API server's share of
    /// `to_status`, which the controller does not influence.
    pub writes: Vec<Duration>,
}

impl Latencies {
    /// Adds `other`'s samples to these.
    pub fn extend(&mut self, other: Latencies) {
        self.to_status.extend(other.to_status);
        self.writes.extend(other.writes);
    }
}

/// Change-to-status latencies, measured by a watch of the namespace's Greetings.
#[derive(Clone)]
pub struct Tracker {
    /// The namespace watched, which names the side in errors.
    namespace: String,
    ledger: Arc<Mutex<Ledger>>,
    settled: Arc<Notify>,
    task: Arc<tokio::task::AbortHandle>,
}

impl Drop for Tracker {
    fn drop(&mut self) {
        if Arc::strong_count(&self.task) == 1 {
            self.task.abort();
        }
    }
}

/// Follows the watch `events`: tells `listed` once it listed, and takes each awaited status it
/// shows off `ledger`, notifying `settled` when none is left.
///
/// A watch error (a dropped connection, a throttled re-list) is passed on and the watcher starts
/// again after its backoff: this goes on. Ending at the first error left every later status
/// unseen, and the part waited for them in vain.
async fn follow(
    events: impl futures::Stream<Item = Result<watcher::Event<DynamicObject>, watcher::Error>>,
    ledger: Arc<Mutex<Ledger>>,
    settled: Arc<Notify>,
    listed: tokio::sync::oneshot::Sender<()>,
) {
    let mut listed = Some(listed);
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        let event = match event {
            Err(err) => {
                eprintln!("the bench's watch of Greetings failed, and starts again: {err}");
                continue;
            }
            Ok(event) => event,
        };
        let object = match event {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => o,
            watcher::Event::InitDone => {
                listed.take().map(|tx| tx.send(()));
                continue;
            }
            _ => continue,
        };
        if ledger.lock().expect("never poisoned").observed(&object) {
            settled.notify_waiters();
        }
    }
}

impl Tracker {
    /// Watches the Greetings of `api`; returns once the watch has listed.
    pub async fn start(api: &Api<DynamicObject>) -> anyhow::Result<Self> {
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let settled = Arc::new(Notify::new());
        let (listed_tx, listed) = tokio::sync::oneshot::channel();
        let events = watcher(api.clone(), watcher::Config::default()).default_backoff();
        let task = tokio::spawn(follow(events, ledger.clone(), settled.clone(), listed_tx)).abort_handle();
        tokio::time::timeout(Duration::from_secs(60), listed).await.map_err(|_| {
            anyhow::anyhow!("the watch of Greetings did not list within a minute (is the CRD installed?)")
        })??;
        let namespace = api.namespace().unwrap_or("all namespaces").to_string();
        Ok(Self { namespace, ledger, settled, task: Arc::new(task) })
    }

    /// Records that a write of the Greeting `name` is about to begin; returns when.
    pub fn expect(&self, name: &str) -> Instant {
        self.ledger.lock().expect("never poisoned").expect(name)
    }

    /// Records that the write of `name` begun at `since` was answered with the object `written`.
    fn answered(&self, name: &str, since: Instant, written: &DynamicObject) {
        if self.ledger.lock().expect("never poisoned").answered(name, since, written) {
            self.settled.notify_waiters();
        }
    }

    /// Waits until every awaited status showed, at most `limit`; returns the latencies measured
    /// since the last call.
    pub async fn settle(&self, limit: Duration) -> anyhow::Result<Latencies> {
        let waited = tokio::time::timeout(limit, async {
            loop {
                let notified = self.settled.notified();
                if self.ledger.lock().expect("never poisoned").awaited.is_empty() {
                    return;
                }
                notified.await;
            }
        })
        .await;
        let mut ledger = self.ledger.lock().expect("never poisoned");
        if waited.is_err() {
            let mut names: Vec<&String> = ledger.awaited.keys().collect();
            names.sort();
            names.truncate(5);
            anyhow::bail!(
                "{} Greetings of {} still without their status after {limit:?} (among them {names:?})",
                ledger.awaited.len(),
                self.namespace
            );
        }
        Ok(std::mem::take(&mut ledger.latencies))
    }
}

/// Creates Greetings `first..first+n` with `spec.name` = `value`, [`WRITES_IN_FLIGHT`] at a time.
pub async fn create(
    api: &Api<DynamicObject>,
    tracker: &Tracker,
    range: std::ops::Range<usize>,
    value: &str,
) -> anyhow::Result<()> {
    let api_version = &api_version(api.resource_url());
    let created = futures::stream::iter(range).map(|i| async move {
        let name = name(i);
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": api_version, "kind": "Greeting",
            "metadata": { "name": name }, "spec": { "name": value },
        }))?;
        let since = tracker.expect(&name);
        let written = api
            .create(&PostParams { field_manager: Some(LOAD_MANAGER.into()), ..PostParams::default() }, &object)
            .await?;
        tracker.answered(&name, since, &written);
        anyhow::Ok(())
    });
    created.buffer_unordered(WRITES_IN_FLIGHT).try_collect::<Vec<_>>().await?;
    Ok(())
}

/// Sets `spec.name` of the Greeting `name` to `value`.
pub async fn change(api: &Api<DynamicObject>, tracker: &Tracker, name: &str, value: &str) -> anyhow::Result<()> {
    let since = tracker.expect(name);
    let patch = json!({ "spec": { "name": value } });
    let written = api
        .patch(
            name,
            &PatchParams { field_manager: Some(LOAD_MANAGER.into()), ..PatchParams::default() },
            &Patch::Merge(&patch),
        )
        .await?;
    tracker.answered(name, since, &written);
    Ok(())
}

/// Changes Greetings `0..n` to `value`, [`WRITES_IN_FLIGHT`] at a time.
pub async fn change_all(api: &Api<DynamicObject>, tracker: &Tracker, n: usize, value: &str) -> anyhow::Result<()> {
    let changed = futures::stream::iter(0..n).map(|i| async move { change(api, tracker, &name(i), value).await });
    changed.buffer_unordered(WRITES_IN_FLIGHT).try_collect::<Vec<_>>().await?;
    Ok(())
}

/// Changes one of Greetings `0..n` every `1/rate` seconds, round robin, for `duration`,
/// without waiting for one write before starting the next (as independent clients would).
pub async fn paced(
    api: &Api<DynamicObject>,
    tracker: &Tracker,
    n: usize,
    rate: u32,
    duration: Duration,
) -> anyhow::Result<usize> {
    let mut ticks = tokio::time::interval(Duration::from_secs(1) / rate);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let total = (duration.as_secs_f64() * f64::from(rate)) as usize;
    let mut writes = tokio::task::JoinSet::new();
    for k in 0..total {
        ticks.tick().await;
        let (api, tracker) = (api.clone(), tracker.clone());
        writes.spawn(async move { change(&api, &tracker, &name(k % n), &format!("paced-{k}")).await });
    }
    while let Some(done) = writes.join_next().await {
        done??;
    }
    Ok(total)
}

/// Deletes every Greeting of `api`'s namespace and waits, up to `limit`, until none is left (a
/// controller holding a finalizer removes it first).
pub async fn delete_all(api: &Api<DynamicObject>, limit: Duration) -> anyhow::Result<()> {
    api.delete_collection(&Default::default(), &Default::default()).await?;
    let until = Instant::now() + limit;
    loop {
        let left = api.list_metadata(&kube::api::ListParams::default().limit(1)).await?;
        if left.items.is_empty() {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < until, "Greetings still there {limit:?} after their deletion");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Greeting `name` at `generation` with `spec.name` = `value`, its status reconciled.
    fn greeting(name: &str, value: &str, generation: i64) -> DynamicObject {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("wasmop.dev", "v1alpha1", "Greeting"));
        let mut object = DynamicObject::new(name, &resource).data(json!({
            "spec": { "name": value },
            "status": { "observedGeneration": generation, "message": message(value) },
        }));
        object.metadata.generation = Some(generation);
        object.metadata.uid = Some(format!("uid-{name}"));
        object
    }

    #[tokio::test]
    async fn a_watch_error_does_not_end_the_tracking() {
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        for name in ["before", "after"] {
            let mut ledger = ledger.lock().unwrap();
            let since = ledger.expect(name);
            ledger.answered(name, since, &greeting(name, "x", 1));
        }
        let events = futures::stream::iter([
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Apply(greeting("before", "x", 1))),
            Err(watcher::Error::NoResourceVersion),
            Ok(watcher::Event::Apply(greeting("after", "x", 1))),
        ]);
        let (listed_tx, listed) = tokio::sync::oneshot::channel();
        follow(events, ledger.clone(), Arc::new(Notify::new()), listed_tx).await;
        listed.await.expect("told once listed");
        let ledger = ledger.lock().unwrap();
        assert!(ledger.awaited.is_empty(), "still awaited: {:?}", ledger.awaited.keys().collect::<Vec<_>>());
        assert_eq!(ledger.latencies.to_status.len(), 2);
    }

    #[tokio::test]
    async fn writes_of_one_greeting_applied_out_of_order_settle_on_the_last_applied() {
        // The load changed "g" to "a" and then to "b"; "b" was applied first (generation 5),
        // "a" last (generation 6: the client retried it); the controller reconciled both.
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        {
            let mut ledger = ledger.lock().unwrap();
            let (to_a, to_b) = (ledger.expect("g"), ledger.expect("g"));
            assert!(!ledger.answered("g", to_b, &greeting("g", "b", 5)));
            assert!(!ledger.answered("g", to_a, &greeting("g", "a", 6)));
        }
        let events = futures::stream::iter([
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Apply(greeting("g", "b", 5))),
            Ok(watcher::Event::Apply(greeting("g", "a", 6))),
        ]);
        let (listed_tx, _listed) = tokio::sync::oneshot::channel();
        follow(events, ledger.clone(), Arc::new(Notify::new()), listed_tx).await;
        let ledger = ledger.lock().unwrap();
        assert!(ledger.awaited.is_empty(), "the status of generation 6 did not settle it");
        assert_eq!(ledger.latencies.to_status.len(), 1);
    }

    #[test]
    fn a_greeting_created_again_awaits_its_own_status() {
        let mut ledger = Ledger::default();
        assert!(!ledger.observed(&greeting("g", "old", 6)));
        let mut again = greeting("g", "new", 1);
        again.metadata.uid = Some("another".into());
        let since = ledger.expect("g");
        assert!(!ledger.answered("g", since, &again), "settled by the deleted Greeting's status");
        assert!(ledger.observed(&again));
    }

    #[test]
    fn the_api_version_is_the_group_of_the_url() {
        assert_eq!(api_version("/apis/example.native.dev/v1/namespaces/ns/greetings"), "example.native.dev/v1");
    }
}
