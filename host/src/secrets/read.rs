//! Reading Secrets from the API server as one identity, with a cache that keeps each identity's
//! reads apart: what the host read never answers a read made as a plugin's ServiceAccount, so a
//! grant the account lost takes effect within [`CACHE_TTL`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use super::reader::{Identity, SecretError, SecretKey, SecretReader};

/// How long a Secret read from the API server is used before it is read again: a rotated token
/// is picked up within this time.
pub const CACHE_TTL: Duration = Duration::from_secs(30);

/// The namespace of a Secret that names none and a host that watches all namespaces.
pub const DEFAULT_NAMESPACE: &str = "default";

/// A Secret's data, decoded.
type Data = Arc<BTreeMap<String, Vec<u8>>>;

/// Who read which Secret: the cache's key.
type Slot = (Identity, String, String);

/// Reads Secrets from the API server as one [`Identity`], keeping each for [`CACHE_TTL`] in a
/// cache it may share with readers of other identities ([`KubeSecrets::as_user`]), each
/// identity's entries apart.
pub struct KubeSecrets {
    client: kube::Client,
    identity: Identity,
    namespace: String,
    cache: moka::sync::Cache<Slot, Data>,
}

impl KubeSecrets {
    /// Reads as the host with `client`; Secrets that name no namespace are looked up in
    /// `namespace` (the host's `--namespace`), else in [`DEFAULT_NAMESPACE`].
    pub fn new(client: kube::Client, namespace: Option<String>) -> Self {
        Self {
            client,
            identity: Identity::Host,
            namespace: namespace.unwrap_or_else(|| DEFAULT_NAMESPACE.to_string()),
            cache: moka::sync::Cache::builder().max_capacity(1024).time_to_live(CACHE_TTL).build(),
        }
    }

    /// A reader as `user`, with `client` (which impersonates it), in the same default namespace
    /// and sharing this reader's cache.
    pub fn as_user(&self, user: &str, client: kube::Client) -> Self {
        Self {
            client,
            identity: Identity::User(user.into()),
            namespace: self.namespace.clone(),
            cache: self.cache.clone(),
        }
    }

    /// Where Secrets that name no namespace are read.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    async fn data(&self, namespace: &str, name: &str) -> Result<Data, SecretError> {
        let slot = (self.identity.clone(), namespace.to_string(), name.to_string());
        if let Some(data) = self.cache.get(&slot) {
            return Ok(data);
        }
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let secret = api.get_opt(name).await.map_err(|source| match source {
            kube::Error::Api(status) if status.code == 403 => SecretError::Forbidden {
                namespace: namespace.to_string(),
                name: name.to_string(),
                identity: self.identity.clone(),
            },
            source => SecretError::Api { namespace: namespace.to_string(), name: name.to_string(), source },
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
    use crate::informer::api_double;

    const USER: &str = "system:serviceaccount:ns:plugin";
    /// Longer than any answer of the double takes.
    const PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

    fn key() -> SecretKey {
        SecretKey { namespace: Some("ns".into()), name: "token".into(), key: "value".into() }
    }

    /// A client of `url` that impersonates `user`, as `Clusters::impersonating` makes it.
    fn impersonating(url: &str, user: &str) -> kube::Client {
        let mut config = kube::Config::new(url.parse().unwrap());
        config.auth_info.impersonate = Some(user.into());
        kube::Client::try_from(config).unwrap()
    }

    #[tokio::test]
    async fn a_read_as_the_host_never_answers_a_read_as_a_plugins_account() {
        let (client, mut requests, url) = api_double::start_at().await;
        let host = KubeSecrets::new(client, None);
        let plugin = host.as_user(USER, impersonating(&url, USER));
        let secret = serde_json::json!({ "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": "token", "namespace": "ns" }, "data": { "value": "aG9zdA==" } });

        let read = tokio::spawn(async move {
            let value = host.read(&key()).await;
            (value, host)
        });
        let request = requests.recv().await.unwrap();
        assert_eq!(request.target(), "/api/v1/namespaces/ns/secrets/token");
        assert!(!request.head.to_ascii_lowercase().contains("impersonate-user"), "{}", request.head);
        request.answer(&secret);
        let (value, host) = read.await.unwrap();
        assert_eq!(value.unwrap(), "host");
        assert_eq!(host.read(&key()).await.unwrap(), "host", "the host's second read is cached");

        // The same Secret read as the plugin's account is asked of the API server as that
        // account, which may not get it.
        let read = tokio::spawn(async move { plugin.read(&key()).await });
        let asked = tokio::time::timeout(PATIENCE, requests.recv()).await;
        let request = asked.expect("the read as the account is asked of the API server").unwrap();
        assert!(request.head.to_ascii_lowercase().contains(&format!("impersonate-user: {USER}")), "{}", request.head);
        let forbidden = serde_json::json!({ "kind": "Status", "apiVersion": "v1", "status": "Failure",
            "reason": "Forbidden", "code": 403, "message": "secrets \"token\" is forbidden" });
        request.answer_status(403, &forbidden);
        let err = read.await.unwrap().unwrap_err();
        assert!(matches!(err, SecretError::Forbidden { .. }), "{err:?}");
        assert_eq!(err.to_string(), format!("user {USER:?} may not read Secret ns/token"));
    }
}
