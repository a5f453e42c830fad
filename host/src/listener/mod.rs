//! The HTTP/1.1 listeners the host serves its own endpoints on: the inbound events
//! ([`crate::inbound`]) and the admission and conversion webhooks ([`crate::webhook`]). Both
//! bound their clients the same way ([`server::Limits`]: header and body timeouts, a connection
//! cap), read bodies within a size limit ([`body`]) and take TLS connections through bounded
//! handshakes ([`tls`]).

pub mod body;
pub mod server;
pub mod tls;

pub use server::Limits;
