//! What the API server serves: a declared kind resolved to the resource it is served as, or,
//! when it is not served, the served kind closest to it.

use kube::Client;
use kube::api::{ApiResource, GroupVersionKind};

use crate::runtime::bindings::wasmop::plugin::types::KindRef;

/// Errors of setting up a watch.
#[derive(Debug, thiserror::Error)]
pub enum InformerError {
    /// The API server does not serve the kind (for example, its CRD is not installed).
    #[error("the API server does not serve {group}/{version} {kind}: {source}")]
    DiscoveryFailed {
        /// API group.
        group: String,
        /// API version.
        version: String,
        /// Kind.
        kind: String,
        /// The discovery error.
        #[source]
        source: kube::Error,
    },
}

impl InformerError {
    /// Whether the API server could not be asked (not an answer that it does not serve the kind).
    pub fn unreachable(&self) -> bool {
        match self {
            InformerError::DiscoveryFailed { source, .. } => crate::reachability::unreachable(source),
        }
    }
}

/// Resolves a kind to an [`ApiResource`] by discovery (one request for its group version), so a
/// kind the API server does not serve is found before anything watches it, plural or not. A
/// plural the plugin gave that the API server does not use is replaced by the served one, with a
/// warning.
pub async fn resolve(client: &Client, kind: &KindRef) -> Result<ApiResource, InformerError> {
    let gvk = GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind);
    let (resource, _) =
        kube::discovery::pinned_kind(client, &gvk).await.map_err(|source| InformerError::DiscoveryFailed {
            group: kind.group.clone(),
            version: kind.version.clone(),
            kind: kind.kind.clone(),
            source,
        })?;
    if let Some(plural) = kind.plural.as_ref().filter(|p| **p != resource.plural) {
        tracing::warn!(
            kind = kind.kind,
            declared = plural,
            served = resource.plural,
            "the declared plural is not the one the API server serves; using the served one"
        );
    }
    Ok(resource)
}

/// Why `kind` is not served, in words, naming the served kind closest to it (found by
/// discovering every kind the cluster serves).
pub async fn not_served(client: &Client, kind: &KindRef) -> String {
    use wasmop_core::served;
    let group_version =
        if kind.group.is_empty() { kind.version.clone() } else { format!("{}/{}", kind.group, kind.version) };
    let served = match kube::discovery::Discovery::new(client.clone()).run_aggregated().await {
        Ok(discovery) => discovery
            .groups()
            .flat_map(|group| group.versions().flat_map(|v| group.versioned_resources(v)).collect::<Vec<_>>())
            .map(|(resource, _)| served::Served { group_version: resource.api_version, kind: resource.kind })
            .collect(),
        Err(err) => {
            tracing::warn!(%err, "cannot discover the served kinds to suggest one");
            Vec::new()
        }
    };
    let closest = served::closest(&kind.kind, &group_version, &served);
    served::not_served(&kind.kind, &group_version, closest)
}
