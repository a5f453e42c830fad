//! An HTTP proxy to the API server that a test can make answer 429 Too Many Requests or stall, to
//! fault a host's connection at the HTTP level (the relay only cuts TCP). The host talks plain
//! HTTP to the proxy, which forwards each request with the test's own client. Every request it
//! forwards is recorded with the moment it left for the API server: what reached the API server
//! from the host, and when.
//!
//! A stalled request is held until the proxy passes requests again, then forwarded, unless the
//! host gave up on it first (closed its connection): as a network that delays a request, not one
//! that loses it.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, combinators::UnsyncBoxBody};
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How the proxy treats the requests it receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forward them.
    Pass,
    /// Answer every other one 429 Too Many Requests (with `Retry-After: 1`) and stall the rest.
    Faulty,
    /// Stall them all.
    Stall,
}

/// A request the proxy sent on to the API server.
#[derive(Debug, Clone)]
pub struct Forwarded {
    /// When it left for the API server.
    pub at: Instant,
    /// Its method.
    pub method: Method,
    /// Its path and query.
    pub path: String,
    /// Whether it was stalled before it was forwarded.
    pub held: bool,
}

impl Forwarded {
    /// Whether it is a write (not a GET, a LIST or a WATCH).
    pub fn is_write(&self) -> bool {
        self.method != Method::GET
    }
}

#[derive(Default)]
struct Counts {
    received: AtomicU64,
    stalled: AtomicU64,
    abandoned: AtomicU64,
}

struct Shared {
    mode: watch::Sender<Mode>,
    forwarded: Mutex<Vec<Forwarded>>,
    counts: Counts,
    client: kube::Client,
}

/// A proxy on a loopback port; it stops when dropped.
pub struct Proxy {
    address: SocketAddr,
    shared: Arc<Shared>,
    accepting: JoinHandle<()>,
}

impl Proxy {
    /// Starts a proxy that forwards with `client`, passing requests.
    pub async fn to(client: kube::Client) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let shared = Arc::new(Shared {
            mode: watch::channel(Mode::Pass).0,
            forwarded: Mutex::new(Vec::new()),
            counts: Counts::default(),
            client,
        });
        let accepting = tokio::spawn(accept(listener, shared.clone()));
        Ok(Self { address, shared, accepting })
    }

    /// The proxy's `http` URL, for a kubeconfig's server (with no credentials: the proxy's
    /// client has them).
    pub fn url(&self) -> http::Uri {
        format!("http://{}", self.address).parse().expect("a valid URL")
    }

    /// Treats requests from now on (and the stalled ones) as `mode` says.
    pub fn set(&self, mode: Mode) {
        self.shared.mode.send_replace(mode);
    }

    /// The requests forwarded so far.
    pub fn forwarded(&self) -> Vec<Forwarded> {
        self.shared.forwarded.lock().expect("never poisoned").clone()
    }

    /// Requests stalled so far.
    pub fn stalled(&self) -> u64 {
        self.shared.counts.stalled.load(Ordering::Relaxed)
    }

    /// Stalled requests whose sender gave up before they were forwarded.
    pub fn abandoned(&self) -> u64 {
        self.shared.counts.abandoned.load(Ordering::Relaxed)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

async fn accept(listener: TcpListener, shared: Arc<Shared>) {
    while let Ok((stream, _)) = listener.accept().await {
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| handle(request, shared.clone()));
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

type Body = UnsyncBoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

async fn handle(request: Request<Incoming>, shared: Arc<Shared>) -> Result<Response<Body>, Infallible> {
    let (mut parts, body) = request.into_parts();
    let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else { return Ok(answer(StatusCode::BAD_REQUEST)) };
    let n = shared.counts.received.fetch_add(1, Ordering::Relaxed);
    let mode = *shared.mode.borrow();
    let held = matches!(mode, Mode::Faulty | Mode::Stall);
    match mode {
        Mode::Pass => {}
        Mode::Faulty if n.is_multiple_of(2) => return Ok(too_many_requests()),
        Mode::Faulty | Mode::Stall => {
            shared.counts.stalled.fetch_add(1, Ordering::Relaxed);
            // Counts as abandoned unless the wait ends: the server drops this future when the
            // client closes its connection.
            let abandoned = Abandoned(&shared.counts.abandoned);
            let _ = shared.mode.subscribe().wait_for(|mode| *mode == Mode::Pass).await;
            std::mem::forget(abandoned);
        }
    }
    parts.headers.remove(http::header::HOST);
    let path = parts.uri.path_and_query().map(ToString::to_string).unwrap_or_default();
    let forwarded = Forwarded { at: Instant::now(), method: parts.method.clone(), path, held };
    shared.forwarded.lock().expect("never poisoned").push(forwarded);
    let request = Request::from_parts(parts, kube::client::Body::from(body));
    match shared.client.send(request).await {
        Ok(response) => Ok(response.map(|body| body.map_err(|err| Box::new(err) as _).boxed_unsync())),
        Err(_) => Ok(answer(StatusCode::BAD_GATEWAY)),
    }
}

/// Counts a stalled request whose future was dropped before it was forwarded.
struct Abandoned<'a>(&'a AtomicU64);

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn answer(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::new()).map_err(|never| match never {}).boxed_unsync());
    *response.status_mut() = status;
    response
}

fn too_many_requests() -> Response<Body> {
    let status = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "TooManyRequests",
        "message": "the proxy is faulting: too many requests", "code": 429, "details": { "retryAfterSeconds": 1 }
    });
    let body = Full::new(Bytes::from(status.to_string())).map_err(|never| match never {}).boxed_unsync();
    Response::builder()
        .status(StatusCode::TOO_MANY_REQUESTS)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::RETRY_AFTER, "1")
        .body(body)
        .expect("a valid response")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::AsyncWriteExt;

    use super::*;

    /// The proxy's own promise: a stalled request whose sender gave up is never forwarded.
    #[tokio::test]
    async fn a_stalled_request_its_sender_gave_up_on_is_never_forwarded() {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let proxy = Proxy::to(kube::Client::try_from(config).unwrap()).await.unwrap();
        proxy.set(Mode::Stall);
        let mut stream = tokio::net::TcpStream::connect(proxy.address).await.unwrap();
        stream.write_all(b"PATCH /api/v1/x HTTP/1.1\r\nHost: p\r\nContent-Length: 2\r\n\r\n{}").await.unwrap();
        let waited = tokio::time::timeout(Duration::from_secs(10), async {
            while proxy.stalled() == 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            drop(stream);
            while proxy.abandoned() == 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        waited.await.expect("the proxy saw the sender give up");
        // The abandoned request's future is gone: passing again cannot forward it.
        proxy.set(Mode::Pass);
        assert!(proxy.forwarded().is_empty(), "{:?}", proxy.forwarded());
    }
}
