//! What every plugin's outgoing HTTP shares: each plugin's Secret reader, where requests are
//! counted, and the addresses no granted host name may lead to.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use super::send;
use crate::runtime::observer::CallObserver;
use crate::secrets::{NoSecrets, SecretReader};

/// What every plugin's outgoing HTTP shares: where each plugin's Secrets are read and where
/// requests are counted.
pub(crate) struct Services {
    /// Each plugin's reader, by plugin name.
    secrets: RwLock<HashMap<String, Arc<dyn SecretReader>>>,
    pub(super) observer: Arc<dyn CallObserver>,
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
