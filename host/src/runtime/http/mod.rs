//! Granted outgoing HTTP (`wasi:http`): linked only for plugins that import it, and allowed
//! only to the origins their `http-grant` names, only in the exports that exist for it
//! ([`HTTP_EXPORTS`]); every other request is refused before a socket is opened. The host adds
//! the secret headers from Kubernetes Secrets ([`crate::secrets`]) and holds each request to the
//! grant's connect and total timeouts, response-size cap and concurrency. Each plugin's Secrets
//! are read by the reader the host gave it ([`super::Runtime::read_secrets_for`]). A recorded
//! call's requests are recorded with their responses, and a replayed call's are answered from its
//! record ([`tape`]).

mod body;
mod hooks;
mod outbound;
mod policy;
mod send;
mod tape;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

pub use body::Code;
pub(crate) use hooks::Hooks;
pub(crate) use outbound::Outbound;
pub use outbound::UNDECLARED;
pub use policy::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_TIMEOUT, HTTP_EXPORTS, Origin,
    Policy, Refusal, Scheme, SecretHeader,
};

use super::CallObserver;
use crate::secrets::{NoSecrets, SecretReader};

/// What every plugin's outgoing HTTP shares: where each plugin's Secrets are read and where
/// requests are counted.
pub(crate) struct Services {
    /// Each plugin's reader, by plugin name.
    secrets: RwLock<HashMap<String, Arc<dyn SecretReader>>>,
    observer: Arc<dyn CallObserver>,
    /// Addresses no granted host name may lead to.
    pub(crate) unreachable: send::Unreachable,
}

impl Services {
    /// No plugin reads Secrets until [`Services::read_secrets_for`] names it; requests reported
    /// to `observer`.
    pub(crate) fn new(observer: Arc<dyn CallObserver>) -> Self {
        Self { secrets: RwLock::new(HashMap::new()), observer, unreachable: send::Unreachable::default() }
    }

    /// Reads the secret headers of plugin `plugin` with `secrets` from now on; `None`: with
    /// nothing.
    pub(crate) fn read_secrets_for(&self, plugin: &str, secrets: Option<Arc<dyn SecretReader>>) {
        let mut readers = self.secrets.write().expect("never poisoned");
        match secrets {
            Some(secrets) => readers.insert(plugin.to_string(), secrets),
            None => readers.remove(plugin),
        };
    }

    /// Plugin `plugin`'s reader; one that reads nothing when it has none.
    pub(crate) fn secrets(&self, plugin: &str) -> Arc<dyn SecretReader> {
        let readers = self.secrets.read().expect("never poisoned");
        readers.get(plugin).cloned().unwrap_or_else(|| Arc::new(NoSecrets))
    }
}

/// Whether a component imports any `wasi:http` interface: then it is linked with `wasi:http`,
/// and must declare a grant.
pub(crate) fn imports_http(engine: &wasmtime::Engine, component: &wasmtime::component::Component) -> bool {
    component.component_type().imports(engine).any(|(name, _)| name.starts_with("wasi:http/"))
}
