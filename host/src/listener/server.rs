//! The listeners' HTTP/1.1 server, bounded against slow and many clients ([`Limits`]):
//! a client must send its request's headers within the header timeout and its body within the
//! body timeout, and at most `max_connections` connections are served at once; more wait in the
//! kernel's backlog until one closes. The same for plain and TLS connections (a TLS handshake
//! has its own timeout, see [`tls`](super::tls)).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::connect_info::ConnectInfo;
use axum::http::Request;
use axum::serve::Listener;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use super::body::Timed;

/// How a listener bounds its clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How long a client may take to send a request's headers, from the connection's start or
    /// the end of its previous request: an idle keep-alive connection is closed after it too.
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body, from the end of its headers: a
    /// slower one is answered 408.
    pub body_timeout: Duration,
    /// How many connections are served at once (at least 1); more wait to be accepted.
    pub max_connections: u32,
}

impl Default for Limits {
    /// 10 s for the headers, 30 s for the body, 1024 connections.
    fn default() -> Self {
        Self { header_timeout: Duration::from_secs(10), body_timeout: Duration::from_secs(30), max_connections: 1024 }
    }
}

/// Serves `router` on the connections of `listener` within `limits` until `shutdown` fires;
/// then accepts no more, lets the requests in flight finish, and returns once every connection
/// has closed. Handlers see the caller's address as `ConnectInfo<SocketAddr>`.
pub async fn serve<L>(mut listener: L, router: Router, limits: Limits, shutdown: CancellationToken)
where
    L: Listener<Addr = SocketAddr>,
{
    let slots = limits.max_connections.max(1);
    let open = Arc::new(Semaphore::new(slots as usize));
    loop {
        // A slot first: past the cap, connections stay in the backlog, not accepted.
        let slot = tokio::select! {
            slot = open.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
            () = shutdown.cancelled() => break,
        };
        let (io, peer) = tokio::select! {
            accepted = listener.accept() => accepted,
            () = shutdown.cancelled() => break,
        };
        tokio::spawn(connection(io, peer, router.clone(), limits, shutdown.clone(), slot));
    }
    drop(listener);
    // Every connection holds its slot until it closes: once all are free, none is open.
    let _closed = open.acquire_many(slots).await;
}

