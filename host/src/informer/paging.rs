//! List pages sized by their bytes, not by a fixed count of objects.
//!
//! kube's watcher lists 500 objects a page. The API server serves a paged list from its watch
//! cache, and for every page it copies the references of all the objects after the page's start
//! (v1.36, `btreeStore.ListPrefix`), so a list of N objects costs it about N² / 1,000 copies
//! besides encoding them: at 100,000 small ConfigMaps (470 bytes each) 200 pages took it 4.4 s,
//! 20 pages of 5,000 1.2 s. Objects of 2 KB make pages of about 1 MiB; smaller ones make small
//! pages and many of them.
//!
//! So after a list's first page (the watcher's 500), each next page asks for as many objects as
//! fit in [`TARGET_BYTES`] at the bytes per object of the page before it: growing at most
//! [`GROWTH`] times a page and up to [`MAX_LIMIT`], shrinking at once when objects are larger.
//! A page's bytes are what the host holds of it at once (kube reads a page whole before it
//! decodes it), so large objects now make pages smaller than kube's and the host's memory
//! bounded by bytes rather than by objects.

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http::{Request, Response};
use kube::Client;

use super::tally::{Tallied, Tally};

/// The bytes a page aims at: kube's 500 objects at 2 KB each.
pub const TARGET_BYTES: u64 = 1 << 20;
/// The most a page's limit grows over the page before it.
pub const GROWTH: u64 = 4;
/// The fewest objects a page asks for.
pub const MIN_LIMIT: u64 = 10;
/// The most objects a page asks for.
pub const MAX_LIMIT: u64 = 10_000;

/// The limit of a list's next page after a page of `limit` objects took `bytes`: as many objects
/// as fit in [`TARGET_BYTES`] at its bytes per object, at most [`GROWTH`] times `limit`, within
/// [`MIN_LIMIT`] and [`MAX_LIMIT`]. A page that continues is full, so `limit` is its count.
pub fn next_limit(limit: u64, bytes: u64) -> u64 {
    let fitting = TARGET_BYTES.saturating_mul(limit) / bytes.max(1);
    fitting.min(limit.saturating_mul(GROWTH)).clamp(MIN_LIMIT, MAX_LIMIT)
}

/// The last page a watch received: the limit it asked for and its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Page {
    limit: u64,
    bytes: u64,
}

/// A watch's client whose lists' pages after the first are sized by [`next_limit`]. One per
/// watch (a watch lists one page at a time) and one per bounded cache's refetches.
#[derive(Clone)]
struct Paged {
    client: Client,
    last: Arc<Mutex<Option<Page>>>,
}

/// `client`, its lists paged by bytes.
pub fn paged(client: Client) -> Client {
    let namespace = client.default_namespace().to_string();
    Client::new(Paged { client, last: Arc::default() }, namespace)
}

impl tower::Service<Request<kube::client::Body>> for Paged {
    type Response = Response<Tallied<Measured>>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<kube::client::Body>) -> Self::Future {
        // A GET (a bounded cache's refetch) has no query: it takes no lock and measures nothing.
        let limit = request.uri().query().and_then(|query| {
            let last = *self.last.lock().expect("the last page is only copied under its lock");
            sized(query, last)
        });
        if let Some((query, _)) = &limit {
            let path = request.uri().path();
            match format!("{path}?{query}").parse() {
                Ok(uri) => *request.uri_mut() = uri,
                Err(err) => tracing::error!(%err, "cannot size a list's page"),
            }
        }
        let (client, record) = (self.client.clone(), self.last.clone());
        Box::pin(async move {
            let response = client.send(request).await?;
            let limit = limit.map(|(_, limit)| limit).filter(|_| response.status().is_success());
            let measured = Measured { bytes: 0, page: limit.map(|limit| (limit, record)) };
            Ok(response.map(|body| Tallied::new(body, measured)))
        })
    }
}

/// For a list page's `query` (it has a `limit`, no `watch`): the query with the limit of a
/// continued page set from the `last` page, and that limit. A first page keeps its limit.
fn sized(query: &str, last: Option<Page>) -> Option<(String, u64)> {
    let pairs: Vec<(&str, &str)> =
        query.split('&').filter(|p| !p.is_empty()).map(|p| p.split_once('=').unwrap_or((p, ""))).collect();
    let value = |key: &str| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    if value("watch").is_some_and(|v| v == "true" || v == "1") {
        return None;
    }
    let asked: u64 = value("limit")?.parse().ok()?;
    let limit = match last {
        Some(page) if value("continue").is_some_and(|c| !c.is_empty()) => next_limit(page.limit, page.bytes),
        _ => asked,
    };
    let rebuilt: Vec<String> =
        pairs.iter().map(|(k, v)| if *k == "limit" { format!("limit={limit}") } else { format!("{k}={v}") }).collect();
    Some((rebuilt.join("&"), limit))
}

/// A response's bytes; a list page's are recorded as its watch's last page once it has been
/// read to its end.
struct Measured {
    bytes: u64,
    page: Option<(u64, Arc<Mutex<Option<Page>>>)>,
}

impl Tally for Measured {
    fn data(&mut self, bytes: u64) {
        if self.page.is_some() {
            self.bytes += bytes;
        }
    }

    fn end(&mut self) {
        if let Some((limit, last)) = self.page.take() {
            let page = Page { limit, bytes: self.bytes };
            *last.lock().expect("the last page is only set under its lock") = Some(page);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_objects_make_pages_grow_fourfold_up_to_the_target() {
        // 470-byte ConfigMaps: 500 make 235 KB.
        assert_eq!(next_limit(500, 235_000), 2_000);
        assert_eq!(next_limit(2_000, 940_000), 2_231);
        // At the target, a page stays as it is.
        assert_eq!(next_limit(2_000, TARGET_BYTES * 2_000 / 2_000), 2_000);
    }

    #[test]
    fn large_objects_make_pages_shrink_at_once_and_never_below_the_minimum() {
        // 100 KB objects: 500 make 50 MB; 10 fit in the target.
        assert_eq!(next_limit(500, 50_000_000), 10);
        assert_eq!(next_limit(10, 150_000_000), MIN_LIMIT);
    }

    #[test]
    fn tiny_objects_stop_at_the_maximum() {
        assert_eq!(next_limit(8_000, 80_000), MAX_LIMIT);
        assert_eq!(next_limit(500, 0), 2_000, "an empty page grows as a small one");
    }

    #[test]
    fn only_a_continued_list_page_is_resized() {
        let last = Some(Page { limit: 500, bytes: 235_000 });
        let continued = "labelSelector=a%3Db&limit=500&continue=eyJ2IjoiIn0";
        assert_eq!(
            sized(continued, last),
            Some(("labelSelector=a%3Db&limit=2000&continue=eyJ2IjoiIn0".to_string(), 2_000))
        );
        // A first page keeps the watcher's limit (and is measured).
        assert_eq!(sized("limit=500", last), Some(("limit=500".to_string(), 500)));
        // Nothing measured yet: as asked.
        assert_eq!(sized(continued, None).map(|(_, limit)| limit), Some(500));
        // Watches and requests without a limit pass as they are.
        assert_eq!(sized("watch=true&resourceVersion=5&timeoutSeconds=290", last), None);
        assert_eq!(sized("labelSelector=a%3Db", last), None);
    }
}
