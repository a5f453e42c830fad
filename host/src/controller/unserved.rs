//! Declared kinds the API server does not serve (a CRD not installed, or deleted while the plugin
//! runs): the controller waits for them, says so (the log, [`Unserved`] for `/readyz` and the
//! ReconcilerPlugin's status, and the primaries it owns), and starts once they are served.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{ApiResource, ListParams};
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;
use wasmop_core::shard::ShardKey;

use crate::informer;
use crate::runtime::bindings::wasmop::plugin::types::KindRef;
use crate::shards::Shards;
use crate::wire::Object;
use crate::writer::Writer;

/// How long to wait before asking the API server again about kinds it does not serve, at first;
/// the wait doubles up to [`DISCOVERY_RETRY_MAX`].
const DISCOVERY_RETRY: Duration = Duration::from_secs(1);

/// The longest wait before asking the API server again about kinds it does not serve.
const DISCOVERY_RETRY_MAX: Duration = Duration::from_secs(15);

/// The reason of the primaries' conditions and Events while a declared kind is not served.
const KIND_NOT_SERVED: &str = "KindNotServed";

/// The objects of the first page of the primaries' list; the paging layer sizes the next ones by
/// their bytes ([`informer::paged`]).
const FIRST_PAGE: u32 = 500;

/// Why a controller does not reconcile: the declared kinds the API server does not serve, each
/// with the served kind closest to it, while it waits for them (`/readyz` and the
/// ReconcilerPlugin's status say so); `None` once they are served.
#[derive(Debug, Clone, Default)]
pub struct Unserved(Arc<std::sync::Mutex<Option<String>>>);

impl Unserved {
    /// The kinds not served, in words, if any.
    pub fn get(&self) -> Option<String> {
        self.0.lock().expect("never poisoned").clone()
    }

    fn set(&self, unserved: Option<String>) {
        *self.0.lock().expect("never poisoned") = unserved;
    }
}

/// One declared kind (the primary's, a watch's or a dependent's) and the client of its cluster.
pub(super) struct Declared<'a> {
    pub kind: &'a KindRef,
    pub client: &'a Client,
}

/// Which primaries this replica tells that a kind is not served: each primary is told by one
/// replica only, the one that would reconcile it.
#[derive(Clone)]
pub(super) enum Owner {
    /// Every primary, while `leads` says this replica leads (always without leader election).
    Leader(Arc<dyn Fn() -> bool + Send + Sync>),
    /// The primaries in this replica's shards.
    Shards {
        /// The replica's shards.
        shards: Shards,
        /// What places a primary in a shard.
        key: ShardKey,
    },
}

impl Owner {
    /// The owner of a plugin's primaries: by `shards` for a sharded plugin, else the replica
    /// while `leads` says it leads.
    pub(super) fn of(leads: Arc<dyn Fn() -> bool + Send + Sync>, sharded: Option<(Shards, ShardKey)>) -> Self {
        match sharded {
            Some((shards, key)) => Self::Shards { shards, key },
            None => Self::Leader(leads),
        }
    }

    /// Whether this replica may own any primary now (it leads, or has shards).
    fn owns_any(&self) -> bool {
        match self {
            Self::Leader(leads) => leads(),
            Self::Shards { shards, .. } => !shards.share().owned.is_empty(),
        }
    }

    /// Whether this replica owns `primary`.
    fn owns(&self, primary: &Object) -> bool {
        match self {
            Self::Leader(leads) => leads(),
            Self::Shards { shards, key } => {
                informer::hash_of(*key, primary).is_some_and(|hash| shards.share().owned.contains(hash))
            }
        }
    }
}

/// Where a controller says that declared kinds are not served: the log, [`Unserved`], and the
/// primaries it owns (a `KindNotServed` Warning Event on each, and the host's conditions if it
/// keeps them).
pub(super) struct Waiting<'a> {
    pub plugin: &'a str,
    pub unserved: &'a Unserved,
    /// Writes the primaries' conditions and Events, for the primary's resource once resolved.
    pub writer: &'a (dyn Fn(ApiResource) -> Writer + Sync),
    /// Lists the primaries the controller would reconcile, paged ([`informer::paged`]).
    pub primaries: &'a (dyn Fn(&ApiResource) -> (kube::Api<Object>, ListParams) + Sync),
    /// Which primaries this replica tells.
    pub owner: Owner,
    pub conditions: bool,
}