/// Serves one connection from `peer`, holding `_slot` until it closes.
async fn connection<I>(
    io: I,
    peer: SocketAddr,
    router: Router,
    limits: Limits,
    shutdown: CancellationToken,
    _slot: OwnedSemaphorePermit,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let body_timeout = limits.body_timeout;
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let mut request = request.map(|body| Body::new(Timed::new(body, body_timeout)));
        request.extensions_mut().insert(ConnectInfo(peer));
        router.clone().oneshot(request)
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
    let connection = http.serve_connection(TokioIo::new(io), service);
    let mut connection = std::pin::pin!(connection);
    let served = tokio::select! {
        served = connection.as_mut() => served,
        () = shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(err) = served {
        tracing::debug!(%peer, %err, "connection closed");
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::time::Instant;

    use super::*;
    use crate::listener::body;

    /// A router whose one route reads the body as the endpoints' routes do.
    fn router() -> Router {
        let read = async |request: Request<Body>| match body::read(request.into_body(), None, 1024 * 1024).await {
            Ok(bytes) => (StatusCode::OK, format!("{} bytes", bytes.len())).into_response(),
            Err(err) => (err.status(), err.to_string()).into_response(),
        };
        Router::new().route("/", axum::routing::post(read).get(async || "hello"))
    }

    /// Serves [`router`] with `limits` on a loopback port; its address and its shutdown.
    async fn start(limits: Limits) -> (SocketAddr, CancellationToken) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        tokio::spawn(serve(listener, router(), limits, shutdown.clone()));
        (address, shutdown)
    }

    /// Reads `stream` until the server closes it; what it said. Fails after `bound`.
    async fn until_closed(stream: &mut TcpStream, bound: Duration) -> Result<String, String> {
        let mut said = Vec::new();
        match tokio::time::timeout(bound, stream.read_to_end(&mut said)).await {
            Ok(_) => Ok(String::from_utf8_lossy(&said).into_owned()),
            Err(_) => Err(format!("still open after {bound:?}; it said {:?}", String::from_utf8_lossy(&said))),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_sends_half_a_header_is_disconnected_after_the_header_timeout() {
        let limits = Limits::default();
        let (address, _shutdown) = start(limits).await;
        let mut client = TcpStream::connect(address).await.unwrap();
        let started = Instant::now();
        client.write_all(b"POST / HTTP/1.1\r\nHost: loc").await.unwrap();
        until_closed(&mut client, Duration::from_secs(3600)).await.unwrap();
        assert!(started.elapsed() >= limits.header_timeout, "closed after {:?}", started.elapsed());
        assert!(started.elapsed() < limits.header_timeout * 2, "closed after {:?}", started.elapsed());
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_keep_alive_connection_is_closed_after_the_header_timeout() {
        let (address, _shutdown) = start(Limits::default()).await;
        let mut client = TcpStream::connect(address).await.unwrap();
        client.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let said = until_closed(&mut client, Duration::from_secs(3600)).await.unwrap();
        assert!(said.starts_with("HTTP/1.1 200 OK") && said.ends_with("hello"), "{said}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_trickled_slower_than_the_body_timeout_is_refused() {
        let limits = Limits::default();
        let (address, _shutdown) = start(limits).await;
        let mut client = TcpStream::connect(address).await.unwrap();
        client.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n").await.unwrap();
        let started = Instant::now();
        let (mut reader, mut writer) = client.split();
        // One byte a second: 100 s for the body, more than the 30 s allowed.
        let trickle = async {
            for _ in 0..100 {
                if writer.write_all(b"x").await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        };
        let mut said = Vec::new();
        let answer = async {
            let _ = tokio::time::timeout(Duration::from_secs(3600), reader.read_to_end(&mut said)).await;
        };
        tokio::join!(trickle, answer);
        let said = String::from_utf8_lossy(&said);
        assert!(said.starts_with("HTTP/1.1 408 Request Timeout"), "{said}");
        let elapsed = started.elapsed();
        assert!(elapsed >= limits.body_timeout && elapsed < limits.body_timeout * 2, "refused after {elapsed:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_sent_in_time_is_read_whole() {
        let (address, _shutdown) = start(Limits::default()).await;
        let mut client = TcpStream::connect(address).await.unwrap();
        let request = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\n{}\n";
        client.write_all(request).await.unwrap();
        let said = until_closed(&mut client, Duration::from_secs(3600)).await.unwrap();
        assert!(said.starts_with("HTTP/1.1 200 OK") && said.ends_with("3 bytes"), "{said}");
    }

    #[tokio::test(start_paused = true)]
    async fn connections_past_the_cap_wait_until_one_closes() {
        let (address, _shutdown) = start(Limits { max_connections: 1, ..Limits::default() }).await;
        let first = TcpStream::connect(address).await.unwrap();
        let mut second = TcpStream::connect(address).await.unwrap();
        second.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
        // The first holds the only slot: the second is not served while it is open.
        let waited = until_closed(&mut second, Duration::from_secs(5)).await;
        assert!(waited.is_err(), "served past the cap: {waited:?}");
        drop(first);
        let said = until_closed(&mut second, Duration::from_secs(5)).await.unwrap();
        assert!(said.starts_with("HTTP/1.1 200 OK") && said.ends_with("hello"), "{said}");
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_lets_a_request_in_flight_finish_and_returns_once_all_closed() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let served = tokio::spawn(serve(listener, router(), Limits::default(), shutdown.clone()));
        let mut client = TcpStream::connect(address).await.unwrap();
        client.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{").await.unwrap();
        // The request is under way (its headers read) before the shutdown.
        tokio::time::sleep(Duration::from_millis(10)).await;
        shutdown.cancel();
        client.write_all(b"}").await.unwrap();
        let said = until_closed(&mut client, Duration::from_secs(5)).await.unwrap();
        assert!(said.starts_with("HTTP/1.1 200 OK") && said.ends_with("2 bytes"), "{said}");
        tokio::time::timeout(Duration::from_secs(5), served).await.expect("serve returned").unwrap();
    }
}
