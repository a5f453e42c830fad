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
mod services;
mod tape;

pub use body::Code;
pub(crate) use hooks::Hooks;
pub(crate) use outbound::Outbound;
pub use outbound::UNDECLARED;
pub use policy::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_TIMEOUT, HTTP_EXPORTS, Origin,
    Policy, Refusal, Scheme, SecretHeader,
};

pub(crate) use services::{Services, imports_http};
