//! Shared watches: one watch and one cache per (kind, namespace, selectors), shared by every
//! controller that asks for it, reference-counted, started on first use and stopped when the
//! last subscriber goes away, without touching other watches.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use futures::{Stream, StreamExt};
use kube::Client;
use kube::api::ApiResource;
use kube::runtime::watcher;
use tokio::sync::broadcast;
use tokio::task::AbortHandle;

use super::cache::Cache;
use super::shape::Shape;
use super::watch::{Selectors, SharedEvent, watch, watch_bounded};

/// Events a slow subscriber may fall behind by before it is resynchronized from the cache.
const FAN_OUT_CAPACITY: usize = 4096;

/// What identifies a watch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WatchKey {
    /// API group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Namespace; `None` for all namespaces.
    pub namespace: Option<String>,
    /// Label selector.
    pub labels: Option<String>,
    /// Field selector.
    pub fields: Option<String>,
    /// The pool of a bounded watch; `None` keeps every object.
    pub pool: Option<String>,
    /// The projection; `None` keeps whole objects.
    pub projection: Option<Vec<String>>,
    /// The shard key of a sharded watch; `None` watches every object.
    pub shard: Option<wasmop_core::shard::ShardKey>,
}

impl WatchKey {
    /// The key of a watch of `resource` with the given scope and selectors.
    pub fn new(resource: &ApiResource, namespace: Option<&str>, selectors: Selectors<'_>, shape: &Shape) -> Self {
        Self {
            pool: shape.pool.as_ref().map(|p| p.name().to_string()),
            projection: shape.projection.as_deref().map(<[String]>::to_vec),
            shard: shape.shard.as_ref().map(|s| s.key),
            group: resource.group.clone(),
            version: resource.version.clone(),
            kind: resource.kind.clone(),
            namespace: namespace.map(String::from),
            labels: selectors.labels.map(String::from),
            fields: selectors.fields.map(String::from),
        }
    }
}

/// One running watch and its cache.
struct SharedWatch {
    cache: Cache,
    /// Set once the first list is complete. (Not `Store::wait_until_ready`: its one-shot wakes
    /// only the last of several concurrent waiters.)
    synced: Arc<AtomicBool>,
    /// Set while a list is in progress: the store shows it only once it ends.
    listing: Arc<AtomicBool>,
    events: broadcast::Sender<SharedEvent>,
    /// How many times the API server answered that it does not serve the watch's kind (404).
    unserved: tokio::sync::watch::Sender<u64>,
    task: AbortHandle,
}

impl Drop for SharedWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The host's watches, shared between controllers.
pub struct Registry {
    client: Client,
    watches: Mutex<HashMap<WatchKey, Weak<SharedWatch>>>,
    /// Watches started so far (each one lists before it watches).
    started: std::sync::atomic::AtomicU64,
}

/// A controller's share of a watch: the cache and a stream of events. The watch stops when the
/// last subscription is dropped.
pub struct Subscription {
    watch: Arc<SharedWatch>,
}

impl Registry {
    /// A registry creating watches with `client`.
    pub fn new(client: Client) -> Arc<Self> {
        Arc::new(Self { client, watches: Mutex::new(HashMap::new()), started: std::sync::atomic::AtomicU64::new(0) })
    }

