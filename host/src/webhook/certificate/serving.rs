//! The endpoint's serving certificate: a rustls certificate resolver whose certificate is
//! swapped in place when the files are rewritten or the host rotates it; connections made
//! after the swap get the new one, those open keep theirs. No restart, no closed listener.

use std::sync::{Arc, RwLock};

use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;

/// Why a certificate and key cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum PemError {
    /// The certificate chain cannot be parsed.
    #[error("cannot read the certificate chain: {0}")]
    Certificate(#[source] tokio_rustls::rustls::pki_types::pem::Error),
    /// The chain holds no certificate.
    #[error("the certificate chain holds no PEM certificate")]
    NoCertificate,
    /// The key cannot be parsed.
    #[error("cannot read the private key: {0}")]
    Key(#[source] tokio_rustls::rustls::pki_types::pem::Error),
    /// rustls cannot sign with the key.
    #[error("the private key is not usable: {0}")]
    Unusable(#[from] tokio_rustls::rustls::Error),
}

/// The certificate chain `cert` (PEM, leaf first) with its private key `key` (PEM), ready to
/// serve.
pub fn certified(cert: &[u8], key: &[u8]) -> Result<Arc<CertifiedKey>, PemError> {
    let chain = CertificateDer::pem_slice_iter(cert).collect::<Result<Vec<_>, _>>().map_err(PemError::Certificate)?;
    if chain.is_empty() {
        return Err(PemError::NoCertificate);
    }
    let key = PrivateKeyDer::from_pem_slice(key).map_err(PemError::Key)?;
    let signing = ring::default_provider().key_provider.load_private_key(key)?;
    let certified = CertifiedKey::new(chain, signing);
    // A key that is not the certificate's is refused here, not at the first handshake.
    certified.keys_match()?;
    Ok(Arc::new(certified))
}

/// The certificate the endpoint serves now.
#[derive(Debug)]
pub struct Serving {
    current: RwLock<Arc<CertifiedKey>>,
}

impl Serving {
    /// Serves `first` until it is replaced.
    pub fn new(first: Arc<CertifiedKey>) -> Arc<Self> {
        Arc::new(Self { current: RwLock::new(first) })
    }

    /// Serves `next` from the next handshake on.
    pub fn replace(&self, next: Arc<CertifiedKey>) {
        *self.current.write().expect("never poisoned") = next;
    }

    /// The server configuration that serves this certificate: HTTP/1.1 over TLS 1.2 or 1.3, no
    /// client certificates.
    pub fn server_config(self: &Arc<Self>) -> Result<Arc<ServerConfig>, tokio_rustls::rustls::Error> {
        let provider = Arc::new(ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

impl ResolvesServerCert for Serving {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().expect("never poisoned").clone())
    }
}
