//! Where the host's writes to the API server leave the process.
//!
//! [`Fence::write`] checks a run's term before it sends, but the bytes leave later, from the
//! connection's own task (hyper's pool): a replica stopped (SIGSTOP) between the check and the
//! socket's write, or a write queued behind another on a busy connection, would send after its
//! term ended. The clients that write for plugins are therefore built on [`Connector`]: each
//! connection belongs to the term it was opened in, writes to its socket only while that term
//! lasts (checked by the clock in every `poll_write`), and closes when the term ends, so the pool
//! opens a fresh one in the next term. Reads go on until the close: they are not side effects.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioExecutor;
use kube::client::ConfigExt;
use tower::{BoxError, ServiceBuilder};

use super::terms::{Fence, Ticket};

/// Why a connection refuses to send.
const ENDED: &str = "not the leader: the term this connection was opened in ended, nothing more is sent";

/// A client of `config` whose connections write only within the term of `fence` they were
/// opened in. Without an election (an unfenced `fence`) it is the usual client.
pub fn client(config: &kube::Config, fence: &Fence) -> Result<kube::Client, kube::Error> {
    if !fence.is_elected() {
        return kube::Client::try_from(config.clone());
    }
    if let Some(proxy_url) = &config.proxy_url {
        return Err(kube::Error::ProxyProtocolUnsupported { proxy_url: Box::new(proxy_url.clone()) });
    }
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(config.connect_timeout);
    let https = config.rustls_https_connector_with_connector(http)?;
    let connector = Connector { inner: https, fence: fence.clone() };
    let pool = hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(pool);
    Ok(kube::Client::new(service, config.default_namespace.clone()))
}

/// Opens connections that belong to the term open when they were made; refuses to open one
/// while no term is.
#[derive(Clone)]
pub struct Connector<C> {
    inner: C,
    fence: Fence,
}

impl<C> tower::Service<Uri> for Connector<C>
where
    C: tower::Service<Uri>,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = Fenced<C::Response>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let ticket = self.fence.ticket();
        let connecting = self.inner.call(uri);
        Box::pin(async move {
            let ticket = ticket.ok_or_else(|| io::Error::new(io::ErrorKind::PermissionDenied, ENDED))?;
            let io = connecting.await.map_err(Into::into)?;
            if !ticket.open() {
                return Err(io::Error::new(io::ErrorKind::PermissionDenied, ENDED).into());
            }
            Ok(Fenced::new(io, ticket))
        })
    }
}

/// A connection of one term: writes while it lasts, fails once it ended.
pub struct Fenced<S> {
    inner: S,
    ticket: Ticket,
    /// Resolves when the term ends; then the connection fails its reads too, so hyper drops it.
    lapsed: Pin<Box<dyn Future<Output = ()> + Send>>,
    ended: bool,
}

impl<S> Fenced<S> {
    fn new(inner: S, ticket: Ticket) -> Self {
        let watched = ticket.clone();
        let lapsed = Box::pin(async move { watched.lapsed().await });
        Self { inner, ticket, lapsed, ended: false }
    }

    /// `Err` once the term ended, by the clock or by the election's word.
    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if !self.ended && (self.lapsed.as_mut().poll(cx).is_ready() || !self.ticket.open()) {
            self.ended = true;
        }
        if self.ended { Err(io::Error::new(io::ErrorKind::PermissionDenied, ENDED)) } else { Ok(()) }
    }
}

impl<S: Read + Unpin> Read for Fenced<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: ReadBufCursor<'_>) -> Poll<io::Result<()>> {
        self.check(cx)?;
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: Write + Unpin> Write for Fenced<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.check(cx)?;
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.check(cx)?;
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.check(cx)?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<S: Connection> Connection for Fenced<S> {
    fn connected(&self) -> Connected {
        self.inner.connected()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::super::terms::tests_support::{fence, lead};
    use super::*;

    /// How long a test waits for what must happen at once.
    const SOON: Duration = Duration::from_secs(5);

    /// A server answering every request with an empty 200, keeping connections open; what it
    /// received (whole requests' first lines) and how many connections it accepted.
    async fn server() -> (String, Arc<Mutex<Vec<String>>>, Arc<Mutex<usize>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (received, connections) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(0)));
        let (seen, accepted) = (received.clone(), connections.clone());
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                *accepted.lock().unwrap() += 1;
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0; 4096];
                    while let Ok(n) = socket.read(&mut buf).await {
                        if n == 0 {
                            return;
                        }
                        let text = String::from_utf8_lossy(&buf[..n]).to_string();
                        seen.lock().unwrap().push(text.lines().next().unwrap_or_default().to_string());
                        let answer =
                            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                        if socket.write_all(answer).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (url, received, connections)
    }

    async fn get(client: &kube::Client, path: &str) -> Result<(), kube::Error> {
        let request = http::Request::get(path).body(Vec::new()).unwrap();
        client.request_text(request).await.map(drop)
    }

    async fn write<S: Write + Unpin>(io: &mut Fenced<S>, line: &str) -> io::Result<usize> {
        std::future::poll_fn(|cx| Pin::new(&mut *io).poll_write(cx, line.as_bytes())).await
    }

    #[tokio::test]
    async fn a_connection_sends_nothing_once_its_term_ended_even_after_a_new_one_opened() {
        let (url, received, _) = server().await;
        let (terms, leading, fence) = fence();
        lead(&terms, &leading, Duration::from_millis(300));
        let ticket = fence.ticket().expect("open");
        let tcp = tokio::net::TcpStream::connect(url.trim_start_matches("http://")).await.unwrap();
        let mut io = Fenced::new(hyper_util::rt::TokioIo::new(tcp), ticket);
        write(&mut io, "GET /in-term HTTP/1.1\r\nhost: x\r\n\r\n").await.expect("written in its term");
        // A replica stopped past its deadline, continued, and renewed at once: a new term.
        tokio::time::sleep(Duration::from_millis(400)).await;
        lead(&terms, &leading, Duration::from_secs(10));
        let refused = write(&mut io, "GET /stale HTTP/1.1\r\nhost: x\r\n\r\n").await;
        assert_eq!(refused.map_err(|e| e.kind()), Err(io::ErrorKind::PermissionDenied));
        tokio::time::timeout(SOON, async {
            while received.lock().unwrap().is_empty() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap();
        assert_eq!(*received.lock().unwrap(), ["GET /in-term HTTP/1.1"], "nothing of the old term after it");
    }

    #[tokio::test]
    async fn the_pool_drops_a_terms_connections_when_it_ends_and_the_next_term_writes_on_new_ones() {
        let (url, received, connections) = server().await;
        let (terms, leading, fence) = fence();
        let config = kube::Config::new(url.parse().unwrap());
        let client = client(&config, &fence).unwrap();
        assert!(get(&client, "/never-led").await.is_err(), "no connection opens while no term is");
        lead(&terms, &leading, Duration::from_millis(300));
        get(&client, "/first").await.unwrap();
        get(&client, "/second").await.unwrap();
        assert_eq!(*connections.lock().unwrap(), 1, "kept alive within the term");
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(get(&client, "/lapsed").await.is_err(), "no term: nothing is sent");
        lead(&terms, &leading, Duration::from_secs(10));
        get(&client, "/next-term").await.expect("the next term's write goes, at the first try");
        assert_eq!(*connections.lock().unwrap(), 2, "on a connection of its own term");
        let received = received.lock().unwrap().clone();
        assert_eq!(received, ["GET /first HTTP/1.1", "GET /second HTTP/1.1", "GET /next-term HTTP/1.1"]);
    }
}