    /// Subscribes to the watch of `resource` in `namespace` with `selectors`, starting it if no
    /// one watches it yet; its objects are cut to `shape`, and with a pool the watch is bounded
    /// and keeps only warm objects there. Must be called within a tokio runtime.
    pub fn subscribe(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        selectors: Selectors<'_>,
        shape: &Shape,
    ) -> Subscription {
        let key = WatchKey::new(resource, namespace, selectors, shape);
        let mut watches = self.watches.lock().expect("the registry lock is never poisoned");
        watches.retain(|_, w| w.strong_count() > 0);
        if let Some(watch) = watches.get(&key).and_then(Weak::upgrade) {
            return Subscription { watch };
        }
        let (events, _) = broadcast::channel(FAN_OUT_CAPACITY);
        let synced = Arc::new(AtomicBool::new(false));
        let listing = Arc::new(AtomicBool::new(false));
        let unserved = tokio::sync::watch::Sender::new(0);
        // What delivers the watch's events to `cache` and the subscribers.
        let delivery = |cache: &Cache| Delivery {
            cache: cache.clone(),
            events: events.clone(),
            synced: synced.clone(),
            listing: listing.clone(),
            unserved: unserved.clone(),
        };
        let (cache, task) = match &shape.pool {
            None => {
                let (store, stream) = watch(self.client.clone(), resource, namespace, selectors, shape);
                let cache = Cache::new(store, shape.clone());
                let deliver = delivery(&cache);
                // The stream applied each event to the store already.
                (cache, tokio::spawn(deliver.run(stream, |_| {})))
            }
            Some(pool) => {
                let (store, stream) = watch_bounded(self.client.clone(), resource, namespace, selectors, shape, pool);
                let store = Arc::new(store);
                let cache = Cache::bounded(store.clone(), shape.clone());
                let deliver = delivery(&cache);
                let apply = move |event: &SharedEvent| store.apply(event);
                (cache, tokio::spawn(deliver.run(stream, apply)))
            }
        };
        tracing::info!(kind = %key.kind, namespace = ?key.namespace, pool = ?key.pool, "watch started");
        self.started.fetch_add(1, Ordering::SeqCst);
        let watch = Arc::new(SharedWatch { cache, synced, listing, events, unserved, task: task.abort_handle() });
        watches.insert(key, Arc::downgrade(&watch));
        Subscription { watch }
    }

    /// The client this registry watches with.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// How many watches were started so far, each with its own list.
    pub fn started(&self) -> u64 {
        self.started.load(Ordering::SeqCst)
    }

    /// How many watches are running.
    pub fn active(&self) -> usize {
        let watches = self.watches.lock().expect("the registry lock is never poisoned");
        watches.values().filter(|w| w.strong_count() > 0).count()
    }
}

/// Where a watch's events go: its store (`apply`), the overlay of its cache, its subscribers.
struct Delivery {
    cache: Cache,
    events: broadcast::Sender<SharedEvent>,
    synced: Arc<AtomicBool>,
    listing: Arc<AtomicBool>,
    unserved: tokio::sync::watch::Sender<u64>,
}

impl Delivery {
    async fn run(self, stream: impl Stream<Item = Result<SharedEvent, watcher::Error>>, apply: impl Fn(&SharedEvent)) {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(event) => {
                    apply(&event);
                    // Marked before it is sent: a subscriber that reads `false` still gets it.
                    // A subscriber that fell behind and reads `listing` set will get the
                    // list's end; read unset, the store already shows the whole list.
                    match event {
                        watcher::Event::Init => self.listing.store(true, Ordering::SeqCst),
                        watcher::Event::InitDone => {
                            self.listing.store(false, Ordering::SeqCst);
                            self.synced.store(true, Ordering::SeqCst);
                        }
                        _ => {}
                    }
                    // The store applied it: settle the host's writes it delivers.
                    self.cache.observe(&event);
                    // Nobody listening is fine: the cache is still kept up to date.
                    drop(self.events.send(event));
                }
                Err(err) => {
                    if kind_not_served(&err) {
                        self.unserved.send_modify(|answers| *answers += 1);
                    }
                    tracing::warn!(%err, "watch failed; retrying with backoff");
                }
            }
        }
    }
}

/// Whether `err` is the API server's answer that it does not serve the watch's kind: 404 to its
/// list or its watch (the kind's CRD was deleted).
fn kind_not_served(err: &watcher::Error) -> bool {
    match err {
        watcher::Error::InitialListFailed(err)
        | watcher::Error::WatchStartFailed(err)
        | watcher::Error::WatchFailed(err) => {
            matches!(err, kube::Error::Api(status) if status.code == 404)
        }
        watcher::Error::WatchError(status) => status.code == 404,
        watcher::Error::NoResourceVersion => false,
    }
}

