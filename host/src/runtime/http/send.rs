//! How an admitted request reaches its origin: the host name is resolved here, and addresses
//! the grant did not name literally are refused when they are the machine's own (loopback), the
//! link's (link-local: 169.254.0.0/16, where clouds serve instance metadata, and fe80::/10) or
//! the API server's; then a connection within the connect timeout, TLS for `https` (Mozilla's
//! roots), and HTTP/1.1 over a socket that asks the run's fence before every write
//! ([`Fenced`]): a request queued below the plugin while its replica lost its lease sends no
//! byte once that replica's term ended, however late its task is polled.

use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use wasmtime_wasi_http::{Error, WasiBody};

use super::policy::{Origin, Scheme};
use crate::fence::Ticket;

/// What the `wasi:http` hook hands back: the response head and the connection's driver.
pub type Sent = (http::Response<WasiBody>, Box<dyn Future<Output = Result<(), Error>> + Send>);

/// A request on its way.
pub(super) type Sending = Pin<Box<dyn Future<Output = Result<Sent, Error>> + Send>>;

/// Addresses no granted host name may lead to, besides loopback and link-local ones: the API
/// server's. Set once the host knows its cluster.
#[derive(Debug, Default)]
pub struct Unreachable {
    addresses: std::sync::RwLock<Arc<[IpAddr]>>,
}

impl Unreachable {
    /// Refuses `addresses` (the API server's) from now on.
    pub fn set(&self, addresses: Vec<IpAddr>) {
        *self.addresses.write().expect("never poisoned") = addresses.into();
    }

    /// Why `address` may not be reached through a host name, if it may not.
    fn refuses(&self, address: IpAddr) -> Option<&'static str> {
        let address = canonical(address);
        if address.is_loopback() || address.is_unspecified() {
            return Some("a loopback address");
        }
        let link_local = match address {
            IpAddr::V4(v4) => v4.is_link_local(),
            IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
        };
        if link_local {
            return Some("a link-local address");
        }
        let api_server = self.addresses.read().expect("never poisoned").iter().any(|a| canonical(*a) == address);
        api_server.then_some("the API server's address")
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        v4 => v4,
    }
}

/// The addresses to connect to for `origin`: its IP address when the grant names one, else what
/// its host name resolves to, less the addresses [`Unreachable`] refuses; an error when none is
/// left, naming the host and what it resolved to.
pub async fn addresses(origin: &Origin, unreachable: &Unreachable) -> Result<Vec<SocketAddr>, Error> {
    if let Ok(ip) = origin.host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, origin.port)]);
    }
    let resolved: Vec<SocketAddr> = tokio::net::lookup_host((origin.host.as_str(), origin.port))
        .await
        .map_err(|_| Error::DnsError { rcode: Some("cannot resolve".into()), info_code: None })?
        .collect();
    let (allowed, refused): (Vec<SocketAddr>, Vec<SocketAddr>) =
        resolved.iter().partition(|a| unreachable.refuses(a.ip()).is_none());
    if allowed.is_empty() {
        let why = refused.first().and_then(|a| unreachable.refuses(a.ip())).unwrap_or("no address");
        let listed = refused.iter().map(|a| a.ip().to_string()).collect::<Vec<_>>().join(", ");
        return Err(Error::InternalError(Some(format!(
            "{} resolves to {why} ({listed}); a grant reaches such an address only when it names it literally",
            origin.host
        ))));
    }
    Ok(allowed)
}

/// Sends `request` to `origin` at one of `addresses`, connecting within `connect_timeout`, every
/// byte written only while `ticket` (the run's term, when the replica is fenced) is open.
pub async fn send(
    mut request: http::Request<WasiBody>,
    origin: &Origin,
    addresses: &[SocketAddr],
    connect_timeout: Duration,
    ticket: Option<Ticket>,
) -> Result<Sent, Error> {
    let tcp = tokio::time::timeout(connect_timeout, TcpStream::connect(addresses))
        .await
        .map_err(|_| Error::ConnectionTimeout)?
        .map_err(Error::Connect)?;
    let fenced = Fenced { inner: tcp, ticket };
    let stream: Box<dyn Stream> = match origin.scheme {
        Scheme::Http => Box::new(fenced),
        Scheme::Https => {
            let name = match origin.host.parse::<IpAddr>() {
                Ok(ip) => rustls::pki_types::ServerName::from(ip),
                Err(_) => rustls::pki_types::ServerName::try_from(origin.host.clone())
                    .map_err(|_| Error::HttpRequestUriInvalid)?,
            };
            let tls = tokio::time::timeout(connect_timeout, tls_connector().connect(name, fenced))
                .await
                .map_err(|_| Error::ConnectionTimeout)?
                .map_err(Error::Tls)?;
            Box::new(tls)
        }
    };
    let (mut sender, conn) = tokio::time::timeout(
        connect_timeout,
        hyper::client::conn::http1::Builder::new().handshake(TokioIo::new(stream)),
    )
    .await
    .map_err(|_| Error::ConnectionTimeout)??;
    // The request line carries the path only; the authority is in the Host header.
    let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
    *request.uri_mut() = http::Uri::builder().path_and_query(path).build().map_err(|_| Error::HttpRequestUriInvalid)?;
    let mut conn = Some(conn);
    let mut response = std::pin::pin!(sender.send_request(request));
    // The connection is driven while the response head is awaited, then handed back to be
    // driven while the body is read.
    let response = std::future::poll_fn(|cx| match response.as_mut().poll(cx) {
        Poll::Ready(answer) => Poll::Ready(answer.map_err(Error::from)),
        Poll::Pending => {
            let Some(driving) = conn.as_mut() else { return Poll::Pending };
            let ended = ready!(Pin::new(driving).poll(cx));
            conn = None;
            match ended {
                Ok(()) => response.as_mut().poll(cx).map_err(Error::from),
                Err(err) => Poll::Ready(Err(Error::from(err))),
            }
        }
    })
    .await?;
    let response = response.map(|body| body.map_err(Error::from).boxed_unsync());
    let io = async move {
        match conn {
            Some(conn) => conn.await.map_err(Error::from),
            None => Ok(()),
        }
    };
    Ok((response, Box::new(io)))
}

