//! Modules from OCI registries: `spec.module.oci: registry/repository:tag@sha256:<hex>`.
//!
//! The digest names the manifest and is required: a tag alone is refused, so what runs never
//! changes behind the resource's back. The host fetches the manifest (by its tag when one is
//! given, which must then name the pinned digest; else by the digest), checks the manifest's
//! bytes against the digest, checks that it has the Wasm OCI artifact layout, downloads its one
//! layer with a cap of [`MAX_MODULE_BYTES`] and checks the layer's sha256; the manifest is read
//! with a cap of 4 MiB ([`manifest`]), and the whole pull (token, manifest and layer) must end
//! within [`PULL_DEADLINE`] (else `Unreachable`). The module is then
//! stored by the manifest's digest under the host's cache directory ([`Registries::store`]): a
//! later pull of the same digest reads the stored copy (checking both digests again) and asks the
//! registry nothing, so a tag that is moved or deleted afterwards changes nothing.
//!
//! The layout is the one of the CNCF TAG Runtime's Wasm OCI artifact, as `wkg oci push` (and the
//! `oci-wasm` crate) write it: an OCI image manifest whose config has the media type
//! [`WASM_CONFIG_MEDIA_TYPE`] and whose one layer, [`WASM_LAYER_MEDIA_TYPE`], is the component's
//! bytes. Anything else is refused with [`Reason::WrongMediaType`], naming what it found. In
//! particular:
//! - `application/vnd.oci.image.config.v1+json` configs are container images (runwasi's Wasm
//!   images carry the module inside a tar layer), not a component to load as is;
//! - the older `application/vnd.wasm.config.v1+json` config with an
//!   `application/vnd.wasm.content.layer.v1+wasm` layer (wasm-to-oci, Kubewarden policies) is a
//!   different layout for core modules, not components;
//! - Spin's applications (`application/vnd.fermyon.spin.application.v1+config`) have many
//!   layers and a manifest of their own.
//!
//! Credentials come from `kubernetes.io/dockerconfigjson` Secrets ([`Credentials`]), as a pod's
//! imagePullSecrets; a registry that no Secret names is asked anonymously. Registries are spoken
//! to over https, except those the operator lists as insecure (`--insecure-registry`).

mod manifest;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{OCI_IMAGE_INDEX_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::cap::MAX_MODULE_BYTES;
pub use manifest::MAX_MANIFEST_BYTES;
use manifest::{ManifestError, ManifestRequest};

/// The media type of the config of a Wasm OCI artifact.
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The media type of its one layer: the component's bytes.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";

/// How long connecting to a registry, and reading one chunk of an answer, may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a whole pull from a registry may take: its token, its manifest and its module.
pub const PULL_DEADLINE: Duration = Duration::from_secs(120);

/// Why a pull failed: the `reason` of the resource's `Degraded` condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// `spec.module.oci` is not a reference with a sha256 digest.
    InvalidReference,
    /// No connection to the registry (refused, DNS, TLS, timeout), or a pull slower than its
    /// deadline.
    Unreachable,
    /// The registry refused the credentials, or wants some and none were given.
    Unauthorized,
    /// The registry has no such repository, tag or manifest.
    NotFound,
    /// The manifest or the layer is not what the pinned digest says.
    DigestMismatch,
    /// The module is larger than [`MAX_MODULE_BYTES`], or the manifest than
    /// [`MAX_MANIFEST_BYTES`].
    TooLarge,
    /// Not the Wasm OCI artifact layout.
    WrongMediaType,
    /// The registry wants credentials and a pull secret cannot be read or is not a docker config.
    PullSecret,
    /// Anything else the registry or the transport answered.
    PullFailed,
}

impl Reason {
    /// The CamelCase name of the reason, as conditions and metrics carry it.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::InvalidReference => "InvalidReference",
            Reason::Unreachable => "Unreachable",
            Reason::Unauthorized => "Unauthorized",
            Reason::NotFound => "NotFound",
            Reason::DigestMismatch => "DigestMismatch",
            Reason::TooLarge => "TooLarge",
            Reason::WrongMediaType => "WrongMediaType",
            Reason::PullSecret => "PullSecretInvalid",
            Reason::PullFailed => "PullFailed",
        }
    }
}

/// A failed pull: its reason and what went wrong, in the registry's words where it gave some.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PullError {
    /// Why.
    pub reason: Reason,
    /// What went wrong.
    pub message: String,
}

