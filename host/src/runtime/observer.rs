//! What the runtime tells the host about the plugins' calls and their outgoing HTTP requests.

use std::time::Duration;

/// Told about every call into a plugin: how long it took and, when metered, the fuel it used;
/// and about every outgoing HTTP request a plugin makes.
pub trait CallObserver: Send + Sync {
    /// `plugin`'s export `export` returned (or trapped) after `elapsed`, using `fuel` units.
    fn called(&self, plugin: &str, export: &'static str, elapsed: Duration, fuel: Option<u64>);

    /// An outgoing request of `plugin` to `origin` (`scheme://host:port` of a granted origin, or
    /// [`UNDECLARED`](super::http::UNDECLARED)) ended with `code` ([`Code::label`](super::http::Code::label): the status, `refused`,
    /// `timeout`, `too_large` or `error`) after `elapsed`, its body read included.
    fn http_request(&self, plugin: &str, origin: &str, code: &str, elapsed: Duration) {
        let _ = (plugin, origin, code, elapsed);
    }
}

/// Observes nothing.
pub(super) struct Unobserved;

impl CallObserver for Unobserved {
    fn called(&self, _: &str, _: &'static str, _: Duration, _: Option<u64>) {}
}
