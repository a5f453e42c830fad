//! Granted outgoing HTTP (`wasi:http`): linked only for plugins that import it, and allowed
//! only to the origins their `http-grant` names, only in the exports that exist for it
//! ([`HTTP_EXPORTS`]); every other request is refused before a socket is opened. The host adds
//! the secret headers from Kubernetes Secrets ([`crate::secrets`]) and holds each request to the
//! grant's connect and total timeouts, response-size cap and concurrency. A recorded call's
//! requests are recorded with their responses, and a replayed call's are answered from its
//! record ([`tape`]).

mod body;
mod hooks;
mod outbound;
mod policy;
mod tape;

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

/// What every plugin's outgoing HTTP shares: where Secrets are read and where requests are
/// counted.
pub(crate) struct Services {
    secrets: RwLock<Arc<dyn SecretReader>>,
    observer: Arc<dyn CallObserver>,
}

impl Services {
    /// No Secrets until [`Services::read_secrets_with`]; requests reported to `observer`.
    pub(crate) fn new(observer: Arc<dyn CallObserver>) -> Self {
        Self { secrets: RwLock::new(Arc::new(NoSecrets)), observer }
    }

    /// Reads secret headers with `secrets` from now on.
    pub(crate) fn read_secrets_with(&self, secrets: Arc<dyn SecretReader>) {
        *self.secrets.write().expect("never poisoned") = secrets;
    }

    fn secrets(&self) -> Arc<dyn SecretReader> {
        self.secrets.read().expect("never poisoned").clone()
    }
}

/// Whether a component imports any `wasi:http` interface: then it is linked with `wasi:http`,
/// and must declare a grant.
pub(crate) fn imports_http(engine: &wasmtime::Engine, component: &wasmtime::component::Component) -> bool {
    component.component_type().imports(engine).any(|(name, _)| name.starts_with("wasi:http/"))
}
