//! The manifest's request, made here rather than by oci-client, whose own reads the whole answer
//! before anything can look at its size: this one reads the answer as it arrives and stops at
//! [`MAX_MANIFEST_BYTES`], so a registry serving an endless manifest costs 4 MiB at most.
//! Authentication is still oci-client's: its token for the repository, or the basic credentials.

use oci_client::errors::{OciDistributionError, OciEnvelope};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};

/// The largest manifest the host reads (registries commonly refuse those over 4 MiB).
pub const MAX_MANIFEST_BYTES: usize = 4 << 20;

/// How much of a refusal's body is read, for its message.
const MAX_ERROR_BYTES: usize = 64 << 10;

/// Why the manifest was not had.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The registry or the transport failed, as oci-client reports it.
    #[error(transparent)]
    Registry(#[from] OciDistributionError),
    /// The manifest is larger than [`MAX_MANIFEST_BYTES`]; reading stopped there.
    #[error("the manifest is larger than 4 MiB; reading stopped there")]
    TooLarge,
}

/// Where the manifest is asked for, and how.
pub struct ManifestRequest<'a> {
    /// The HTTP client: oci-client's reqwest, with the same TLS settings and timeouts.
    pub http: &'a oci_http::Client,
    /// The registry client whose authentication is used.
    pub registry: &'a Client,
    /// `http` or `https`, as the registry client speaks to this registry.
    pub scheme: &'a str,
    /// The media types the host takes.
    pub accepted: &'a [&'a str],
}

impl ManifestRequest<'_> {
    /// The manifest `reference` names (by its tag, else its digest), read up to
    /// [`MAX_MANIFEST_BYTES`], authenticated with `auth`.
    pub async fn pull(&self, reference: &Reference, auth: &RegistryAuth) -> Result<Vec<u8>, ManifestError> {
        let token = self.registry.auth(reference, auth, RegistryOperation::Pull).await?;
        let url = self.url(reference);
        let mut request = self.http.get(&url).header("Accept", self.accepted.join(", "));
        // oci-client keeps the basic credentials, not a token, for a registry that asks for those
        // (and for one that asks for nothing, which ignores them).
        request = match (token, auth) {
            (Some(token), _) => request.bearer_auth(token),
            (None, RegistryAuth::Basic(user, password)) => request.basic_auth(user, Some(password)),
            (None, _) => request,
        };
        let mut response = request.send().await.map_err(OciDistributionError::from)?;
        let status = response.status();
        if !status.is_success() {
            let body = read_capped(&mut response, MAX_ERROR_BYTES).await.unwrap_or_default();
            return Err(refusal(status, &body, &url).into());
        }
        if response.content_length().is_some_and(|length| length > MAX_MANIFEST_BYTES as u64) {
            return Err(ManifestError::TooLarge);
        }
        read_capped(&mut response, MAX_MANIFEST_BYTES).await
    }

    /// The manifest's URL, as oci-client makes it.
    fn url(&self, reference: &Reference) -> String {
        let name = reference.digest().or_else(|| reference.tag()).unwrap_or("latest");
        let namespace = reference.namespace().map(|ns| format!("?ns={ns}")).unwrap_or_default();
        format!(
            "{}://{}/v2/{}/manifests/{name}{namespace}",
            self.scheme,
            reference.resolve_registry(),
            reference.repository()
        )
    }
}

/// The body of `response`, failing as soon as it is larger than `cap`.
async fn read_capped(response: &mut oci_http::Response, cap: usize) -> Result<Vec<u8>, ManifestError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(OciDistributionError::from)? {
        if body.len() + chunk.len() > cap {
            return Err(ManifestError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A refusal as oci-client reports it: the registry's error envelope when it sent one.
fn refusal(status: oci_http::StatusCode, body: &[u8], url: &str) -> OciDistributionError {
    let url = url.to_string();
    if status == oci_http::StatusCode::UNAUTHORIZED {
        return OciDistributionError::UnauthorizedError { url };
    }
    match serde_json::from_slice::<OciEnvelope>(body) {
        Ok(envelope) if status.is_client_error() => OciDistributionError::RegistryError { envelope, url },
        _ => OciDistributionError::ServerError {
            code: status.as_u16(),
            url,
            message: String::from_utf8_lossy(body).into_owned(),
        },
    }
}
