//! Shared watches: one watch and one cache per (kind, namespace, selectors), shared by every
//! controller that asks for it, reference-counted, started on first use and stopped when the
//! last subscriber goes away, without touching other watches.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use futures::{Stream, StreamExt};
use kube::Client;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use tokio::sync::broadcast;
use tokio::task::AbortHandle;

use super::{Cache, Selectors, watch};

/// Watch events fanned out to subscribers; objects are shared, never copied per subscriber.
pub type SharedEvent = watcher::Event<Arc<DynamicObject>>;

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
}

impl WatchKey {
    /// The key of a watch of `resource` with the given scope and selectors.
    pub fn new(resource: &ApiResource, namespace: Option<&str>, selectors: Selectors<'_>) -> Self {
        Self {
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
    store: Store<DynamicObject>,
    cache: Cache,
    /// Set once the first list is complete. (Not `Store::wait_until_ready`: its one-shot wakes
    /// only the last of several concurrent waiters.)
    synced: Arc<AtomicBool>,
    events: broadcast::Sender<SharedEvent>,
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
    /// one watches it yet. Must be called within a tokio runtime.
    pub fn subscribe(&self, resource: &ApiResource, namespace: Option<&str>, selectors: Selectors<'_>) -> Subscription {
        let key = WatchKey::new(resource, namespace, selectors);
        let mut watches = self.watches.lock().expect("the registry lock is never poisoned");
        watches.retain(|_, w| w.strong_count() > 0);
        if let Some(watch) = watches.get(&key).and_then(Weak::upgrade) {
            return Subscription { watch };
        }
        let (store, stream) = watch(self.client.clone(), resource, namespace, selectors);
        let (events, _) = broadcast::channel(FAN_OUT_CAPACITY);
        let sender = events.clone();
        let synced = Arc::new(AtomicBool::new(false));
        let set_synced = synced.clone();
        let cache = Cache::new(store.clone(), resource.clone());
        let overlay = cache.clone();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(event) => {
                        // Marked before it is sent: a subscriber that reads `false` still gets it.
                        if matches!(event, watcher::Event::InitDone) {
                            set_synced.store(true, Ordering::SeqCst);
                        }
                        // The store applied it: settle the host's writes it delivers.
                        overlay.observe(&event);
                        // Nobody listening is fine: the cache is still kept up to date.
                        drop(sender.send(share(event)));
                    }
                    Err(err) => tracing::warn!(%err, "watch failed; retrying with backoff"),
                }
            }
        })
        .abort_handle();
        tracing::info!(kind = %key.kind, namespace = ?key.namespace, "watch started");
        self.started.fetch_add(1, Ordering::SeqCst);
        let watch = Arc::new(SharedWatch { store, cache, synced, events, task });
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

/// The state of one subscriber's event stream.
struct Fanout<R> {
    receiver: broadcast::Receiver<SharedEvent>,
    relist: R,
    pending: std::vec::IntoIter<SharedEvent>,
    /// Whether this subscriber has seen the start of the current list.
    listing: bool,
}

/// Wraps the objects of an event so subscribers share them.
fn share(event: watcher::Event<DynamicObject>) -> SharedEvent {
    match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(Arc::new(o)),
        watcher::Event::Delete(o) => watcher::Event::Delete(Arc::new(o)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(Arc::new(o)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

impl Subscription {
    /// The shared cache of the watch, with the host's recent writes.
    pub fn cache(&self) -> Cache {
        self.watch.cache.clone()
    }

    /// The watch's events from now on. A subscriber that joins a synced watch, or falls too
    /// far behind, first gets the cache's content as a re-list (`Init`, `InitApply`...,
    /// `InitDone`), so it never misses an object.
    pub fn events(&self) -> impl Stream<Item = SharedEvent> + Send + 'static {
        let receiver = self.watch.events.subscribe();
        let store = self.watch.store.clone();
        let relist = move || {
            let objects = store.state();
            let mut events = Vec::with_capacity(objects.len() + 2);
            events.push(watcher::Event::Init);
            events.extend(objects.into_iter().map(watcher::Event::InitApply));
            events.push(watcher::Event::InitDone);
            events
        };
        // Joined a synced watch: start from the cache. Joined mid-list: wait for the list to
        // end (the cache then holds all of it) and replay it whole.
        let synced = self.watch.synced.load(Ordering::SeqCst);
        let initial = if synced { relist() } else { Vec::new() };
        let state = Fanout { receiver, relist, pending: initial.into_iter(), listing: synced };
        futures::stream::unfold(state, |mut state| async move {
            loop {
                if let Some(event) = state.pending.next() {
                    return Some((event, state));
                }
                match state.receiver.recv().await {
                    Ok(watcher::Event::Init) => {
                        state.listing = true;
                        return Some((watcher::Event::Init, state));
                    }
                    Ok(watcher::Event::InitApply(_)) if !state.listing => {}
                    Ok(watcher::Event::InitDone) if !state.listing => {
                        state.listing = true;
                        state.pending = (state.relist)().into_iter();
                    }
                    Ok(event) => return Some((event, state)),
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "a subscriber fell behind its watch; resynchronizing from the cache");
                        state.pending = (state.relist)().into_iter();
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        })
    }
}
