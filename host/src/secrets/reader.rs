//! What a read of a Secret names and answers, whoever reads it: the key asked for, the Secret it
//! is in, whose rights the read is made with, why it fails, and the reader itself.

use std::fmt;
use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt};

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

/// A Secret by namespace and name, its namespace resolved.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SecretRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl SecretRef {
    /// The Secret of `key`; one that names no namespace is in `default_namespace`.
    pub fn of(key: &SecretKey, default_namespace: &str) -> Self {
        Self { namespace: key.namespace.clone().unwrap_or_else(|| default_namespace.into()), name: key.name.clone() }
    }
}

impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
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
    /// The identity the read was made as may not get the Secret (403).
    #[error("{identity} may not read Secret {namespace}/{name}")]
    Forbidden {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Who asked.
        identity: Identity,
    },
    /// The plugin may not have the Secret read for it ([`access`]): no request is made.
    #[error("plugin {plugin:?} may not read Secret {namespace}/{name}")]
    NotAllowed {
        /// The plugin.
        plugin: String,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
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

/// Whose rights a read is made with.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Identity {
    /// The host's own client.
    Host,
    /// A client impersonating this user (`system:serviceaccount:<namespace>:<name>`).
    User(Arc<str>),
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Host => f.write_str("the host"),
            Self::User(user) => write!(f, "user {user:?}"),
        }
    }
}

/// Reads nothing: what the host's plugins see before it is connected to a cluster.
pub struct NoSecrets;

impl SecretReader for NoSecrets {
    fn read<'a>(&'a self, key: &'a SecretKey) -> BoxFuture<'a, Result<String, SecretError>> {
        futures::future::ready(Err(SecretError::NoCluster { name: key.name.clone() })).boxed()
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