impl PullError {
    fn new(reason: Reason, message: impl Into<String>) -> Self {
        Self { reason, message: message.into() }
    }
}

/// A validated `spec.module.oci`: a reference with a sha256 digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciRef {
    reference: Reference,
    /// `sha256:<64 lowercase hex>`.
    digest: String,
}

impl OciRef {
    /// Parses `text`, which must carry `@sha256:<64 hex digits>`.
    pub fn parse(text: &str) -> Result<Self, PullError> {
        let invalid = |why: String| PullError::new(Reason::InvalidReference, why);
        let reference: Reference =
            text.parse().map_err(|e| invalid(format!("spec.module.oci {text:?} is not an OCI reference: {e}")))?;
        let Some(digest) = reference.digest() else {
            return Err(invalid(format!(
                "spec.module.oci {text:?} has no digest: name the manifest with @sha256:<digest> (a tag alone \
                 may move)"
            )));
        };
        let hex = digest.strip_prefix("sha256:").unwrap_or("");
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(invalid(format!(
                "spec.module.oci {text:?}: the digest must be sha256:<64 lowercase hex digits>"
            )));
        }
        let digest = digest.to_string();
        Ok(Self { reference, digest })
    }

    /// The manifest's digest, `sha256:<hex>`.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The registry's host (and port), as the reference names it.
    pub fn registry(&self) -> &str {
        self.reference.registry()
    }

    /// What the manifest is fetched by: the tag when there is one (it must name the digest),
    /// else the digest.
    fn manifest_reference(&self) -> Reference {
        let (registry, repository) = (self.reference.registry().to_string(), self.reference.repository().to_string());
        match self.reference.tag() {
            Some(tag) => Reference::with_tag(registry, repository, tag.to_string()),
            None => Reference::with_digest(registry, repository, self.digest.clone()),
        }
    }
}

impl std::fmt::Display for OciRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.reference.whole())
    }
}

/// Registry credentials by registry host, from docker config files (`~/.docker/config.json`, the
/// `.dockerconfigjson` key of a `kubernetes.io/dockerconfigjson` Secret).
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    /// Username and password by registry host (scheme and path removed).
    by_registry: BTreeMap<String, (String, String)>,
}

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, DockerAuth>,
}

#[derive(Deserialize)]
struct DockerAuth {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

impl Credentials {
    /// Adds the credentials of the docker config JSON `text` (`{"auths": {"HOST": {"auth":
    /// base64("USER:PASSWORD")}}}`, or `username` and `password` fields); earlier ones win.
    pub fn add_docker_config(&mut self, text: &[u8]) -> Result<(), String> {
        use base64::Engine as _;
        let config: DockerConfig = serde_json::from_slice(text).map_err(|e| format!("not a docker config: {e}"))?;
        for (host, auth) in config.auths {
            let pair = match (auth.username, auth.password, auth.auth) {
                (Some(user), Some(password), _) => (user, password),
                (_, _, Some(encoded)) => {
                    let decoded = base64::engine::general_purpose::STANDARD
                        .decode(encoded.trim())
                        .map_err(|e| format!("the auth of {host} is not base64: {e}"))?;
                    let decoded = String::from_utf8(decoded).map_err(|_| format!("the auth of {host} is not text"))?;
                    let (user, password) =
                        decoded.split_once(':').ok_or_else(|| format!("the auth of {host} is not USER:PASSWORD"))?;
                    (user.to_string(), password.to_string())
                }
                _ => continue,
            };
            self.by_registry.entry(registry_host(&host)).or_insert(pair);
        }
        Ok(())
    }

    /// Adds `username` and `password` for `registry`, before any other.
    pub fn insert(&mut self, registry: &str, username: String, password: String) {
        self.by_registry.insert(registry_host(registry), (username, password));
    }

    /// Whether any credentials are known for `registry`.
    pub fn has(&self, registry: &str) -> bool {
        self.by_registry.contains_key(&registry_host(registry))
    }

