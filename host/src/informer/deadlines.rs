//! Every request to the API server but a watch has a deadline, its whole answer included.
//!
//! kube-client sets no read timeout by default, so a read on a half-open connection (a tracking
//! record's GET, a bounded cache's refetch, the list of a kind that is not served) would hold its
//! run, and with sharding every handover of the group would wait on that run's drain. The
//! deadline is the API server's own for requests that are not long-running
//! ([`crate::fence::REQUEST_TIMEOUT`], its `--request-timeout` default): a healthy server has
//! answered by then. A request past it fails with [`Overdue`], a transient error, so the run is
//! retried with backoff. Watches keep the watcher's own idle timeout.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Request, Response};
use kube::Client;
use kube::client::Body;
use tokio::time::{Instant, Sleep};

/// A request the API server did not answer whole by its deadline.
#[derive(Debug, thiserror::Error)]
#[error("the API server did not answer within {0:?}: the request was abandoned")]
pub struct Overdue(pub Duration);

/// `client`, its requests other than watches abandoned when their answer has not arrived whole
/// within `limit`.
pub fn with_deadlines(client: Client, limit: Duration) -> Client {
    let namespace = client.default_namespace().to_string();
    Client::new(Deadlines { client, limit }, namespace)
}

#[derive(Clone)]
struct Deadlines {
    client: Client,
    limit: Duration,
}

impl tower::Service<Request<Body>> for Deadlines {
    type Response = Response<Deadlined>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let (client, limit) = (self.client.clone(), self.limit);
        if is_watch(request.uri().query()) {
            return Box::pin(async move {
                let response = client.send(request).await?;
                Ok(response.map(|body| Deadlined { body, deadline: None, limit }))
            });
        }
        let deadline = Instant::now() + limit;
        Box::pin(async move {
            let response = match tokio::time::timeout_at(deadline, client.send(request)).await {
                Ok(response) => response?,
                Err(_) => return Err(kube::Error::Service(Box::new(Overdue(limit)))),
            };
            let deadline = Some(Box::pin(tokio::time::sleep_until(deadline)));
            Ok(response.map(|body| Deadlined { body, deadline, limit }))
        })
    }
}

/// Whether a request's query asks for a watch.
fn is_watch(query: Option<&str>) -> bool {
    query.is_some_and(|q| q.split('&').any(|pair| pair == "watch=true" || pair == "watch=1"))
}

/// A response body that fails once its request's deadline passed before its end.
pub struct Deadlined {
    body: Body,
    deadline: Option<Pin<Box<Sleep>>>,
    limit: Duration,
}

impl http_body::Body for Deadlined {
    type Data = Bytes;
    type Error = kube::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        match this.deadline.as_mut().map(|d| d.as_mut().poll(cx)) {
            Some(Poll::Ready(())) => {
                this.deadline = None;
                Poll::Ready(Some(Err(kube::Error::Service(Box::new(Overdue(this.limit))))))
            }
            _ => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::Api;

    use super::*;

    /// An API server that answers a request's head at once and never sends its body's end.
    fn stalling_server() -> Client {
        let service = tower::service_fn(|_: Request<Body>| async {
            let never = futures::stream::pending::<Result<http_body::Frame<Bytes>, std::io::Error>>();
            let body = http_body_util::StreamBody::new(never);
            Ok::<_, std::convert::Infallible>(
                Response::builder().header("content-type", "application/json").body(body).unwrap(),
            )
        });
        Client::new(service, "default")
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_whose_answer_stalls_fails_at_its_deadline() {
        let client = with_deadlines(stalling_server(), Duration::from_secs(60));
        let api: Api<ConfigMap> = Api::namespaced(client, "ns");
        let started = Instant::now();
        let err = api.get_opt("tracking").await.unwrap_err();
        assert_eq!(started.elapsed(), Duration::from_secs(60));
        assert!(err.to_string().contains("did not answer within 60s"), "{err}");
        assert_eq!(crate::api_error::persistence(&err), wasmop_core::refusal::Persistence::Transient);
    }

    #[test]
    fn watches_are_told_apart_by_their_query() {
        assert!(is_watch(Some("watch=true&resourceVersion=5")));
        assert!(is_watch(Some("labelSelector=a&watch=1")));
        assert!(!is_watch(Some("limit=500")));
        assert!(!is_watch(None));
    }
}
