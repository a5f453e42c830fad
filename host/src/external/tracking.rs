//! The tracking records of external dependents: a ConfigMap (or Secret) named
//! `<primary>-<plugin>-ext` in the primary's namespace, owned by the primary, holding the IDs
//! the external system gave its objects ([`wasmop_core::external`] says what it holds). The
//! garbage collector deletes it with the primary, after the host released its finalizer.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use wasmop_core::external::{Ids, Tracking, decode, encode, record_name};

use crate::wire::Object;

/// Reads and writes tracking records.
#[derive(Clone)]
pub struct TrackingRecords {
    /// `None` in unit tests: nothing is read or written.
    client: Option<Client>,
    fence: crate::fence::Fence,
    /// Where the records of cluster-scoped primaries live.
    namespace: String,
}

impl TrackingRecords {
    /// Records written with `client` behind `fence`; those of cluster-scoped primaries in
    /// `namespace`.
    pub fn new(client: Client, fence: crate::fence::Fence, namespace: String) -> Self {
        Self { client: Some(client), fence, namespace }
    }

    /// Records that are never read or written, for unit tests.
    #[cfg(test)]
    pub(crate) fn detached() -> Self {
        Self { client: None, fence: crate::fence::Fence::unfenced(), namespace: "default".into() }
    }

    fn namespace<'a>(&'a self, primary: &'a Object) -> &'a str {
        primary.metadata.namespace.as_deref().unwrap_or(&self.namespace)
    }

    /// The IDs `plugin` tracks for `primary`: the records its `trackings` use, merged; none
    /// when they do not exist.
    pub async fn read(
        &self,
        plugin: &str,
        primary: &Object,
        trackings: &HashMap<String, Tracking>,
    ) -> Result<Ids, kube::Error> {
        let Some(client) = &self.client else { return Ok(Ids::new()) };
        let uses = |tracking: Tracking| trackings.values().any(|t| *t == tracking);
        let (namespace, name) = (self.namespace(primary), record_name(&primary.name_any(), plugin));
        let mut ids = Ids::new();
        if uses(Tracking::ConfigMap)
            && let Some(map) = Api::<ConfigMap>::namespaced(client.clone(), namespace).get_opt(&name).await?
        {
            ids.extend(decode(&map.data.unwrap_or_default()));
        }
        if uses(Tracking::Secret)
            && let Some(secret) = Api::<Secret>::namespaced(client.clone(), namespace).get_opt(&name).await?
        {
            let data: BTreeMap<String, String> = secret
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                .collect();
            ids.extend(decode(&data));
        }
        Ok(ids)
    }

    /// Writes `ids` into `primary`'s records, each dependent's into the record its tracking
    /// names (server-side apply, field manager `wasmop-<plugin>`).
    pub async fn write(
        &self,
        plugin: &str,
        primary: &Object,
        trackings: &HashMap<String, Tracking>,
        ids: &Ids,
    ) -> Result<(), TrackingError> {
        let Some(client) = &self.client else { return Ok(()) };
        let split = |wanted: Tracking| -> Ids {
            ids.iter()
                .filter(|((d, _), _)| trackings.get(d) == Some(&wanted))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        let metadata = ObjectMeta {
            name: Some(record_name(&primary.name_any(), plugin)),
            namespace: Some(self.namespace(primary).to_owned()),
            owner_references: owner(primary).map(|o| vec![o]),
            labels: Some(BTreeMap::from([(wasmop_core::dependent::MANAGED_BY_LABEL.to_owned(), plugin.to_owned())])),
            ..ObjectMeta::default()
        };
        let name = metadata.name.clone().unwrap_or_default();
        let params = PatchParams::apply(&format!("wasmop-{plugin}")).force();
        let namespace = self.namespace(primary);
        if trackings.values().any(|t| *t == Tracking::ConfigMap) {
            let map = ConfigMap {
                metadata: metadata.clone(),
                data: Some(encode(&split(Tracking::ConfigMap))),
                ..ConfigMap::default()
            };
            let api = Api::<ConfigMap>::namespaced(client.clone(), namespace);
            let patch = Patch::Apply(&map);
            let request = api.patch(&name, &params, &patch);
            self.fence.write(request).await??;
        }
        if trackings.values().any(|t| *t == Tracking::Secret) {
            let data =
                encode(&split(Tracking::Secret)).into_iter().map(|(k, v)| (k, ByteString(v.into_bytes()))).collect();
            let secret = Secret { metadata, data: Some(data), ..Secret::default() };
            let api = Api::<Secret>::namespaced(client.clone(), namespace);
            let patch = Patch::Apply(&secret);
            let request = api.patch(&name, &params, &patch);
            self.fence.write(request).await??;
        }
        Ok(())
    }
}

/// An owner reference to `primary`, so the record goes with it.
fn owner(primary: &Object) -> Option<OwnerReference> {
    let types = primary.types.as_ref()?;
    Some(OwnerReference {
        api_version: types.api_version.clone(),
        kind: types.kind.clone(),
        name: primary.name_any(),
        uid: primary.uid()?,
        controller: Some(true),
        block_owner_deletion: None,
    })
}

/// A failed read or write of a tracking record.
#[derive(Debug, thiserror::Error)]
pub enum TrackingError {
    /// The API server refused or could not be reached.
    #[error("tracking record: {}", crate::api_error::describe(.0))]
    Api(#[from] kube::Error),
    /// Not sent (this replica does not lead), or abandoned.
    #[error("tracking record: {0}")]
    Unanswered(#[from] crate::fence::Unanswered),
}

impl TrackingError {
    /// Whether the API server could not be reached.
    pub fn unreachable(&self) -> bool {
        match self {
            Self::Api(err) => crate::reachability::unreachable(err),
            Self::Unanswered(_) => true,
        }
    }
}