/// A connection's byte stream.
trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// The client TLS settings: Mozilla's roots (the image has no system roots), ring.
fn tls_connector() -> tokio_rustls::TlsConnector {
    static CONFIG: std::sync::OnceLock<Arc<rustls::ClientConfig>> = std::sync::OnceLock::new();
    let config = CONFIG.get_or_init(|| {
        let mut roots = rustls::RootCertStore::empty();
        roots.add_parsable_certificates(webpki_root_certs::TLS_SERVER_ROOT_CERTS.iter().cloned());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        Arc::new(config)
    });
    tokio_rustls::TlsConnector::from(config.clone())
}

/// A socket that writes only while its ticket is open; reads are not side effects and go on.
struct Fenced<S> {
    inner: S,
    ticket: Option<Ticket>,
}

impl<S> Fenced<S> {
    fn check(&self) -> std::io::Result<()> {
        match &self.ticket {
            Some(ticket) if !ticket.open() => Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "not the leader: the lease lapsed, nothing more is sent",
            )),
            _ => Ok(()),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Fenced<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Fenced<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.check()?;
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        self.check()?;
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn origin(host: &str, port: u16) -> Origin {
        Origin { scheme: Scheme::Http, host: host.into(), port, secret_headers: Vec::new() }
    }

    #[test]
    fn loopback_link_local_and_the_api_servers_addresses_are_refused_behind_a_name() {
        let unreachable = Unreachable::default();
        unreachable.set(vec!["10.0.0.1".parse().unwrap()]);
        for refused in [
            "127.0.0.1",
            "127.8.0.1",
            "::1",
            "169.254.169.254",
            "fe80::1",
            "0.0.0.0",
            "::ffff:127.0.0.1",
            "10.0.0.1",
            "::ffff:169.254.169.254",
        ] {
            assert!(unreachable.refuses(refused.parse().unwrap()).is_some(), "{refused} was allowed");
        }
        for allowed in ["10.0.0.2", "93.184.216.34", "2001:db8::1", "192.168.1.1"] {
            assert!(unreachable.refuses(allowed.parse().unwrap()).is_none(), "{allowed} was refused");
        }
    }

    #[tokio::test]
    async fn a_host_name_that_resolves_to_loopback_is_refused_unless_named_literally() {
        let unreachable = Unreachable::default();
        let err = addresses(&origin("localhost", 8080), &unreachable).await.unwrap_err();
        let Error::InternalError(Some(message)) = err else { panic!("{err:?}") };
        assert!(message.starts_with("localhost resolves to a loopback address"), "{message}");
        assert!(message.contains("names it literally"), "{message}");
        let literal = addresses(&origin("127.0.0.1", 8080), &unreachable).await.unwrap();
        assert_eq!(literal, vec!["127.0.0.1:8080".parse().unwrap()]);
    }

    /// A request whose task is polled only after its run's term ended writes nothing: the
    /// listener sees a connection, never a byte.
    #[tokio::test]
    async fn a_send_polled_after_the_term_ended_writes_no_byte() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = listener.local_addr().unwrap();
        let (terms, leading, fence) = crate::fence::tests_support::fence();
        crate::fence::tests_support::lead(&terms, &leading, Duration::from_secs(10));
        let ticket = fence.gate().unwrap().admit().unwrap();
        // The lease lapsed while the request waited in its task.
        terms.close();
        let request = http::Request::builder()
            .method("PUT")
            .uri(format!("http://127.0.0.1:{}/records/www", at.port()))
            .header(http::header::HOST, at.to_string())
            .body(http_body_util::Full::new(Bytes::from_static(b"{\"v\":2}")).map_err(|e| match e {}).boxed_unsync())
            .unwrap();
        let accepted = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut read = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut socket, &mut read).await.unwrap();
            read
        });
        let (to, addresses) = (origin("127.0.0.1", at.port()), [at]);
        let sending = send(request, &to, &addresses, Duration::from_secs(5), Some(ticket));
        let sent = tokio::time::timeout(Duration::from_secs(10), sending).await;
        assert!(matches!(sent, Ok(Err(_))), "the request was sent and waits for its answer");
        assert_eq!(accepted.await.unwrap(), Vec::<u8>::new(), "bytes reached the listener");
    }
}