    fn auth(&self, registry: &str) -> RegistryAuth {
        match self.by_registry.get(&registry_host(registry)) {
            Some((user, password)) => RegistryAuth::Basic(user.clone(), password.clone()),
            None => RegistryAuth::Anonymous,
        }
    }
}

/// A docker config key as a registry host: `https://index.docker.io/v1/` is `docker.io`.
fn registry_host(key: &str) -> String {
    let host = key.split_once("://").map_or(key, |(_, rest)| rest);
    let host = host.split('/').next().unwrap_or(host).to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" => "docker.io".to_string(),
        _ => host,
    }
}

/// How the host speaks to registries: which are plain http, where pulled modules are stored,
/// and how long a pull may take.
#[derive(Debug, Clone)]
pub struct Registries {
    /// `HOST:PORT`s spoken to over plain http.
    insecure: Vec<String>,
    /// Where pulled modules are stored by digest; `None` stores nothing.
    store: Option<PathBuf>,
    /// How long one pull from a registry may take in all.
    deadline: Duration,
}

impl Default for Registries {
    /// https to every registry, nothing stored, pulls within [`PULL_DEADLINE`].
    fn default() -> Self {
        Self::new(Vec::new(), None)
    }
}

/// How a pull went, for the metrics: `stored` (read from the store), `pulled`, or a [`Reason`].
pub type Outcome = &'static str;

impl Registries {
    /// Speaks plain http to the `insecure` registries (`HOST:PORT`, as references name them) and
    /// https to every other; stores modules under `store`.
    pub fn new(insecure: Vec<String>, store: Option<PathBuf>) -> Self {
        Self { insecure, store, deadline: PULL_DEADLINE }
    }

    /// These registries, each pull from one ending within `deadline` rather than
    /// [`PULL_DEADLINE`].
    #[must_use]
    pub fn with_deadline(self, deadline: Duration) -> Self {
        Self { deadline, ..self }
    }

    /// The directory pulled modules are stored in.
    pub fn store(&self) -> Option<&Path> {
        self.store.as_deref()
    }

    /// A client with the host's timeouts, speaking http to the insecure registries.
    pub fn client(&self) -> Client {
        // reqwest is built without a crypto provider of its own: use ring, as the rest of the
        // host does. Installing fails harmlessly when one is installed already.
        let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
        Client::new(ClientConfig {
            protocol: if self.insecure.is_empty() {
                ClientProtocol::Https
            } else {
                ClientProtocol::HttpsExcept(self.insecure.clone())
            },
            connect_timeout: Some(CONNECT_TIMEOUT),
            read_timeout: Some(READ_TIMEOUT),
            platform_resolver: None,
            user_agent: USER_AGENT,
            extra_root_certificates: mozilla_roots().to_vec(),
            ..ClientConfig::default()
        })
    }

    /// The HTTP client of the manifest's request: as [`Registries::client`]'s (the same reqwest,
    /// timeouts and roots).
    fn manifest_http(&self) -> Result<oci_http::Client, PullError> {
        let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
        let roots = mozilla_roots().iter().map(oci_http::Certificate::try_from).collect::<Result<Vec<_>, _>>();
        let built = roots.and_then(|roots| {
            oci_http::Client::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .read_timeout(READ_TIMEOUT)
                .user_agent(USER_AGENT)
                .tls_certs_merge(roots)
                .build()
                .map_err(OciDistributionError::from)
        });
        built.map_err(|e| PullError::new(Reason::PullFailed, format!("cannot build the registry client: {e}")))
    }

