//! One plugin's Secret reader, as the host decided it at load (`secret_access`): the Secrets the operator
//! allowed it are read as the host; any other only as the plugin's own ServiceAccount, so a
//! grant the account loses takes effect (within [`super::CACHE_TTL`]); a plugin without an
//! account has no other.

use std::collections::HashSet;
use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt};

use super::read::KubeSecrets;
use super::reader::{SecretError, SecretKey, SecretReader, SecretRef};

/// Reads the Secrets one plugin may have read for it, and refuses the others without a request.
pub struct PluginSecrets {
    plugin: String,
    /// What the operator allowed it, read as the host.
    allowed: HashSet<SecretRef>,
    host: Arc<KubeSecrets>,
    /// Reads as its ServiceAccount, if it has one.
    own: Option<KubeSecrets>,
}

impl PluginSecrets {
    /// The reader of `plugin`: the `allowed` Secrets with `host`, any other with `own` (a reader
    /// as the plugin's ServiceAccount), if given.
    pub fn new(plugin: &str, allowed: HashSet<SecretRef>, host: Arc<KubeSecrets>, own: Option<KubeSecrets>) -> Self {
        Self { plugin: plugin.to_string(), allowed, host, own }
    }
}

impl SecretReader for PluginSecrets {
    fn read<'a>(&'a self, key: &'a SecretKey) -> BoxFuture<'a, Result<String, SecretError>> {
        let secret = SecretRef::of(key, self.host.namespace());
        if self.allowed.contains(&secret) {
            return self.host.read(key);
        }
        match &self.own {
            Some(own) => own.read(key),
            None => {
                let SecretRef { namespace, name } = secret;
                futures::future::ready(Err(SecretError::NotAllowed { plugin: self.plugin.clone(), namespace, name }))
                    .boxed()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::informer::api_double;

    const USER: &str = "system:serviceaccount:ns:plugin";
    /// Longer than any answer of the double takes.
    const PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

    fn key(name: &str) -> SecretKey {
        SecretKey { namespace: None, name: name.into(), key: "value".into() }
    }

    fn secret(name: &str) -> serde_json::Value {
        serde_json::json!({ "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": name, "namespace": "ns" }, "data": { "value": "c2VjcmV0" } })
    }

    #[tokio::test]
    async fn without_an_account_only_what_the_operator_allowed_is_read_and_as_the_host() {
        let (client, mut requests) = api_double::start().await;
        let host = Arc::new(KubeSecrets::new(client, Some("ns".into())));
        let allowed = HashSet::from([SecretRef { namespace: "ns".into(), name: "granted".into() }]);
        let reader = Arc::new(PluginSecrets::new("b", allowed, host, None));

        let refused = |key| {
            let reader = reader.clone();
            async move { tokio::time::timeout(PATIENCE, reader.read(&key)).await.expect("refused at once") }
        };
        let err = refused(key("wasmop-registry")).await.unwrap_err();
        assert_eq!(err.to_string(), "plugin \"b\" may not read Secret ns/wasmop-registry");
        let named_elsewhere = SecretKey { namespace: Some("other".into()), ..key("granted") };
        assert!(matches!(refused(named_elsewhere).await, Err(SecretError::NotAllowed { .. })));
        assert!(requests.try_recv().is_err(), "a refused read asks the API server nothing");

        let reading = tokio::spawn({
            let reader = reader.clone();
            async move { reader.read(&key("granted")).await }
        });
        let request = requests.recv().await.unwrap();
        assert_eq!(request.target(), "/api/v1/namespaces/ns/secrets/granted");
        assert!(!request.head.to_ascii_lowercase().contains("impersonate-user"), "{}", request.head);
        request.answer(&secret("granted"));
        assert_eq!(reading.await.unwrap().unwrap(), "secret");
    }

    #[tokio::test]
    async fn with_an_account_what_the_operator_did_not_allow_is_read_as_the_account() {
        let (client, mut requests, url) = api_double::start_at().await;
        let host = Arc::new(KubeSecrets::new(client, Some("ns".into())));
        let mut config = kube::Config::new(url.parse().unwrap());
        config.auth_info.impersonate = Some(USER.into());
        let own = host.as_user(USER, kube::Client::try_from(config).unwrap());
        let reader = PluginSecrets::new("a", HashSet::new(), host, Some(own));

        let reading = tokio::spawn(async move { reader.read(&key("own")).await });
        let request = requests.recv().await.unwrap();
        assert_eq!(request.target(), "/api/v1/namespaces/ns/secrets/own");
        assert!(request.head.to_ascii_lowercase().contains(&format!("impersonate-user: {USER}")), "{}", request.head);
        request.answer(&secret("own"));
        assert_eq!(reading.await.unwrap().unwrap(), "secret");
    }
}
