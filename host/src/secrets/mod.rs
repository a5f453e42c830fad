//! Values the host reads from Kubernetes Secrets on a plugin's behalf (the headers of its granted
//! outgoing HTTP, the token of its inbound events), so that tokens never sit in a module. The
//! plugin names a key of a Secret; the host reads it, keeps it briefly ([`CACHE_TTL`]) and never
//! hands it to the plugin.
//!
//! A plugin has only the Secrets it may read ([`access`]): those its own identity (the
//! ServiceAccount it is impersonated as) may `get`, read as that identity, and those the operator
//! allows it (`allowedSecrets` in its overrides), read as the host. A plugin that names another
//! is refused at load, and its reader ([`PluginSecrets`]) refuses such a read too. The host's
//! own reads (the registry credentials the operator names) go through [`KubeSecrets`] directly.

mod plugin;
mod read;
mod reader;

pub use plugin::PluginSecrets;
pub use read::{CACHE_TTL, DEFAULT_NAMESPACE, KubeSecrets};
pub use reader::{Identity, NoSecrets, SecretError, SecretKey, SecretReader, SecretRef};
