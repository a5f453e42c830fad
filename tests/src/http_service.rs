//! A real HTTP/1 server on a loopback address, standing in for the external services plugins
//! call with granted outgoing HTTP. It counts the TCP connections it accepts (a refused request
//! must open none) and records every request it reads. The first path segment picks the
//! behaviour; the rest is the test's tag, to tell its requests from those of other tests:
//!
//! - `/echo/...`: 200 with JSON of what it received (`method`, `path`, `authorization`, `body`);
//! - `/slow-head/...`: answers only after [`SLOW`], or never if the caller gives up first;
//! - `/slow-body/...`: 200 at once, one byte of body, then nothing for [`SLOW`];
//! - `/big/...`: 200 with a [`BIG`]-byte body, chunked (no `content-length`);
//! - `/big-declared/...`: the same body with its `content-length`;
//! - `/hold/...`: 200 after [`HOLD`], counting how many such requests it holds at once.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use http_body_util::{BodyExt, Full, StreamBody, combinators::UnsyncBoxBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// How long the slow behaviours keep the caller waiting.
pub const SLOW: Duration = Duration::from_secs(20);
/// How long `/hold/` holds each request.
pub const HOLD: Duration = Duration::from_millis(300);
/// The size of the `/big/` bodies.
pub const BIG: usize = 128 * 1024;

/// A request the service read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Its method.
    pub method: String,
    /// Its path and query.
    pub path: String,
    /// Its `authorization` header, if any.
    pub authorization: Option<String>,
    /// Its body, as text.
    pub body: String,
}

#[derive(Default)]
struct Shared {
    accepted: AtomicU64,
    seen: Mutex<Vec<Seen>>,
    /// Per `/hold/` path: requests held now, and the most held at once.
    held: Mutex<HashMap<String, (u32, u32)>>,
}

/// The service; it stops accepting when dropped (connections in progress end with their task).
pub struct HttpService {
    address: SocketAddr,
    shared: Arc<Shared>,
    accepting: JoinHandle<()>,
}

type Body = UnsyncBoxBody<Bytes, Infallible>;

impl HttpService {
    /// Serves on `address` (`127.0.0.1:0` for any free port) on the current runtime.
    pub async fn bind(address: &str) -> std::io::Result<Self> {
        let listener = TcpListener::bind(address).await?;
        let address = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let accepting = tokio::spawn({
            let shared = shared.clone();
            async move {
                while let Ok((stream, _)) = listener.accept().await {
                    shared.accepted.fetch_add(1, Ordering::SeqCst);
                    let shared = shared.clone();
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |request| {
                            let shared = shared.clone();
                            async move { Ok::<_, Infallible>(answer(&shared, request).await) }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            }
        });
        Ok(Self { address, shared, accepting })
    }

    /// Its address.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `http://<address><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// TCP connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// The requests read so far whose path starts with `prefix`.
    pub fn seen(&self, prefix: &str) -> Vec<Seen> {
        self.shared
            .seen
            .lock()
            .expect("never poisoned")
            .iter()
            .filter(|s| s.path.starts_with(prefix))
            .cloned()
            .collect()
    }

    /// The most `/hold/` requests to `path` held at once.
    pub fn most_held(&self, path: &str) -> u32 {
        self.shared.held.lock().expect("never poisoned").get(path).map_or(0, |(_, most)| *most)
    }
}

impl Drop for HttpService {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

fn full(status: u16, body: impl Into<Bytes>) -> Response<Body> {
    let mut response = Response::new(Full::new(body.into()).boxed_unsync());
    *response.status_mut() = http::StatusCode::from_u16(status).expect("a valid status");
    response
}

async fn answer(shared: &Shared, request: Request<Incoming>) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let seen = Seen {
        method: parts.method.to_string(),
        path: parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_string(),
        authorization: parts.headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned),
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    shared.seen.lock().expect("never poisoned").push(seen.clone());
    let behaviour = seen.path.trim_start_matches('/').split('/').next().unwrap_or_default();
    match behaviour {
        "echo" => {
            let echoed = serde_json::json!({
                "method": seen.method, "path": seen.path, "authorization": seen.authorization, "body": seen.body,
            });
            full(200, echoed.to_string())
        }
        "slow-head" => {
            tokio::time::sleep(SLOW).await;
            full(200, "late")
        }
        "slow-body" => {
            let first = futures::stream::once(async { Ok(Frame::data(Bytes::from_static(b"{"))) });
            let stalled = futures::stream::once(async {
                tokio::time::sleep(SLOW).await;
                Ok(Frame::data(Bytes::from_static(b"}")))
            });
            Response::new(StreamBody::new(futures::StreamExt::chain(first, stalled)).boxed_unsync())
        }
        "big" => {
            let chunks = (0..BIG / 4096).map(|_| Ok(Frame::data(Bytes::from(vec![b'x'; 4096]))));
            Response::new(StreamBody::new(futures::stream::iter(chunks)).boxed_unsync())
        }
        "big-declared" => full(200, vec![b'x'; BIG]),
        "hold" => {
            {
                let mut held = shared.held.lock().expect("never poisoned");
                let (now, most) = held.entry(seen.path.clone()).or_default();
                *now += 1;
                *most = (*most).max(*now);
            }
            tokio::time::sleep(HOLD).await;
            shared.held.lock().expect("never poisoned").entry(seen.path.clone()).or_default().0 -= 1;
            full(200, "held")
        }
        _ => full(404, "no such behaviour"),
    }
}