    /// `http` for the insecure registries, else `https`.
    fn scheme(&self, reference: &Reference) -> &'static str {
        if self.insecure.iter().any(|r| r == reference.resolve_registry()) { "http" } else { "https" }
    }

    /// The module `oci` names: from the store when its digest is there, else pulled with
    /// `credentials`, checked and stored. Returns the module's bytes and how it went.
    pub async fn pull(&self, oci: &OciRef, credentials: &Credentials) -> Result<(Vec<u8>, Outcome), PullError> {
        if let Some(bytes) = self.stored(oci.digest()).await {
            return Ok((bytes, "stored"));
        }
        let pulled = tokio::time::timeout(self.deadline, self.pull_from_registry(oci, credentials)).await;
        let (manifest, module) = pulled.map_err(|_| {
            let deadline = humantime::format_duration(self.deadline);
            PullError::new(
                Reason::Unreachable,
                format!("pulling {oci} from registry {} took longer than the {deadline} allowed", oci.registry()),
            )
        })??;
        if let Some(dir) = &self.store
            && let Err(err) = write_stored(dir, oci.digest(), &manifest, &module).await
        {
            tracing::warn!(store = %dir.display(), %err, "cannot store the pulled module; it is pulled again next time");
        }
        Ok((module, "pulled"))
    }

    async fn pull_from_registry(
        &self,
        oci: &OciRef,
        credentials: &Credentials,
    ) -> Result<(Vec<u8>, Vec<u8>), PullError> {
        let client = self.client();
        let auth = credentials.auth(oci.registry());
        let with_credentials = !matches!(auth, RegistryAuth::Anonymous);
        let failed = |e: OciDistributionError| classify(oci, with_credentials, e);
        let reference = oci.manifest_reference();
        let request = ManifestRequest {
            http: &self.manifest_http()?,
            registry: &client,
            scheme: self.scheme(&reference),
            accepted: &[OCI_IMAGE_MEDIA_TYPE, OCI_IMAGE_INDEX_MEDIA_TYPE],
        };
        let manifest = request.pull(&reference, &auth).await.map_err(|e| match e {
            ManifestError::Registry(e) => failed(e),
            ManifestError::TooLarge => PullError::new(Reason::TooLarge, format!("{oci}: {e}")),
        })?;
        let actual = format!("sha256:{}", hex::encode(Sha256::digest(&manifest)));
        if actual != oci.digest() {
            let by = reference.tag().map_or_else(|| "the digest".to_string(), |tag| format!("tag {tag:?}"));
            return Err(PullError::new(
                Reason::DigestMismatch,
                format!("{by} of {} names manifest {actual}, not the pinned {}", oci.registry(), oci.digest()),
            ));
        }
        let layer =
            wasm_layer(&manifest).map_err(|why| PullError::new(Reason::WrongMediaType, format!("{oci}: {why}")))?;
        if usize::try_from(layer.size).map_or(true, |size| size > MAX_MODULE_BYTES) {
            return Err(PullError::new(
                Reason::TooLarge,
                format!("the module of {oci} has {} bytes, more than the {MAX_MODULE_BYTES} allowed", layer.size),
            ));
        }
        let mut stream = client.pull_blob_stream(&reference, &layer).await.map_err(failed)?;
        let mut module = Vec::with_capacity(usize::try_from(layer.size).unwrap_or(0));
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| failed(OciDistributionError::IoError(e)))?;
            if module.len() + chunk.len() > MAX_MODULE_BYTES {
                return Err(PullError::new(
                    Reason::TooLarge,
                    format!("the module of {oci} is larger than the {MAX_MODULE_BYTES} bytes allowed"),
                ));
            }
            module.extend_from_slice(&chunk);
        }
        let actual = format!("sha256:{}", hex::encode(Sha256::digest(&module)));
        if actual != layer.digest {
            return Err(PullError::new(
                Reason::DigestMismatch,
                format!("the module of {oci} has the sha256 {actual}, not the layer's {}", layer.digest),
            ));
        }
        Ok((manifest, module))
    }

    /// The stored module of manifest `digest`, when the store has it and both digests check.
    async fn stored(&self, digest: &str) -> Option<Vec<u8>> {
        let dir = self.store.clone()?;
        let digest = digest.to_string();
        let read = tokio::task::spawn_blocking(move || read_stored(&dir, &digest)).await.ok()?;
        match read {
            Ok(found) => found,
            Err(err) => {
                tracing::warn!(%err, "discarding a stored module that does not check; pulling it again");
                None
            }
        }
    }

    /// Pushes `module` to `reference` (a tag) as a Wasm OCI artifact; returns the manifest's
    /// digest. The config records no time (the Unix epoch), so the same module pushed twice
    /// has the same digest.
    pub async fn push(&self, reference: &str, module: Vec<u8>, credentials: &Credentials) -> Result<String, PullError> {
        let reference: Reference = reference.parse().map_err(|e| {
            PullError::new(Reason::InvalidReference, format!("{reference:?} is not an OCI reference: {e}"))
        })?;
        if reference.digest().is_some() {
            return Err(PullError::new(
                Reason::InvalidReference,
                "push to a tag, not a digest: the registry computes it",
            ));
        }
        let layer_digest = format!("sha256:{}", hex::encode(Sha256::digest(&module)));
        let config = serde_json::json!({
            "created": "1970-01-01T00:00:00Z",
            "architecture": "wasm",
            "os": "wasip2",
            "layerDigests": [layer_digest],
        });
        let config = Config::new(serde_json::to_vec(&config).expect("JSON"), WASM_CONFIG_MEDIA_TYPE.to_string(), None);
        let layers = [ImageLayer::new(module, WASM_LAYER_MEDIA_TYPE.to_string(), None)];
        let mut manifest = OciImageManifest::build(&layers, &config, None);
        manifest.media_type = Some(OCI_IMAGE_MEDIA_TYPE.to_string());
        let auth = credentials.auth(reference.registry());
        let with_credentials = !matches!(auth, RegistryAuth::Anonymous);
        let target = OciRef { reference: reference.clone(), digest: String::new() };
        let failed = |e| classify(&target, with_credentials, e);
        let client = self.client();
        client.store_auth_if_needed(reference.resolve_registry(), &auth).await;
        let [layer] = layers;
        client.push_blob(&reference, layer.data, &manifest.layers[0].digest).await.map_err(failed)?;
        client.push_blob(&reference, config.data, &manifest.config.digest).await.map_err(failed)?;
        // The manifest's bytes are ours, so its digest is the sha256 of exactly what was pushed.
        let bytes = serde_json::to_vec(&manifest).expect("JSON");
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
        let content_type = http::HeaderValue::from_static(OCI_IMAGE_MEDIA_TYPE);
        client.push_manifest_raw(&reference, bytes, content_type).await.map_err(failed)?;
        Ok(digest)
    }
}

