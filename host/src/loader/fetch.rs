//! Fetches a module named by a `ReconcilerPlugin`: from a ConfigMap's `binaryData`, a file on
//! the host, an https URL or an OCI registry ([`oci`](super::oci)), checking its sha256 whenever
//! one is given (always, for URLs; OCI references carry their manifest's digest).
//!
//! Nothing a resource names can make the host read without bound: files must be regular files
//! inside the directories the operator allows (`--allow-module-dir`), and are read on the
//! blocking pool; downloads time out; both stop reading past [`MAX_MODULE_BYTES`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::cap::{MAX_MODULE_BYTES, read_capped, too_large};
use super::oci::{Credentials, OciRef, Registries};

/// How long a download may take to connect, and in all.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(60);

/// What the operator lets `ReconcilerPlugin` resources fetch: the directories `file` sources may
/// lie in (none by default, which refuses file sources), and the HTTP client of downloads.
#[derive(Debug, Clone, Default)]
pub struct FetchPolicy {
    /// Canonical directories.
    allowed_dirs: Vec<PathBuf>,
    http: reqwest::Client,
    registries: Registries,
}

impl FetchPolicy {
    /// A policy allowing files under `dirs` (each must exist), with the default timeouts.
    pub fn new(dirs: &[PathBuf]) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(DOWNLOAD_TIMEOUT)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        let allowed_dirs = dirs
            .iter()
            .map(|d| d.canonicalize().map_err(|e| format!("module directory {}: {e}", d.display())))
            .collect::<Result<_, _>>()?;
        Ok(Self { allowed_dirs, http, registries: Registries::default() })
    }

    /// This policy, pulling OCI modules as `registries` says (plain http registries, the store).
    pub fn with_registries(self, registries: Registries) -> Self {
        Self { registries, ..self }
    }
}

/// Why a module cannot be had: a CamelCase reason (the `Degraded` condition's) and a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FetchError {
    /// `FetchFailed` for ConfigMaps, files and URLs; an OCI pull's [`Reason`](super::oci::Reason).
    pub reason: &'static str,
    /// What went wrong.
    pub message: String,
}

impl From<String> for FetchError {
    fn from(message: String) -> Self {
        Self { reason: "FetchFailed", message }
    }
}

impl From<super::oci::PullError> for FetchError {
    fn from(err: super::oci::PullError) -> Self {
        Self { reason: err.reason.as_str(), message: err.message }
    }
}

/// A fetched module.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// For an OCI module, whether it was `stored` already or `pulled`.
    pub pulled: Option<super::oci::Outcome>,
}

/// A ConfigMap key holding a module.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ConfigMapKey {
    /// The ConfigMap's namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The key in its `binaryData`.
    pub key: String,
}

/// `spec.module` of a `ReconcilerPlugin`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModuleSpec {
    /// A key of a ConfigMap's `binaryData`.
    pub config_map: Option<ConfigMapKey>,
    /// A path on the host.
    pub file: Option<PathBuf>,
    /// An https URL.
    pub url: Option<String>,
    /// An OCI reference with its manifest's digest: `registry/repository[:tag]@sha256:<hex>`.
    pub oci: Option<String>,
    /// The module's sha256, hex encoded.
    pub sha256: Option<String>,
}

/// Where a module is, once the spec is validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A ConfigMap key.
    ConfigMap(ConfigMapKey),
    /// A file on the host.
    File(PathBuf),
    /// An https URL.
    Url(String),
    /// An OCI artifact.
    Oci(OciRef),
}