/// Every object the cache's store shows, as a re-list; retried until the API server answers
/// (only a bounded cache with evicted objects asks it).
async fn relist(cache: &Cache) -> Vec<SharedEvent> {
    let objects = loop {
        match cache.stored().await {
            Ok(objects) => break objects,
            Err(err) => {
                tracing::warn!(%err, "cannot list the evicted objects of a bounded cache; retrying");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        }
    };
    let mut events = Vec::with_capacity(objects.len() + 2);
    events.push(watcher::Event::Init);
    events.extend(objects.into_iter().map(watcher::Event::InitApply));
    events.push(watcher::Event::InitDone);
    events
}

/// The state of one subscriber's event stream.
struct Fanout<R> {
    receiver: broadcast::Receiver<SharedEvent>,
    /// The store's content as a re-list.
    relist: R,
    pending: std::vec::IntoIter<SharedEvent>,
    /// Whether this subscriber passes on the current list; if not, it skips the list's objects
    /// and replays the whole store at the list's end.
    listing: bool,
    /// The watch's: whether a list is in progress.
    watch_listing: Arc<AtomicBool>,
}

/// A subscriber's events from `receiver`, a watch's ([`Subscription::events`]): from the
/// store's content (`relist`) first when the watch is `synced`; `watch_listing` says whether
/// the watch is in a list.
fn fan_out<R, F>(
    receiver: broadcast::Receiver<SharedEvent>,
    synced: bool,
    watch_listing: Arc<AtomicBool>,
    relist: R,
) -> impl Stream<Item = SharedEvent> + Send + 'static
where
    R: Fn() -> F + Send + 'static,
    F: std::future::Future<Output = Vec<SharedEvent>> + Send,
{
    // Joined a synced watch: start from the cache. Joined mid-list: wait for the list to end
    // (the cache then holds all of it) and replay it whole.
    let state = Fanout { receiver, relist, pending: Vec::new().into_iter(), listing: synced, watch_listing };
    futures::stream::unfold((state, synced), |(mut state, mut initial)| async move {
        if std::mem::take(&mut initial) {
            state.pending = (state.relist)().await.into_iter();
        }
        loop {
            if let Some(event) = state.pending.next() {
                return Some((event, (state, false)));
            }
            match state.receiver.recv().await {
                Ok(watcher::Event::Init) => {
                    state.listing = true;
                    return Some((watcher::Event::Init, (state, false)));
                }
                Ok(watcher::Event::InitApply(_)) if !state.listing => {}
                Ok(watcher::Event::InitDone) if !state.listing => {
                    state.listing = true;
                    state.pending = (state.relist)().await.into_iter();
                }
                Ok(event) => return Some((event, (state, false))),
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "a subscriber fell behind its watch; resynchronizing from the cache");
                    // What it missed may be part of a list: the rest of that list is not passed
                    // on, and the whole store is replayed once it shows the list (now, unless a
                    // list is in progress).
                    state.listing = false;
                    if !state.watch_listing.load(Ordering::SeqCst) {
                        state.pending = (state.relist)().await.into_iter();
                    }
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
}

impl Subscription {
    /// Resolves when the API server next answers that it does not serve the watch's kind (its
    /// CRD was deleted): at its next 404 after this call, not at one before it. The watch itself
    /// goes on retrying, and recovers once the kind is served again.
    pub fn unserved(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut answers = self.watch.unserved.subscribe();
        answers.borrow_and_update();
        async move {
            if answers.changed().await.is_err() {
                // The watch stopped: it will tell nothing any more.
                std::future::pending::<()>().await;
            }
        }
    }

    /// The shared cache of the watch, with the host's recent writes.
    pub fn cache(&self) -> Cache {
        self.watch.cache.clone()
    }

    /// The watch's events from now on. A subscriber that joins a synced watch, or falls too
    /// far behind, first gets the cache's content as a re-list (`Init`, `InitApply`...,
    /// `InitDone`), so it never misses an object; one that joins, or falls behind, while a
    /// list is in progress gets it once the list ends, whole (the store shows a list only
    /// then).
    pub fn events(&self) -> impl Stream<Item = SharedEvent> + Send + 'static {
        let receiver = self.watch.events.subscribe();
        let cache = self.watch.cache.clone();
        let synced = self.watch.synced.load(Ordering::SeqCst);
        fan_out(receiver, synced, self.watch.listing.clone(), move || {
            let cache = cache.clone();
            async move { relist(&cache).await }
        })
    }
}

#[cfg(test)]
mod tests {
    use kube::api::{ApiResource, GroupVersionKind};

    use super::*;
    use crate::wire::Object;

    fn object(name: &str) -> Arc<Object> {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        let mut o = Object::new(name, &resource);
        o.metadata.namespace = Some("ns".into());
        o.metadata.resource_version = Some("1".into());
        Arc::new(o)
    }

    /// The names of the objects of the last whole list (`Init` to `InitDone`) in `events`.
    fn last_list(events: &[SharedEvent]) -> Vec<String> {
        let done = events.iter().rposition(|e| matches!(e, watcher::Event::InitDone)).expect("a list ended");
        let init = events[..done].iter().rposition(|e| matches!(e, watcher::Event::Init)).expect("a list began");
        events[init + 1..done]
            .iter()
            .map(|e| match e {
                watcher::Event::InitApply(o) => o.metadata.name.clone().unwrap_or_default(),
                other => panic!("{other:?} within a list"),
            })
            .collect()
    }

    #[tokio::test]
    async fn a_subscriber_that_falls_behind_during_a_list_gets_the_whole_list_at_its_end() {
        let names = ["a", "b", "c", "d", "e", "f"];
        let (sender, receiver) = broadcast::channel(2);
        let listing = Arc::new(AtomicBool::new(true));
        let store: Vec<SharedEvent> = std::iter::once(watcher::Event::Init)
            .chain(names.iter().map(|n| watcher::Event::InitApply(object(n))))
            .chain(std::iter::once(watcher::Event::InitDone))
            .collect();
        // As a whole store: it shows the list once it ends, nothing before (the first list).
        let in_list = listing.clone();
        let relist = move || {
            let shown = if in_list.load(Ordering::SeqCst) {
                vec![watcher::Event::Init, watcher::Event::InitDone]
            } else {
                store.clone()
            };
            std::future::ready(shown)
        };
        let mut events = std::pin::pin!(fan_out(receiver, false, listing.clone(), relist));
        // The subscriber reads the list's start, then falls behind by more than the channel
        // holds.
        sender.send(watcher::Event::Init).unwrap();
        sender.send(watcher::Event::InitApply(object("a"))).unwrap();
        let mut seen = vec![events.next().await.unwrap(), events.next().await.unwrap()];
        for name in &names[1..] {
            sender.send(watcher::Event::InitApply(object(name))).unwrap();
        }
        listing.store(false, Ordering::SeqCst);
        sender.send(watcher::Event::InitDone).unwrap();
        drop(sender);
        while let Some(event) = events.next().await {
            seen.push(event);
        }
        assert_eq!(last_list(&seen), names, "every listed object, after the last list start it was given");
    }

    #[test]
    fn only_a_404_says_the_kind_is_not_served() {
        let status = |code| Box::new(kube::core::Status::failure("the message", "Reason").with_code(code));
        assert!(kind_not_served(&watcher::Error::InitialListFailed(kube::Error::Api(status(404)))));
        assert!(kind_not_served(&watcher::Error::WatchStartFailed(kube::Error::Api(status(404)))));
        assert!(kind_not_served(&watcher::Error::WatchError(status(404))));
        assert!(!kind_not_served(&watcher::Error::WatchError(status(410))), "an expired resource version");
        assert!(!kind_not_served(&watcher::Error::InitialListFailed(kube::Error::Api(status(403)))));
        assert!(!kind_not_served(&watcher::Error::NoResourceVersion));
    }

    #[tokio::test]
    async fn a_subscriber_that_falls_behind_between_lists_gets_the_store_at_once() {
        let (sender, receiver) = broadcast::channel(2);
        let store = vec![watcher::Event::Init, watcher::Event::InitApply(object("a")), watcher::Event::InitDone];
        let relist = move || std::future::ready(store.clone());
        let mut events = std::pin::pin!(fan_out(receiver, false, Arc::new(AtomicBool::new(false)), relist));
        for name in ["x", "y", "z"] {
            sender.send(watcher::Event::Apply(object(name))).unwrap();
        }
        let first: Vec<SharedEvent> = events.as_mut().take(3).collect().await;
        assert_eq!(last_list(&first), ["a"]);
    }
}
