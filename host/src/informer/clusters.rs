//! The clusters the host watches: the primaries' own cluster and remote clusters named at start
//! (`wasmop run --cluster NAME=...`), each with its own registry of shared watches.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use kube::Client;

use super::Registry;
use crate::fence::Fence;

/// A watch names a cluster the host was not given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cluster {name:?} is not known to the host (known: {known}); give it with --cluster {name}=CONTEXT")]
pub struct UnknownCluster {
    /// The name the plugin used.
    pub name: String,
    /// The names the host knows, comma separated.
    pub known: String,
}

/// The host's clusters. Watches are shared within a cluster, never across clusters.
#[derive(Clone)]
pub struct Clusters {
    local: Arc<Registry>,
    /// How the local client was made, to make impersonating ones.
    local_config: Option<kube::Config>,
    remote: BTreeMap<String, Arc<Registry>>,
    /// The host's own writing clients, one per fence they write under ([`Clusters::writing`]).
    writing: Arc<Mutex<Vec<(Fence, Client)>>>,
}

/// The clients that write for one plugin.
#[derive(Clone)]
pub struct Writes {
    /// Writes the plugin's objects: as its ServiceAccount, when it has one.
    pub objects: Client,
    /// Publishes its Events: as the host.
    pub events: Client,
}

/// A client impersonating someone could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ImpersonationError {
    /// The host was given a client, not a configuration.
    #[error("cannot impersonate {0}: the host was started without a client configuration")]
    NoConfig(String),
    /// The client could not be built.
    #[error("cannot build a client impersonating {user}: {source}")]
    Client {
        /// Who.
        user: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

impl Clusters {
    /// Only the primaries' cluster, reached with `client`.
    pub fn new(client: Client) -> Self {
        let client = bounded(client);
        Self { local: Registry::new(client), local_config: None, remote: BTreeMap::new(), writing: Arc::default() }
    }

    /// Only the primaries' cluster, reached with a client made from `config`; the host can then
    /// write as a plugin's ServiceAccount.
    pub fn from_config(config: kube::Config) -> Result<Self, kube::Error> {
        let config = without_retries(config);
        let client = bounded(Client::try_from(config.clone())?);
        let local = Registry::new(client);
        Ok(Self { local, local_config: Some(config), remote: BTreeMap::new(), writing: Arc::default() })
    }

    /// The clients that write for a plugin under `fence`, as `user` (its ServiceAccount) when
    /// given. Under an election their connections write only within the term they were opened
    /// in ([`crate::fence::client`]); the host's own one is shared by the plugins of a fence.
    pub fn writing(&self, fence: &Fence, user: Option<&str>) -> Result<Writes, ImpersonationError> {
        let Some(config) = self.local_config.as_ref().filter(|_| fence.is_elected()) else {
            let objects = match user {
                Some(user) => self.impersonating(user)?,
                None => self.local.client().clone(),
            };
            return Ok(Writes { objects, events: self.local.client().clone() });
        };
        let fenced = |config: kube::Config, who: &str| {
            crate::fence::client(&config, fence)
                .map(bounded)
                .map_err(|source| ImpersonationError::Client { user: who.into(), source })
        };
        let events = {
            let mut writing = self.writing.lock().expect("never poisoned");
            match writing.iter().find(|(of, _)| of.shares_terms(fence)) {
                Some((_, client)) => client.clone(),
                None => {
                    let client = fenced(config.clone(), "the host")?;
                    writing.push((fence.clone(), client.clone()));
                    client
                }
            }
        };
        let objects = match user {
            Some(user) => {
                let mut config = config.clone();
                config.auth_info.impersonate = Some(user.to_string());
                fenced(config, user)?
            }
            None => events.clone(),
        };
        Ok(Writes { objects, events })
    }

    /// A client of the primaries' cluster whose requests the API server authorizes as `user`
    /// (Kubernetes impersonation; the host's own identity needs the `impersonate` verb).
    pub fn impersonating(&self, user: &str) -> Result<Client, ImpersonationError> {
        let mut config = self.local_config.clone().ok_or_else(|| ImpersonationError::NoConfig(user.into()))?;
        config.auth_info.impersonate = Some(user.to_string());
        Client::try_from(config).map(bounded).map_err(|source| ImpersonationError::Client { user: user.into(), source })
    }

    /// Adds a remote cluster under `name`.
    #[must_use]
    pub fn with_remote(mut self, name: impl Into<String>, client: Client) -> Self {
        self.remote.insert(name.into(), Registry::new(bounded(client)));
        self
    }

    /// The primaries' cluster.
    pub fn local(&self) -> &Arc<Registry> {
        &self.local
    }

    /// The registry of `cluster`; `None` names the primaries' cluster.
    pub fn get(&self, cluster: Option<&str>) -> Result<&Arc<Registry>, UnknownCluster> {
        match cluster {
            None => Ok(&self.local),
            Some(name) => self.remote.get(name).ok_or_else(|| UnknownCluster {
                name: name.to_string(),
                known: if self.remote.is_empty() {
                    "none".to_string()
                } else {
                    self.remote.keys().cloned().collect::<Vec<_>>().join(", ")
                },
            }),
        }
    }
}

/// `config` without kube-client's own retries (429, 503 and 504, up to 15 tries with backoff):
/// the host retries a failed request itself, in a new run that checks the leader's fence again
/// (`crate::leader`) and counts in the scheduler's backoff; a retry below the host would send a
/// write the fence no longer allows. Watches retry with the watcher's own backoff.
fn without_retries(mut config: kube::Config) -> kube::Config {
    config.default_retry = false;
    config
}

/// `client`, every request but a watch given the API server's own deadline
/// ([`super::deadlines`]).
fn bounded(client: Client) -> Client {
    super::deadlines::with_deadlines(client, crate::fence::REQUEST_TIMEOUT)
}

/// A remote cluster as given on the command line: `NAME=CONTEXT`, `NAME=CONTEXT@KUBECONFIG` or
/// `NAME=@KUBECONFIG` (that file's current context).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSpec {
    /// The name plugins use in their watches.
    pub name: String,
    /// The kubeconfig context; `None` is the file's current context.
    pub context: Option<String>,
    /// The kubeconfig file; `None` is the default (`KUBECONFIG` or `~/.kube/config`).
    pub kubeconfig: Option<std::path::PathBuf>,
}