impl ModuleSpec {
    /// The one location the spec names, or why it is unusable.
    pub fn location(&self) -> Result<Location, FetchError> {
        let given = [self.config_map.is_some(), self.file.is_some(), self.url.is_some(), self.oci.is_some()];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(FetchError::from("spec.module needs exactly one of configMap, file, url and oci".to_string()));
        }
        if let Some(oci) = &self.oci {
            return Ok(Location::Oci(OciRef::parse(oci)?));
        }
        if let Some(url) = &self.url {
            if !url.starts_with("https://") {
                return Err(format!("spec.module.url {url:?} must be an https URL").into());
            }
            if self.sha256.is_none() {
                return Err("spec.module.url needs spec.module.sha256".to_string().into());
            }
            return Ok(Location::Url(url.clone()));
        }
        Ok(match (&self.config_map, &self.file) {
            (Some(key), _) => Location::ConfigMap(key.clone()),
            (_, Some(file)) => Location::File(file.clone()),
            _ => unreachable!("exactly one location is given"),
        })
    }

    /// The module's bytes, checked against `sha256` when given; an OCI module is pulled with
    /// `credentials`.
    pub async fn fetch(
        &self,
        client: &Client,
        policy: &FetchPolicy,
        credentials: &Credentials,
    ) -> Result<Fetched, FetchError> {
        let mut pulled = None;
        let bytes = match self.location()? {
            Location::ConfigMap(key) => {
                let api: Api<ConfigMap> = Api::namespaced(client.clone(), &key.namespace);
                let map = api
                    .get_opt(&key.name)
                    .await
                    .map_err(|e| format!("cannot read ConfigMap {}/{}: {e}", key.namespace, key.name))?
                    .ok_or_else(|| format!("ConfigMap {}/{} does not exist", key.namespace, key.name))?;
                let data = map.binary_data.and_then(|mut d| d.remove(&key.key)).ok_or_else(|| {
                    format!("ConfigMap {}/{} has no binaryData key {:?}", key.namespace, key.name, key.key)
                })?;
                data.0
            }
            Location::File(path) => {
                let allowed = policy.allowed_dirs.clone();
                tokio::task::spawn_blocking(move || read_file(&path, &allowed))
                    .await
                    .map_err(|e| format!("reading the module failed: {e}"))??
            }
            Location::Url(url) => download(&policy.http, &url).await?,
            Location::Oci(oci) => {
                let (bytes, outcome) = policy.registries.pull(&oci, credentials).await?;
                pulled = Some(outcome);
                bytes
            }
        };
        if bytes.len() > MAX_MODULE_BYTES {
            return Err(too_large().into());
        }
        if let Some(expected) = &self.sha256 {
            verify(&bytes, expected)?;
        }
        Ok(Fetched { bytes, pulled })
    }

    /// The digest that pins the module, when the spec names one: an OCI reference's manifest
    /// digest, else `sha256` (lower case).
    pub fn pinned(&self) -> Option<String> {
        match &self.oci {
            Some(oci) => OciRef::parse(oci).ok().map(|r| r.digest().to_string()),
            None => self.sha256.as_ref().map(|s| s.trim().to_ascii_lowercase()),
        }
    }
}

/// Reads the regular file `path`, which must lie in one of the `allowed` (canonical)
/// directories once links and `..` are resolved, up to [`MAX_MODULE_BYTES`]. Blocking.
fn read_file(path: &Path, allowed: &[PathBuf]) -> Result<Vec<u8>, String> {
    if allowed.is_empty() {
        return Err(format!(
            "spec.module.file {} is refused: this host allows no module directory (--allow-module-dir)",
            path.display()
        ));
    }
    let real = path.canonicalize().map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if !allowed.iter().any(|dir| real.starts_with(dir)) {
        let dirs: Vec<String> = allowed.iter().map(|d| d.display().to_string()).collect();
        return Err(format!(
            "{} is outside the module directories this host allows ({})",
            path.display(),
            dirs.join(", ")
        ));
    }
    let file = std::fs::File::open(&real).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let meta = file.metadata().map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    read_capped(file).map_err(|e| format!("{}: {e}", path.display()))
}

