//! Values the host reads from Kubernetes Secrets on a plugin's behalf (the headers of its granted
//! outgoing HTTP), so that tokens never sit in a module. The plugin names a key of a Secret; the
//! host reads it with its own client, keeps it briefly ([`CACHE_TTL`]) and never hands it to
//! the plugin.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;

/// How long a Secret read from the API server is used before it is read again: a rotated token
/// is picked up within this time.
pub const CACHE_TTL: Duration = Duration::from_secs(30);

/// The namespace of a Secret that names none and a host that watches all namespaces.
pub const DEFAULT_NAMESPACE: &str = "default";

/// A key of a Secret, as a plugin names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SecretKey {
    /// The Secret's namespace; `None`: the reader's default.
    pub namespace: Option<String>,
    /// The Secret's name.
    pub name: String,
    /// The key in its `data`.
    pub key: String,
}

/// Why a Secret's value cannot be had. The messages name the Secret and the key, never a value.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// No Secret of that name.
    #[error("Secret {namespace}/{name} does not exist")]
    NotFound {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The Secret has no such key.
    #[error("Secret {namespace}/{name} has no key {key:?}")]
    MissingKey {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The key asked for.
        key: String,
    },
    /// The value is not UTF-8 text.
    #[error("key {key:?} of Secret {namespace}/{name} is not UTF-8 text")]
    NotText {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The key asked for.
        key: String,
    },
    /// The API server refused or failed the read.
    #[error("cannot read Secret {namespace}/{name}: {source}")]
    Api {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The host has no cluster to read Secrets from (a plugin called outside a running host).
    #[error("no cluster is connected to read Secret {name} from")]
    NoCluster {
        /// The Secret's name.
        name: String,
    },
}

/// Reads Secret values for the host.
pub trait SecretReader: Send + Sync {
    /// The value of `key`, as text.
    fn read<'a>(&'a self, key: &'a SecretKey) -> BoxFuture<'a, Result<String, SecretError>>;
}

/// Reads nothing: what the host's plugins see before it is connected to a cluster.
pub struct NoSecrets;

impl SecretReader for NoSecrets {
    fn read<'a>(&'a self, key: &'a SecretKey) -> BoxFuture<'a, Result<String, SecretError>> {
        futures::future::ready(Err(SecretError::NoCluster { name: key.name.clone() })).boxed()
    }
}

/// A Secret's data, decoded.
type Data = Arc<BTreeMap<String, Vec<u8>>>;

/// Reads Secrets from the API server with the host's client, keeping each for [`CACHE_TTL`].
pub struct KubeSecrets {
    client: kube::Client,
    namespace: String,
    cache: moka::sync::Cache<(String, String), Data>,
}

impl KubeSecrets {
    /// Reads with `client`; Secrets that name no namespace are looked up in `namespace` (the
    /// host's `--namespace`), else in [`DEFAULT_NAMESPACE`].
    pub fn new(client: kube::Client, namespace: Option<String>) -> Self {
        Self {
            client,
            namespace: namespace.unwrap_or_else(|| DEFAULT_NAMESPACE.to_string()),
            cache: moka::sync::Cache::builder().max_capacity(1024).time_to_live(CACHE_TTL).build(),
        }
    }

    async fn data(&self, namespace: &str, name: &str) -> Result<Data, SecretError> {
        let slot = (namespace.to_string(), name.to_string());
        if let Some(data) = self.cache.get(&slot) {
            return Ok(data);
        }
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let secret = api.get_opt(name).await.map_err(|source| SecretError::Api {
            namespace: namespace.to_string(),
            name: name.to_string(),
            source,
        })?;
        let secret =
            secret.ok_or_else(|| SecretError::NotFound { namespace: namespace.to_string(), name: name.to_string() })?;
        let mut data: BTreeMap<String, Vec<u8>> =
            secret.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect();
        // `stringData` is write-only, but a Secret created by a client that kept it is honoured.
        for (k, v) in secret.string_data.unwrap_or_default() {
            data.entry(k).or_insert_with(|| v.into_bytes());
        }
        let data = Arc::new(data);
        self.cache.insert(slot, data.clone());
        Ok(data)
    }
}

impl SecretReader for KubeSecrets {
    fn read<'a>(&'a self, key: &'a SecretKey) -> BoxFuture<'a, Result<String, SecretError>> {
        async move {
            let namespace = key.namespace.as_deref().unwrap_or(&self.namespace);
            let data = self.data(namespace, &key.name).await?;
            let at = || (namespace.to_string(), key.name.clone(), key.key.clone());
            let bytes = data.get(&key.key).ok_or_else(|| {
                let (namespace, name, key) = at();
                SecretError::MissingKey { namespace, name, key }
            })?;
            String::from_utf8(bytes.clone()).map_err(|_| {
                let (namespace, name, key) = at();
                SecretError::NotText { namespace, name, key }
            })
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn without_a_cluster_a_read_names_the_secret() {
        let key = SecretKey { namespace: None, name: "dns-token".into(), key: "token".into() };
        let err = NoSecrets.read(&key).await.unwrap_err();
        assert_eq!(err.to_string(), "no cluster is connected to read Secret dns-token from");
    }

    #[test]
    fn errors_name_the_secret_and_key_never_a_value() {
        let err = SecretError::MissingKey { namespace: "ns".into(), name: "s".into(), key: "token".into() };
        assert_eq!(err.to_string(), "Secret ns/s has no key \"token\"");
        let err = SecretError::NotFound { namespace: "ns".into(), name: "s".into() };
        assert_eq!(err.to_string(), "Secret ns/s does not exist");
    }
}
