//! wasmop runs Kubernetes controllers as sandboxed WebAssembly plugins.
//!
//! Start at [`host::run`]: it runs one [`controller`] per loaded [`runtime::Module`]. A
//! controller watches the plugin's primary kind ([`informer`]), filters events
//! ([`controller::ChangeFilter`]), serializes work per object ([`scheduler`]), calls the plugin
//! in a fresh sandbox ([`runtime`]) and carries out the outcome ([`writer`]).

pub mod controller;
pub mod host;
pub mod informer;
pub mod object;
pub mod ratelimit;
pub mod retry;
pub mod runtime;
pub mod scheduler;
pub mod selector;
pub mod settings;
pub mod writer;