/// Downloads `url` with `http` (which has the timeouts), stopping past [`MAX_MODULE_BYTES`].
async fn download(http: &reqwest::Client, url: &str) -> Result<Vec<u8>, String> {
    let failed = |e: reqwest::Error| {
        let mut message = format!("cannot fetch {url}: {e}");
        let mut source = std::error::Error::source(&e);
        while let Some(cause) = source {
            message = format!("{message}: {cause}");
            source = cause.source();
        }
        message
    };
    let mut response = http.get(url).send().await.and_then(|r| r.error_for_status()).map_err(failed)?;
    if response.content_length().is_some_and(|length| length > MAX_MODULE_BYTES as u64) {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(failed)? {
        if bytes.len() + chunk.len() > MAX_MODULE_BYTES {
            return Err(too_large());
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// Checks that `bytes` have the sha256 `expected` (hex, any case).
pub fn verify(bytes: &[u8], expected: &str) -> Result<(), String> {
    let actual = hex::encode(Sha256::digest(bytes));
    if actual.eq_ignore_ascii_case(expected.trim()) {
        Ok(())
    } else {
        Err(format!("the module's sha256 is {actual}, not the expected {expected}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_location_and_urls_need_https_and_a_digest() {
        let none = ModuleSpec::default();
        assert!(none.location().unwrap_err().message.contains("exactly one"));
        let file = ModuleSpec { file: Some("/m.wasm".into()), ..ModuleSpec::default() };
        assert_eq!(file.location(), Ok(Location::File("/m.wasm".into())));
        let both = ModuleSpec { url: Some("https://x/m.wasm".into()), ..file.clone() };
        assert!(both.location().is_err());
        let plain = ModuleSpec { url: Some("http://x/m.wasm".into()), sha256: Some("ab".into()), ..Default::default() };
        assert!(plain.location().unwrap_err().message.contains("https"));
        let unpinned = ModuleSpec { url: Some("https://x/m.wasm".into()), ..Default::default() };
        assert!(unpinned.location().unwrap_err().message.contains("sha256"));
        let pinned = ModuleSpec { sha256: Some("ab".into()), ..unpinned };
        assert_eq!(pinned.location(), Ok(Location::Url("https://x/m.wasm".into())));
    }

    #[test]
    fn the_digest_must_match() {
        let digest = hex::encode(Sha256::digest(b"module"));
        assert_eq!(verify(b"module", &digest.to_uppercase()), Ok(()));
        assert!(verify(b"other", &digest).unwrap_err().contains("not the expected"));
    }

    #[test]
    fn files_must_be_regular_files_in_an_allowed_directory() {
        let dir = std::env::temp_dir().join(format!("wasmop-fetch-{}", std::process::id()));
        let inside = dir.join("allowed");
        std::fs::create_dir_all(&inside).unwrap();
        std::fs::write(inside.join("m.wasm"), b"module").unwrap();
        std::fs::write(dir.join("secret"), b"secret").unwrap();
        let allowed = [inside.canonicalize().unwrap()];
        assert_eq!(read_file(&inside.join("m.wasm"), &allowed), Ok(b"module".to_vec()));
        let escape = read_file(&inside.join("../secret"), &allowed).unwrap_err();
        assert!(escape.contains("outside the module directories"), "{escape}");
        std::os::unix::fs::symlink(dir.join("secret"), inside.join("link")).unwrap();
        let link = read_file(&inside.join("link"), &allowed).unwrap_err();
        assert!(link.contains("outside the module directories"), "{link}");
        let none = read_file(&inside.join("m.wasm"), &[]).unwrap_err();
        assert!(none.contains("allows no module directory"), "{none}");
        let device = read_file(Path::new("/dev/zero"), &[PathBuf::from("/dev")]).unwrap_err();
        assert!(device.contains("not a regular file"), "{device}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A loopback HTTP server that answers every request with `head` and then `body` bytes
    /// (endless when `None`), or never answers when `head` is empty. Returns its URL.
    async fn server(head: &'static str, body: Option<usize>) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/m.wasm", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !request.ends_with(b"\r\n\r\n") {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    if head.is_empty() {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                    }
                    let _ = socket.write_all(head.as_bytes()).await;
                    let chunk = vec![0u8; 1 << 16];
                    let mut left = body.unwrap_or(usize::MAX);
                    while left > 0 && socket.write_all(&chunk[..left.min(chunk.len())]).await.is_ok() {
                        left = left.saturating_sub(chunk.len());
                    }
                });
            }
        });
        url
    }

    #[tokio::test]
    async fn downloads_stop_past_the_cap_and_time_out() {
        let policy = FetchPolicy::new(&[]).unwrap();
        let small = server("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", Some(1000)).await;
        assert_eq!(download(&policy.http, &small).await.unwrap().len(), 1000);
        let endless = server("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", None).await;
        let err = download(&policy.http, &endless).await.unwrap_err();
        assert!(err.contains("larger than"), "{err}");
        let declared = server("HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\n", Some(0)).await;
        let err = download(&policy.http, &declared).await.unwrap_err();
        assert!(err.contains("larger than"), "{err}");
        let quick = reqwest::Client::builder().timeout(Duration::from_millis(300)).build().unwrap();
        let silent = server("", None).await;
        let err = download(&quick, &silent).await.unwrap_err();
        assert!(err.contains("timed out"), "{err}");
    }
}
