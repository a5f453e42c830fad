//! Certificates given as PEM files (`--webhook-cert`, `--webhook-key`, and `--webhook-ca` for
//! the CA bundle written into the webhook configurations; default: the certificate chain file),
//! read again when they change, as cert-manager and the kubelet rewrite a mounted Secret (by
//! swapping a symbolic link in their directory): their directories are watched, and a change
//! is read once the events have been quiet for [`SETTLE`]. A pair that does not load (half
//! written, a key of another certificate) is logged and the certificate served before stays.

use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{RecursiveMode, Watcher as _};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::serving::{self, PemError};

/// How long the files' events must be quiet before they are read again.
pub const SETTLE: Duration = Duration::from_millis(500);

/// How often the files are read again even without an event (a watch that missed one).
const BACKSTOP: Duration = Duration::from_secs(60);

/// The files of the given certificates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Files {
    /// The serving certificate chain, leaf first.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
    /// The CA bundle the API server is to trust; `None`: the certificate chain.
    pub ca: Option<PathBuf>,
}

/// Why the files cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// A file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The pair does not make a certificate to serve.
    #[error("{} and {}: {source}", cert.display(), key.display())]
    Pem {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// Why.
        #[source]
        source: PemError,
    },
}

/// What the files hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    /// The certificate chain (PEM).
    pub cert: Vec<u8>,
    /// The key (PEM).
    pub key: Vec<u8>,
    /// The CA bundle (PEM).
    pub bundle: Vec<u8>,
}

impl Files {
    /// Reads the files, checking that they make a certificate to serve.
    pub fn read(&self) -> Result<Read, FilesError> {
        let read = |path: &Path| std::fs::read(path).map_err(|source| FilesError::Read { path: path.into(), source });
        let (cert, key) = (read(&self.cert)?, read(&self.key)?);
        serving::certified(&cert, &key).map_err(|source| FilesError::Pem {
            cert: self.cert.clone(),
            key: self.key.clone(),
            source,
        })?;
        let bundle = match &self.ca {
            Some(ca) => read(ca)?,
            None => cert.clone(),
        };
        Ok(Read { cert, key, bundle })
    }

    /// Calls `changed` with what the files hold whenever that changes, from `first` on, until
    /// `shutdown`.
    pub async fn watch(self, first: Read, changed: impl Fn(&Read) + Send, shutdown: CancellationToken) {
        let (events, mut received) = mpsc::unbounded_channel();
        let watcher = notify::recommended_watcher(move |event| {
            // The receiver is gone only once the watch has stopped.
            let _ = events.send(event);
        });
        let mut watcher = match watcher {
            Ok(watcher) => Some(watcher),
            Err(err) => {
                tracing::error!(%err, "cannot watch the webhook certificate files; reading them every minute");
                None
            }
        };
        let mut dirs: Vec<&Path> = [Some(&self.cert), Some(&self.key), self.ca.as_ref()]
            .into_iter()
            .flatten()
            .map(|file| file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")))
            .collect();
        dirs.dedup();
        for dir in dirs {
            if let Some(watcher) = watcher.as_mut()
                && let Err(err) = watcher.watch(dir, RecursiveMode::NonRecursive)
            {
                tracing::error!(dir = %dir.display(), %err, "cannot watch the webhook certificate directory");
            }
        }
        let mut served = first;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                event = received.recv() => {
                    if event.is_none() {
                        return;
                    }
                    // Quiet first: a rewrite is several events.
                    loop {
                        tokio::select! {
                            () = shutdown.cancelled() => return,
                            () = tokio::time::sleep(SETTLE) => break,
                            more = received.recv() => if more.is_none() { return },
                        }
                    }
                }
                () = tokio::time::sleep(BACKSTOP) => {}
            }
            match self.read() {
                Ok(read) if read != served => {
                    tracing::info!(cert = %self.cert.display(), "webhook certificate files changed; serving them");
                    changed(&read);
                    served = read;
                }
                Ok(_) => {}
                Err(err) => tracing::warn!(%err, "webhook certificate files do not load; serving the ones before"),
            }
        }
    }
}