/// How the host introduces itself to registries.
const USER_AGENT: &str = concat!("wasmop/", env!("CARGO_PKG_VERSION"));

/// Mozilla's root certificates (`webpki-root-certs`), trusted besides the system's: the host's
/// container image has no system roots.
fn mozilla_roots() -> &'static [Certificate] {
    static ROOTS: std::sync::LazyLock<Vec<Certificate>> = std::sync::LazyLock::new(|| {
        webpki_root_certs::TLS_SERVER_ROOT_CERTS
            .iter()
            .map(|der| Certificate { encoding: CertificateEncoding::Der, data: der.to_vec() })
            .collect()
    });
    &ROOTS
}

/// The one layer of the Wasm OCI artifact `manifest`, or why it is not one.
fn wasm_layer(manifest: &[u8]) -> Result<OciDescriptor, String> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Probe {
        media_type: Option<String>,
    }
    let probe: Probe = serde_json::from_slice(manifest).map_err(|e| format!("the manifest is not JSON: {e}"))?;
    if let Some(media_type) = probe.media_type.as_deref().filter(|m| *m != OCI_IMAGE_MEDIA_TYPE) {
        return Err(format!("the manifest has the media type {media_type}, not {OCI_IMAGE_MEDIA_TYPE}"));
    }
    let manifest: OciImageManifest =
        serde_json::from_slice(manifest).map_err(|e| format!("the manifest is not an OCI image manifest: {e}"))?;
    if manifest.config.media_type != WASM_CONFIG_MEDIA_TYPE {
        return Err(format!(
            "the config has the media type {}, not {WASM_CONFIG_MEDIA_TYPE} (not a Wasm OCI artifact)",
            manifest.config.media_type
        ));
    }
    let [layer] = <[OciDescriptor; 1]>::try_from(manifest.layers)
        .map_err(|layers| format!("the manifest has {} layers; a Wasm OCI artifact has one", layers.len()))?;
    if layer.media_type != WASM_LAYER_MEDIA_TYPE {
        return Err(format!("the layer has the media type {}, not {WASM_LAYER_MEDIA_TYPE}", layer.media_type));
    }
    Ok(layer)
}

