//! wasmop runs Kubernetes controllers as sandboxed WebAssembly plugins.
//!
//! Start at [`host::Host`]: it runs one [`controller`] per loaded [`runtime::Module`]. A
//! controller watches the plugin's primary kind ([`informer`]), filters events
//! ([`controller::ChangeFilter`]), maps changes of secondary kinds to primaries ([`source`],
//! [`mapping`]), serializes work per object ([`scheduler`]), calls the plugin in a fresh sandbox
//! ([`runtime`]) and carries out the outcome ([`writer`]).

pub mod api_error;
pub mod controller;
pub mod dependents;
pub mod external;
pub mod fence;
pub mod harness;
pub mod host;
pub mod inbound;
pub mod informer;
pub mod inspect;
pub mod leader;
pub mod listener;
pub mod loader;
pub mod mapping;
pub mod metrics;
pub mod object;
pub mod own_writes;
pub mod peers;
pub mod ratelimit;
pub mod reachability;
pub mod record;
pub mod replay;
/// When a failed reconcile runs again (the core's rule).
pub use wasmop_core::retry;
pub mod runtime;
pub mod scaffold;
pub mod scheduler;
pub mod secret_access;
pub mod secrets;
pub mod settings;
pub mod shadow;
pub mod shards;
pub mod shutdown;
pub mod source;
pub mod trim;
pub mod webhook;
pub mod wire;
pub mod writer;
