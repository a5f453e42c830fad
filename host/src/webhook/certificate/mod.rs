//! The webhook endpoint's certificates: given as files ([`files`]) or managed by the host in a
//! Secret ([`managed`], certificates made by [`issue`]). Either way the endpoint serves the
//! current certificate through [`serving::Serving`], swapped without a restart, and the CA
//! bundle the API server is to trust is published for the webhook configurations
//! ([`Certificates::bundle`]).

pub mod files;
pub mod issue;
pub mod managed;
pub mod serving;

use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use files::{Files, FilesError};
use managed::{Managed, ManagedError};
use serving::{PemError, Serving};

/// Where the certificates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// PEM files, read again when they change.
    Files(Files),
    /// The host's own, in a Secret.
    Managed(Managed),
}

/// Why the endpoint has no certificate to serve.
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    /// The files do not load.
    #[error(transparent)]
    Files(#[from] FilesError),
    /// The Secret cannot be had.
    #[error(transparent)]
    Managed(#[from] ManagedError),
    /// The certificate in the Secret does not load.
    #[error("the webhook certificate in the Secret: {0}")]
    Pem(#[from] PemError),
}

/// The endpoint's certificates, kept current by a task until the shutdown.
pub struct Certificates {
    /// What the endpoint serves.
    pub serving: Arc<Serving>,
    /// The CA bundle (PEM) the API server is to trust, as it changes.
    pub bundle: watch::Receiver<Vec<u8>>,
}

impl Certificates {
    /// Reads or makes the certificates of `source` (the Secret through `client`), and keeps them
    /// current until `shutdown`.
    pub async fn start(
        source: Source,
        client: &kube::Client,
        shutdown: CancellationToken,
    ) -> Result<Self, CertificateError> {
        match source {
            Source::Files(files) => {
                let first = files.read()?;
                let serving = Serving::new(serving::certified(&first.cert, &first.key)?);
                let (bundle, published) = watch::channel(first.bundle.clone());
                let served = serving.clone();
                let changed = move |read: &files::Read| {
                    if let Ok(certified) = serving::certified(&read.cert, &read.key) {
                        served.replace(certified);
                    }
                    bundle.send_if_modified(|current| std::mem::replace(current, read.bundle.clone()) != read.bundle);
                };
                tokio::spawn(files.watch(first, changed, shutdown));
                Ok(Self { serving, bundle: published })
            }
            Source::Managed(managed) => {
                let held = managed.ensure(client).await?;
                let serving = Serving::new(serving::certified(held.cert.as_bytes(), held.key.as_bytes())?);
                let (bundle, published) = watch::channel(held.bundle.clone().into_bytes());
                tokio::spawn(keep_current(managed, client.clone(), held, serving.clone(), bundle, shutdown));
                Ok(Self { serving, bundle: published })
            }
        }
    }
}

/// Reads the Secret again every [`managed::RECHECK`], renewing what is due, and serves and
/// publishes what changed, until `shutdown`.
async fn keep_current(
    managed: Managed,
    client: kube::Client,
    mut held: managed::Held,
    serving: Arc<Serving>,
    bundle: watch::Sender<Vec<u8>>,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(managed::RECHECK) => {}
        }
        let now = match managed.ensure(&client).await {
            Ok(now) => now,
            Err(err) => {
                tracing::warn!(%err, "cannot check the webhook certificates; serving the ones held");
                continue;
            }
        };
        if now.cert != held.cert {
            match serving::certified(now.cert.as_bytes(), now.key.as_bytes()) {
                Ok(certified) => serving.replace(certified),
                Err(err) => {
                    tracing::warn!(%err, "the renewed webhook certificate does not load; serving the one held");
                    continue;
                }
            }
        }
        if now.bundle != held.bundle {
            bundle.send_replace(now.bundle.clone().into_bytes());
        }
        held = now;
    }
}