/// A client error as a [`PullError`], with the registry's own words where it gave some.
fn classify(oci: &OciRef, with_credentials: bool, err: OciDistributionError) -> PullError {
    let registry = oci.registry();
    let unauthorized = || {
        let why =
            if with_credentials { "refused the credentials given" } else { "wants credentials, and none were given" };
        PullError::new(Reason::Unauthorized, format!("registry {registry} {why}: {err}"))
    };
    match &err {
        OciDistributionError::UnauthorizedError { .. } | OciDistributionError::AuthenticationFailure(_) => {
            unauthorized()
        }
        OciDistributionError::ServerError { code: 401 | 403, .. } => unauthorized(),
        OciDistributionError::ServerError { code: 404, .. } | OciDistributionError::ImageManifestNotFoundError(_) => {
            PullError::new(Reason::NotFound, format!("registry {registry} has no {oci}: {err}"))
        }
        OciDistributionError::RegistryError { envelope, .. } => {
            let words: Vec<String> = envelope.errors.iter().map(|e| format!("{:?}: {}", e.code, e.message)).collect();
            let words = words.join("; ");
            let codes = || envelope.errors.iter().map(|e| &e.code);
            if codes().any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied)) {
                let why = if with_credentials {
                    "refused the credentials given"
                } else {
                    "wants credentials, and none were given"
                };
                PullError::new(Reason::Unauthorized, format!("registry {registry} {why}: {words}"))
            } else if codes().any(|c| {
                matches!(
                    c,
                    OciErrorCode::ManifestUnknown
                        | OciErrorCode::NameUnknown
                        | OciErrorCode::BlobUnknown
                        | OciErrorCode::NotFound
                )
            }) {
                PullError::new(Reason::NotFound, format!("registry {registry} has no {oci}: {words}"))
            } else {
                PullError::new(Reason::PullFailed, format!("registry {registry} answered: {words}"))
            }
        }
        OciDistributionError::RequestError(e) if e.is_connect() || e.is_timeout() => {
            PullError::new(Reason::Unreachable, format!("registry {registry} is unreachable: {}", chain(e)))
        }
        OciDistributionError::DigestError(_) => PullError::new(Reason::DigestMismatch, format!("{oci}: {err}")),
        OciDistributionError::RequestError(e) => {
            PullError::new(Reason::PullFailed, format!("pulling {oci} failed: {}", chain(e)))
        }
        _ => PullError::new(Reason::PullFailed, format!("pulling {oci} failed: {err}")),
    }
}

/// An error and its causes, joined by colons.
fn chain(err: &dyn std::error::Error) -> String {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message = format!("{message}: {text}");
        }
        source = cause.source();
    }
    message
}

/// Where the store keeps manifest `digest` and its module.
fn stored_paths(dir: &Path, digest: &str) -> (PathBuf, PathBuf) {
    let hex = digest.trim_start_matches("sha256:");
    (dir.join("manifests").join(hex), dir.join("modules").join(format!("{hex}.wasm")))
}

/// Reads the stored module of manifest `digest`: `Ok(None)` when the store does not have it, an
/// error when what it has does not check. Blocking.
fn read_stored(dir: &Path, digest: &str) -> Result<Option<Vec<u8>>, String> {
    let (manifest_path, module_path) = stored_paths(dir, digest);
    let Ok(manifest) = std::fs::read(&manifest_path) else { return Ok(None) };
    let Ok(module) = std::fs::read(&module_path) else { return Ok(None) };
    if format!("sha256:{}", hex::encode(Sha256::digest(&manifest))) != digest {
        return Err(format!("{} does not have the digest {digest}", manifest_path.display()));
    }
    let layer = wasm_layer(&manifest)?;
    if format!("sha256:{}", hex::encode(Sha256::digest(&module))) != layer.digest {
        return Err(format!("{} does not have the layer's digest {}", module_path.display(), layer.digest));
    }
    Ok(Some(module))
}