/// Errors of reaching a remote cluster.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The command-line value is malformed.
    #[error("--cluster {0:?}: expected NAME=CONTEXT, NAME=CONTEXT@KUBECONFIG or NAME=@KUBECONFIG")]
    Malformed(String),
    /// The kubeconfig cannot be read or has no such context.
    #[error("cluster {name:?}: {source}")]
    Config {
        /// The cluster's name.
        name: String,
        /// What went wrong.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No client can be built from the configuration.
    #[error("cluster {name:?}: {source}")]
    Client {
        /// The cluster's name.
        name: String,
        /// What went wrong.
        #[source]
        source: kube::Error,
    },
}

impl std::str::FromStr for ClusterSpec {
    type Err = ClusterError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let malformed = || ClusterError::Malformed(s.to_string());
        let (name, target) = s.split_once('=').ok_or_else(malformed)?;
        let (context, kubeconfig) = match target.split_once('@') {
            Some((context, file)) if !file.is_empty() => (context, Some(file.into())),
            Some(_) => return Err(malformed()),
            None => (target, None),
        };
        if name.is_empty() || (context.is_empty() && kubeconfig.is_none()) {
            return Err(malformed());
        }
        Ok(Self { name: name.to_string(), context: Some(context.to_string()).filter(|c| !c.is_empty()), kubeconfig })
    }
}

impl ClusterSpec {
    /// Builds a client for the cluster.
    pub async fn connect(&self) -> Result<Client, ClusterError> {
        use kube::config::{Config, KubeConfigOptions, Kubeconfig};
        let config_error = |source| ClusterError::Config { name: self.name.clone(), source };
        let kubeconfig = match &self.kubeconfig {
            Some(path) => Kubeconfig::read_from(path),
            None => Kubeconfig::read(),
        }
        .map_err(config_error)?;
        let options = KubeConfigOptions { context: self.context.clone(), ..KubeConfigOptions::default() };
        let config = Config::from_custom_kubeconfig(kubeconfig, &options).await.map_err(config_error)?;
        Client::try_from(without_retries(config))
            .map_err(|source| ClusterError::Client { name: self.name.clone(), source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_specs_name_a_context_a_file_or_both() {
        let spec: ClusterSpec = "remote=prod".parse().unwrap();
        assert_eq!((spec.name.as_str(), spec.context.as_deref(), spec.kubeconfig), ("remote", Some("prod"), None));
        let spec: ClusterSpec = "remote=prod@/k/config".parse().unwrap();
        assert_eq!(spec.kubeconfig.as_deref(), Some(std::path::Path::new("/k/config")));
        let spec: ClusterSpec = "remote=@/k/config".parse().unwrap();
        assert_eq!(spec.context, None);
        for bad in ["remote", "=ctx", "remote=", "remote=ctx@", "remote=@"] {
            assert!(bad.parse::<ClusterSpec>().is_err(), "{bad}");
        }
    }
}