/// Resolves every declared kind, the primary's first. While some are not served, says so (once
/// per change: the log, [`Unserved`], the primaries) and asks again, waiting longer each time;
/// the controller starts once all are served, without a restart. `None` when `shutdown` fired
/// first.
pub(super) async fn resolve_all(
    declared: &[Declared<'_>],
    waiting: &Waiting<'_>,
    shutdown: &CancellationToken,
) -> Option<Vec<ApiResource>> {
    let plugin = waiting.plugin;
    let mut delay = DISCOVERY_RETRY;
    let mut told: Option<String> = None;
    // The primaries told of `told`, by uid.
    let mut marked = HashSet::new();
    loop {
        let mut resources = Vec::with_capacity(declared.len());
        let mut missing = Vec::new();
        for (i, d) in declared.iter().enumerate() {
            match informer::resolve(d.client, d.kind).await {
                Ok(resource) => resources.push(resource),
                Err(err) => missing.push((i, d, err)),
            }
        }
        if missing.is_empty() {
            if told.is_some() {
                tracing::info!(plugin, "every declared kind is served now");
                waiting.unserved.set(None);
            }
            return Some(resources);
        }
        if let Some((_, _, err)) = missing.iter().find(|(_, _, err)| err.unreachable()) {
            tracing::warn!(plugin, %err, "cannot ask the API server which kinds it serves; retrying in {delay:?}");
        } else {
            let message = unserved(&missing).await;
            if told.as_ref() != Some(&message) {
                tracing::error!(plugin, unserved = %message,
                    "a declared kind is not served; the plugin reconciles once it is (checking again with backoff)");
                waiting.unserved.set(Some(message.clone()));
                told = Some(message.clone());
                marked.clear();
            }
            // The primary's kind is served: its objects say why nothing happens to them.
            if missing[0].0 != 0 {
                mark_primaries(waiting, resources.swap_remove(0), &message, &mut marked).await;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = shutdown.cancelled() => return None,
        }
        delay = (delay * 2).min(DISCOVERY_RETRY_MAX);
    }
}

/// The declared kinds of `missing` in words, each with the served kind closest to it.
async fn unserved(missing: &[(usize, &Declared<'_>, informer::InformerError)]) -> String {
    let mut messages = Vec::with_capacity(missing.len());
    for (_, declared, _) in missing {
        messages.push(informer::not_served(declared.client, declared.kind).await);
    }
    messages.join("; ")
}

/// Tells each primary this replica owns and has not `marked` yet why it is not reconciled: a
/// Warning Event, and the host's conditions (`Ready` False, `Degraded` True with `message`) if
/// it keeps them. Lists them a page at a time.
async fn mark_primaries(waiting: &Waiting<'_>, resource: ApiResource, message: &str, marked: &mut HashSet<String>) {
    if !waiting.owner.owns_any() {
        return;
    }
    let (api, params) = (waiting.primaries)(&resource);
    let mut params = params.limit(FIRST_PAGE);
    let writer = (waiting.writer)(resource);
    let report = wasmop_core::status::Report::Failure { reason: KIND_NOT_SERVED, message, retrying: true };
    loop {
        let page = match api.list(&params).await {
            Ok(page) => page,
            Err(err) => {
                tracing::warn!(plugin = waiting.plugin, %err,
                    "cannot list the primaries to tell them a kind is not served");
                return;
            }
        };
        for primary in page.items {
            if !waiting.owner.owns(&primary) || !marked.insert(primary.uid().unwrap_or_default()) {
                continue;
            }
            if waiting.conditions
                && let Err(err) = writer.patch_status(&primary, None, Some(&report)).await
            {
                tracing::warn!(plugin = waiting.plugin, %err, "cannot write the conditions of a primary");
            }
            let note = Some(format!("not reconciled: {message}"));
            writer
                .publish(&primary, kube::runtime::events::EventType::Warning, KIND_NOT_SERVED, "Reconcile", note)
                .await;
        }
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params.continue_token = Some(token),
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use kube::api::GroupVersionKind;
    use serde_json::{Value, json};
    use wasmop_core::shard::Assignment;

    use super::*;
    use crate::informer::api_double;
    use crate::shards::Share;

    const MESSAGE: &str = "Widgit is not served by the API server (unserved.wasmop.dev/v1)";

    fn resource() -> ApiResource {
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("fixture.wasmop.dev", "v1", "Shape"), "shapes")
    }

    fn shape(name: &str, uid: &str) -> Value {
        json!({ "apiVersion": "fixture.wasmop.dev/v1", "kind": "Shape",
                "metadata": { "name": name, "namespace": "ns", "uid": uid, "resourceVersion": "1" } })
    }

    /// What a replica did to tell the primaries: the queries of its lists, and the primaries
    /// whose conditions it wrote and on which it published an Event.
    #[derive(Debug, Default)]
    struct Told {
        lists: Vec<String>,
        conditions: BTreeSet<String>,
        events: BTreeSet<String>,
    }

    /// Tells the primaries that `owner` owns, against a double of the API server whose list of
    /// primaries has `pages` (each continued by the next, as the API server pages a list).
    async fn tell(owner: Owner, pages: Vec<Vec<Value>>) -> Told {
        let (client, mut requests) = api_double::start().await;
        let writer = {
            let client = client.clone();
            move |resource| {
                Writer::new(client.clone(), client.clone(), resource, "p", crate::metrics::Metrics::new(), fence())
            }
        };
        let primaries = {
            let client = client.clone();
            move |resource: &ApiResource| {
                (kube::Api::all_with(informer::paged(client.clone()), resource), ListParams::default())
            }
        };
        let unserved = Unserved::default();
        let waiting = Waiting {
            plugin: "p",
            unserved: &unserved,
            writer: &writer,
            primaries: &primaries,
            owner,
            conditions: true,
        };
        let mut marked = HashSet::new();
        let mut told = Told::default();
        let marking = mark_primaries(&waiting, resource(), MESSAGE, &mut marked);
        let answering = async {
            while let Some(request) = requests.recv().await {
                let target = request.target().to_string();
                let path = target.split('?').next().unwrap_or_default();
                if request.is_list("shapes") {
                    told.lists.push(target.split_once('?').map_or("", |(_, q)| q).to_string());
                    let page = request.query("continue").map_or(0, |c| c.trim_start_matches("page-").parse().unwrap());
                    let next = (page + 1 < pages.len()).then(|| format!("page-{}", page + 1));
                    request.answer(&json!({ "apiVersion": "fixture.wasmop.dev/v1", "kind": "ShapeList",
                        "metadata": { "resourceVersion": "1", "continue": next }, "items": pages[page] }));
                } else if let Some(name) = path.strip_suffix("/status").and_then(|t| t.rsplit('/').next()) {
                    told.conditions.insert(name.to_string());
                    request.answer(&shape(name, "uid"));
                } else if path.ends_with("/events") {
                    let event: Value = serde_json::from_str(&request.body).unwrap();
                    assert_eq!(event["reason"], KIND_NOT_SERVED);
                    told.events.insert(event["regarding"]["name"].as_str().unwrap().to_string());
                    request.answer(&event);
                } else {
                    panic!("unexpected request {}", request.head);
                }
            }
        };
        tokio::select! {
            () = marking => {}
            () = answering => unreachable!("the double's requests never end"),
        }
        told
    }

    fn fence() -> crate::fence::Fence {
        crate::fence::Fence::unfenced()
    }

    /// Names and uids of primaries that `me` owns and does not own among `members`.
    fn primaries(assignment: &Assignment, me: &str) -> (Vec<Value>, Vec<Value>) {
        let (mut mine, mut theirs) = (Vec::new(), Vec::new());
        for i in 0.. {
            let uid = format!("uid-{i}");
            let owned = assignment.owner(wasmop_core::shard::hash(&uid)) == Some(me);
            let list = if owned { &mut mine } else { &mut theirs };
            if list.len() < 2 {
                list.push(shape(&format!("{}-{i}", if owned { "mine" } else { "theirs" }), &uid));
            }
            if mine.len() == 2 && theirs.len() == 2 {
                break;
            }
        }
        (mine, theirs)
    }

    fn names(objects: &[&Value]) -> BTreeSet<String> {
        objects.iter().map(|o| o["metadata"]["name"].as_str().unwrap().to_string()).collect()
    }

    #[tokio::test]
    async fn a_sharded_replica_tells_only_the_primaries_it_owns_listing_them_a_page_at_a_time() {
        let assignment = Assignment::new(["a", "b"]);
        let (publisher, shards) = Shards::new(None);
        let owned = assignment.ranges("a");
        let since = tokio::time::Instant::now();
        let disputed = BTreeSet::new();
        let runnable = owned.clone();
        publisher.publish(Share { view: assignment.view(), runnable, owned, since, assigned: true, disputed });
        let (mine, theirs) = primaries(&assignment, "a");
        let pages = vec![vec![mine[0].clone(), theirs[0].clone()], vec![theirs[1].clone(), mine[1].clone()]];
        let told = tell(Owner::Shards { shards, key: ShardKey::Uid }, pages).await;
        assert_eq!(told.conditions, names(&[&mine[0], &mine[1]]));
        assert_eq!(told.events, told.conditions);
        assert_eq!(told.lists.len(), 2, "{:?}", told.lists);
        assert!(told.lists[0].contains("limit=500") && !told.lists[0].contains("continue"), "{:?}", told.lists);
        assert!(told.lists[1].contains("continue=page-1"), "{:?}", told.lists);
    }

    #[tokio::test]
    async fn only_the_leader_tells_the_primaries() {
        let (mine, theirs) = primaries(&Assignment::new(["a", "b"]), "a");
        let pages = vec![vec![mine[0].clone(), theirs[0].clone()], vec![mine[1].clone()]];
        let follower = tell(Owner::Leader(Arc::new(|| false)), pages.clone()).await;
        assert!(follower.lists.is_empty() && follower.events.is_empty(), "{follower:?}");
        let leader = tell(Owner::Leader(Arc::new(|| true)), pages).await;
        assert_eq!(leader.events, names(&[&mine[0], &theirs[0], &mine[1]]));
        assert_eq!(leader.conditions, leader.events);
    }
}