/// Stores `manifest` and `module` under `dir`, each written to a temporary file then renamed.
async fn write_stored(dir: &Path, digest: &str, manifest: &[u8], module: &[u8]) -> std::io::Result<()> {
    let (manifest_path, module_path) = stored_paths(dir, digest);
    for (path, bytes) in [(module_path, module), (manifest_path, manifest)] {
        let parent = path.parent().expect("stored paths have a parent");
        tokio::fs::create_dir_all(parent).await?;
        let temporary = path.with_extension(format!("tmp.{}", std::process::id()));
        tokio::fs::write(&temporary, bytes).await?;
        tokio::fs::rename(&temporary, &path).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn references_need_a_sha256_digest() {
        let pinned = OciRef::parse(&format!("127.0.0.1:5000/plugins/greeting:v1@{DIGEST}")).unwrap();
        assert_eq!(pinned.digest(), DIGEST);
        assert_eq!(pinned.registry(), "127.0.0.1:5000");
        assert_eq!(pinned.manifest_reference().tag(), Some("v1"));
        let untagged = OciRef::parse(&format!("registry.example/greeting@{DIGEST}")).unwrap();
        assert_eq!(untagged.manifest_reference().digest(), Some(DIGEST));
        let tag_only = OciRef::parse("127.0.0.1:5000/greeting:v1").unwrap_err();
        assert_eq!(tag_only.reason, Reason::InvalidReference);
        assert!(tag_only.message.contains("has no digest"), "{}", tag_only.message);
        let short = OciRef::parse("127.0.0.1:5000/greeting:v1@sha256:abc").unwrap_err();
        assert_eq!(short.reason, Reason::InvalidReference);
        let other = format!("127.0.0.1:5000/greeting@sha512:{}", "0".repeat(128));
        assert_eq!(OciRef::parse(&other).unwrap_err().reason, Reason::InvalidReference);
    }

    fn manifest(config: &str, layers: &[&str]) -> Vec<u8> {
        let layers: Vec<_> =
            layers.iter().map(|m| serde_json::json!({ "mediaType": m, "digest": DIGEST, "size": 10 })).collect();
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2, "mediaType": OCI_IMAGE_MEDIA_TYPE,
            "config": { "mediaType": config, "digest": DIGEST, "size": 2 }, "layers": layers,
        }))
        .unwrap()
    }

    #[test]
    fn only_the_wasm_artifact_layout_is_accepted() {
        let layer = wasm_layer(&manifest(WASM_CONFIG_MEDIA_TYPE, &[WASM_LAYER_MEDIA_TYPE])).unwrap();
        assert_eq!(layer.digest, DIGEST);
        let image = wasm_layer(&manifest("application/vnd.oci.image.config.v1+json", &[WASM_LAYER_MEDIA_TYPE]));
        assert!(image.unwrap_err().contains("not a Wasm OCI artifact"));
        let two = wasm_layer(&manifest(WASM_CONFIG_MEDIA_TYPE, &[WASM_LAYER_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE]));
        assert!(two.unwrap_err().contains("2 layers"));
        let old = wasm_layer(&manifest(WASM_CONFIG_MEDIA_TYPE, &["application/vnd.wasm.content.layer.v1+wasm"]));
        assert!(old.unwrap_err().contains("not application/wasm"));
        let index = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2, "mediaType": OCI_IMAGE_INDEX_MEDIA_TYPE, "manifests": [] }))
        .unwrap();
        assert!(wasm_layer(&index).unwrap_err().contains("image.index"));
    }

    #[test]
    fn credentials_come_from_docker_configs_by_registry_host() {
        let mut credentials = Credentials::default();
        let config = br#"{"auths": {
            "https://index.docker.io/v1/": { "auth": "dXNlcjpwYXNz" },
            "127.0.0.1:5000": { "username": "u", "password": "p:w" } }}"#;
        credentials.add_docker_config(config).unwrap();
        assert_eq!(credentials.auth("docker.io"), RegistryAuth::Basic("user".into(), "pass".into()));
        assert_eq!(credentials.auth("127.0.0.1:5000"), RegistryAuth::Basic("u".into(), "p:w".into()));
        assert_eq!(credentials.auth("ghcr.io"), RegistryAuth::Anonymous);
        assert!(credentials.add_docker_config(b"{").unwrap_err().contains("not a docker config"));
    }

    #[tokio::test]
    async fn an_https_registry_that_does_not_answer_is_unreachable() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let oci = OciRef::parse(&format!("127.0.0.1:{port}/greeting:v1@{DIGEST}")).unwrap();
        let err = Registries::default().pull(&oci, &Credentials::default()).await.unwrap_err();
        assert_eq!(err.reason, Reason::Unreachable, "{}", err.message);
        assert!(err.message.contains(&format!("https://127.0.0.1:{port}/v2/")), "{}", err.message);
    }

    /// How [`registry`] serves a manifest.
    #[derive(Clone, Copy)]
    enum Served {
        /// This many bytes, with no declared length, as fast as they are read.
        Huge(usize),
        /// One byte every so often, for ever.
        Trickled(Duration),
    }

    /// A loopback registry, spoken to over plain http, that asks for no credentials and serves
    /// every manifest as `served` says. Returns its `HOST:PORT` and where it tells how many bytes
    /// of a manifest it sent once it stopped sending (the client went away, or all were sent).
    async fn registry(served: Served) -> (String, tokio::sync::mpsc::UnboundedReceiver<usize>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let (sent, told) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let sent = sent.clone();
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buf = [0u8; 1024];
                    loop {
                        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                            match socket.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => request.extend_from_slice(&buf[..n]),
                            }
                        }
                        let end = request.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                        let head = String::from_utf8_lossy(&request[..end]).into_owned();
                        request.drain(..end);
                        if !head.contains("/manifests/") {
                            let answer =
                                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
                            if socket.write_all(answer.as_bytes()).await.is_err() {
                                return;
                            }
                            continue;
                        }
                        let answer = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: {OCI_IMAGE_MEDIA_TYPE}\r\nConnection: close\r\n\r\n"
                        );
                        if socket.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                        let mut total = 0;
                        match served {
                            Served::Huge(size) => {
                                let chunk = vec![b' '; 64 << 10];
                                while total < size && socket.write_all(&chunk).await.is_ok() {
                                    total += chunk.len();
                                }
                            }
                            Served::Trickled(every) => {
                                while socket.write_all(b" ").await.is_ok() {
                                    total += 1;
                                    tokio::time::sleep(every).await;
                                }
                            }
                        }
                        let _ = sent.send(total);
                        return;
                    }
                });
            }
        });
        (address, told)
    }

    #[tokio::test]
    async fn a_huge_manifest_is_read_only_up_to_the_cap() {
        let huge = 64 << 20;
        let (address, mut sent) = registry(Served::Huge(huge)).await;
        let oci = OciRef::parse(&format!("{address}/greeting:v1@{DIGEST}")).unwrap();
        let (registries, credentials) = (Registries::new(vec![address], None), Credentials::default());
        let pulled = tokio::time::timeout(Duration::from_secs(60), registries.pull(&oci, &credentials));
        let err = pulled.await.expect("an answer within a minute").unwrap_err();
        assert_eq!(err.reason, Reason::TooLarge, "{}", err.message);
        assert!(err.message.contains("larger than 4 MiB; reading stopped there"), "{}", err.message);
        // The client stopped reading at the cap: the registry could send what the sockets'
        // buffers hold past it, not the whole manifest.
        let sent = tokio::time::timeout(Duration::from_secs(60), sent.recv()).await.expect("the registry stopped");
        let sent = sent.expect("it told how much it sent");
        assert!(sent < huge / 2, "the registry sent {sent} bytes of the manifest; the cap is {MAX_MANIFEST_BYTES}");
    }

    #[tokio::test]
    async fn a_trickled_manifest_fails_at_the_pull_deadline() {
        let (address, _sent) = registry(Served::Trickled(Duration::from_millis(50))).await;
        let oci = OciRef::parse(&format!("{address}/greeting:v1@{DIGEST}")).unwrap();
        let registries = Registries::new(vec![address.clone()], None).with_deadline(Duration::from_secs(1));
        let credentials = Credentials::default();
        let pulled = tokio::time::timeout(Duration::from_secs(20), registries.pull(&oci, &credentials));
        let err = pulled.await.expect("an answer by the deadline").unwrap_err();
        assert_eq!(err.reason, Reason::Unreachable, "{}", err.message);
        assert_eq!(err.message, format!("pulling {oci} from registry {address} took longer than the 1s allowed"),);
    }

    #[test]
    fn the_store_checks_both_digests() {
        let dir = std::env::temp_dir().join(format!("wasmop-oci-store-{}", std::process::id()));
        let module = b"\0asm module".to_vec();
        let layer = format!("sha256:{}", hex::encode(Sha256::digest(&module)));
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2, "mediaType": OCI_IMAGE_MEDIA_TYPE,
            "config": { "mediaType": WASM_CONFIG_MEDIA_TYPE, "digest": DIGEST, "size": 2 },
            "layers": [{ "mediaType": WASM_LAYER_MEDIA_TYPE, "digest": layer, "size": module.len() }],
        }))
        .unwrap();
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(&manifest)));
        assert_eq!(read_stored(&dir, &digest), Ok(None));
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(write_stored(&dir, &digest, &manifest, &module)).unwrap();
        assert_eq!(read_stored(&dir, &digest), Ok(Some(module)));
        std::fs::write(stored_paths(&dir, &digest).1, b"tampered").unwrap();
        assert!(read_stored(&dir, &digest).unwrap_err().contains("layer's digest"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
