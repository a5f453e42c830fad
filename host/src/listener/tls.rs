//! TLS for the listeners: a certificate chain and its private key in PEM files
//! (`--events-tls-cert`, `--events-tls-key`, `--webhook-cert`, `--webhook-key`), served with
//! rustls (ring). Handshakes run beside the accept loop, each bounded in time, so a slow client
//! holds up no one.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::server::TlsStream;

/// How long a client may take to complete its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How many handshakes may be under way at once; more connections wait in the kernel's backlog.
const MAX_HANDSHAKES: usize = 256;

/// The PEM files of the listener's certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, leaf first.
    pub cert: PathBuf,
    /// The certificate's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// Why the listener's TLS configuration cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate file cannot be read or parsed.
    #[error("cannot read the certificate chain {}: {source}", path.display())]
    Certificate {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: tokio_rustls::rustls::pki_types::pem::Error,
    },
    /// The certificate file holds no certificate.
    #[error("{} holds no PEM certificate", path.display())]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// The key file cannot be read or parsed, or holds no private key.
    #[error("cannot read the private key {}: {source}", path.display())]
    Key {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: tokio_rustls::rustls::pki_types::pem::Error,
    },
    /// rustls refuses the pair (for example a key that is not the certificate's).
    #[error("the certificate and key do not make a TLS configuration: {0}")]
    Config(#[from] tokio_rustls::rustls::Error),
}

impl TlsFiles {
    /// The server configuration of these files: HTTP/1.1 over TLS 1.2 or 1.3, no client
    /// certificates (callers authenticate with their bearer token).
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, TlsError> {
        let certs = read_certificates(&self.cert)?;
        let key = PrivateKeyDer::from_pem_file(&self.key)
            .map_err(|source| TlsError::Key { path: self.key.clone(), source })?;
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(certs, key)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// The client configuration with which replicas forward events to each other: it trusts
    /// the certificates of the chain file alone (a self-signed certificate the replicas share,
    /// or the CA the chain includes), not the system's roots.
    pub fn client_config(&self) -> Result<tokio_rustls::rustls::ClientConfig, TlsError> {
        let mut roots = tokio_rustls::rustls::RootCertStore::empty();
        for cert in read_certificates(&self.cert)? {
            roots.add(cert)?;
        }
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let mut config = tokio_rustls::rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certificate = |source| TlsError::Certificate { path: path.to_path_buf(), source };
    let certs = CertificateDer::pem_file_iter(path).map_err(certificate)?;
    let certs = certs.collect::<Result<Vec<_>, _>>().map_err(certificate)?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { path: path.to_path_buf() });
    }
    Ok(certs)
}

/// A TCP listener whose connections are TLS: [`axum::serve`] gets them once their handshake is
/// done.
pub struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    handshakes: JoinSet<Option<(TlsStream<TcpStream>, SocketAddr)>>,
}

impl TlsListener {
    /// Serves TLS with `config` on the connections of `tcp`.
    pub fn new(tcp: TcpListener, config: Arc<ServerConfig>) -> Self {
        Self { tcp, acceptor: TlsAcceptor::from(config), handshakes: JoinSet::new() }
    }

    /// Starts the handshake of a new connection.
    fn handshake(&mut self, stream: TcpStream, peer: SocketAddr) {
        let acceptor = self.acceptor.clone();
        self.handshakes.spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => Some((tls, peer)),
                Ok(Err(err)) => {
                    tracing::debug!(%peer, %err, "TLS handshake failed");
                    None
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    None
                }
            }
        });
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    /// The next connection whose handshake succeeded. Cancel-safe: accepted connections and
    /// handshakes under way stay with the listener.
    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            tokio::select! {
                accepted = self.tcp.accept(), if self.handshakes.len() < MAX_HANDSHAKES => match accepted {
                    Ok((stream, peer)) => self.handshake(stream, peer),
                    Err(err) => accept_failed(err).await,
                },
                Some(done) = self.handshakes.join_next(), if !self.handshakes.is_empty() => {
                    if let Ok(Some(connection)) = done {
                        return connection;
                    }
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

/// After a failed accept: a connection the client gave up is nothing; anything else (out of file
/// descriptors) is logged and waited out, as axum's own listener does.
async fn accept_failed(err: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(err.kind(), ConnectionRefused | ConnectionAborted | ConnectionReset) {
        return;
    }
    tracing::error!(%err, "accept failed; trying again in a second");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn scratch(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("wasmop-tls-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn files_without_a_certificate_or_key_are_refused_by_name() {
        let dir = scratch("refused");
        let empty = write(&dir, "empty.pem", "");
        let files = TlsFiles { cert: empty.clone(), key: empty.clone() };
        let err = files.server_config().unwrap_err();
        assert!(matches!(err, TlsError::NoCertificate { .. }), "{err}");
        assert!(err.to_string().contains("empty.pem holds no PEM certificate"), "{err}");
        let missing = TlsFiles { cert: dir.join("missing.pem"), key: empty };
        let err = missing.server_config().unwrap_err();
        assert!(err.to_string().starts_with("cannot read the certificate chain"), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
